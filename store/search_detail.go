package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// PackageDetail is everything the catalogue knows of one package.
type PackageDetail struct {
	Package    Package
	Created    time.Time
	Parts      []Part
	Files      []FileEntry
	Origins    []SourceMessage // every source message that carried it
	Deliveries []DeliveryRecord
}

// DeliveryRecord is one delivery row of a package, in any state, as the
// console shows it.
type DeliveryRecord struct {
	Chat    tg.ChatID
	Part    int
	State   string
	Message tg.MessageID // 0 until confirmed
	Account string
	Error   string
	SentAt  time.Time
}

// GetPackageDetail returns a package with its parts, listing, origins and
// deliveries. A missing package is ErrNotFound.
func (s *Store) GetPackageDetail(ctx context.Context, id int64) (PackageDetail, error) {
	var d PackageDetail
	p, err := s.GetPackage(ctx, id)
	if err != nil {
		return d, err
	}
	d.Package = p
	if err := s.pool.QueryRow(ctx, `SELECT created_at FROM packages WHERE id = $1`, id).Scan(&d.Created); err != nil {
		return d, fmt.Errorf("get package %d: %w", id, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT idx, file_name, size, sha256, source_chat_id, source_message_id
		FROM package_parts WHERE package_id = $1 ORDER BY idx`, id)
	if err != nil {
		return d, fmt.Errorf("read parts of package %d: %w", id, err)
	}
	d.Parts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Part, error) {
		var pt Part
		var c, m int64
		err := r.Scan(&pt.Index, &pt.FileName, &pt.Size, &pt.SHA256, &c, &m)
		pt.Source = tg.MessageKey{Chat: tg.ChatID(c), Message: tg.MessageID(m)}
		return pt, err
	})
	if err != nil {
		return d, fmt.Errorf("read parts of package %d: %w", id, err)
	}
	rows, err = s.pool.Query(ctx, `SELECT path, size, is_dir, unsafe FROM package_files WHERE package_id = $1 ORDER BY ord`, id)
	if err != nil {
		return d, fmt.Errorf("read listing of package %d: %w", id, err)
	}
	d.Files, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (FileEntry, error) {
		var f FileEntry
		err := r.Scan(&f.Path, &f.Size, &f.Dir, &f.Unsafe)
		return f, err
	})
	if err != nil {
		return d, fmt.Errorf("read listing of package %d: %w", id, err)
	}
	rows, err = s.pool.Query(ctx, `SELECT chat_id, message_id, topic_id, date, file_name, file_size, outcome
		FROM source_messages WHERE package_id = $1 ORDER BY handled_at, chat_id, message_id`, id)
	if err != nil {
		return d, fmt.Errorf("read origins of package %d: %w", id, err)
	}
	d.Origins, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (SourceMessage, error) {
		var m SourceMessage
		var c, msg int64
		var date *time.Time
		var out string
		err := r.Scan(&c, &msg, &m.TopicID, &date, &m.FileName, &m.FileSize, &out)
		m.Key = tg.MessageKey{Chat: tg.ChatID(c), Message: tg.MessageID(msg)}
		m.Outcome, m.PackageID = Outcome(out), id
		if date != nil {
			m.Date = *date
		}
		return m, err
	})
	if err != nil {
		return d, fmt.Errorf("read origins of package %d: %w", id, err)
	}
	rows, err = s.pool.Query(ctx, `SELECT destination_chat_id, part_idx, state, COALESCE(dest_message_id, 0), account,
			error, sent_at
		FROM deliveries WHERE package_id = $1 ORDER BY destination_chat_id, part_idx`, id)
	if err != nil {
		return d, fmt.Errorf("read deliveries of package %d: %w", id, err)
	}
	d.Deliveries, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeliveryRecord, error) {
		var x DeliveryRecord
		var c, m int64
		var sent *time.Time
		err := r.Scan(&c, &x.Part, &x.State, &m, &x.Account, &x.Error, &sent)
		x.Chat, x.Message = tg.ChatID(c), tg.MessageID(m)
		if sent != nil {
			x.SentAt = *sent
		}
		return x, err
	})
	if err != nil {
		return d, fmt.Errorf("read deliveries of package %d: %w", id, err)
	}
	return d, nil
}
