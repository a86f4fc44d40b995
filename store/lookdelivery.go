package store

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// LookDelivery is LookPackage and LookReconcilePending for one delivery
// (package pkg to dest), with whether it is sent there in full, in one
// statement, the looks that ride with the delivery's lock: the package
// into p, whether it is sent there in full into done, whether a
// reconciliation of dest waits or the catalogue is not the one checked
// into pending, and the unique ids of Telegram files known to carry the
// package's parts into uniqueIDs (those PackageOfPart answers pkg for: a
// unique id names one package, for as long as that package is
// catalogued). A package not in the catalogue fails the read with
// ErrNotFound, as LookPackage's does, after done and pending are read.
func (s *Store) LookDelivery(pkg int64, dest tg.ChatID, p *Package, done, pending *bool, uniqueIDs *[]string) Statement {
	return Statement{SQL: `SELECT p.id, p.content_hash, p.name, p.format, p.total_size, p.part_count, p.file_count,
			p.listing_truncated, p.listing_error, p.origin_chat_id, p.origin_message_id, p.origin_topic_id,
			p.encrypted, p.headers_encrypted, p.detected_format, p.broken,
			(SELECT count(*) FROM deliveries WHERE package_id = $1 AND state = 'sent' AND destination_chat_id = $2),
			EXISTS (SELECT 1 FROM reconciles WHERE destination_chat_id = $2 AND finished_at IS NULL)
				OR NOT (` + catalogueCurrent(3) + `),
			(SELECT array_agg(f.unique_id) FROM remote_files f WHERE f.package_id = $1)
		FROM (SELECT) one LEFT JOIN packages p ON p.id = $1`,
		Args: []any{pkg, int64(dest), s.server.checkedCatalogue()},
		Read: func(rows pgx.Rows) error {
			var id, size, oc, om, topic *int64
			var hash []byte
			var name, format, listErr, detected, broken *string
			var parts, files *int
			var truncated, encrypted, headers *bool
			var sent int
			if err := scanOne(rows, &id, &hash, &name, &format, &size, &parts, &files, &truncated, &listErr, &oc, &om, &topic,
				&encrypted, &headers, &detected, &broken, &sent, pending, uniqueIDs); err != nil {
				return err
			}
			*done = parts != nil && sent >= *parts
			if id == nil {
				*p = Package{}
				return fmt.Errorf("package %d: %w", pkg, ErrNotFound)
			}
			*p = Package{ID: *id, ContentHash: hash, Name: *name, Format: *format, TotalSize: *size, PartCount: *parts,
				FileCount: *files, ListingTruncated: *truncated, ListingError: *listErr,
				Origin:      tg.MessageKey{Chat: tg.ChatID(*oc), Message: tg.MessageID(*om)},
				OriginTopic: *topic, Encrypted: *encrypted, HeadersEncrypted: *headers, DetectedFormat: *detected, Broken: *broken}
			return nil
		}}
}
