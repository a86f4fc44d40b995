package store

import (
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// A package's unit is its rows and everything that goes with them: the
// deliveries it owes, the records of the messages that brought it, their
// dead letters resolved and the locks let go. The server spends about as
// much on a statement's round of parse, bind and execute as on writing a
// row, so a package new to the catalogue goes as one statement
// (newPackageStatement); a package that may be catalogued already goes
// step by step (steps), each step finding the package by its content hash.

// steps are the unit's statements for a package whose content hash may be
// catalogued already (insertPackageSQL writes nothing then, and the steps
// after it act on the package found).
func (n NewPackage) steps(args []any, out *Catalogued) []Statement {
	hash := n.Package.ContentHash
	insert := insertPackageSQL
	if n.HashUnlocked {
		insert = insertNewPackageSQL
	}
	stmts := []Statement{{
		SQL: insert, Args: args,
		Read: func(rows pgx.Rows) error { return scanOne(rows, &out.Created) },
	}, {
		SQL: `SELECT id FROM packages WHERE content_hash = $1`, Args: []any{hash},
		Read: func(rows pgx.Rows) error { return scanOne(rows, &out.ID) },
	}}
	if len(n.Deliveries) > 0 {
		stmts = append(stmts, queueStatement("p.content_hash = $1", hash, n.Deliveries, &out.Queued))
	}
	stmts = append(stmts, handledStatements(n.Sources, hash)...)
	for _, l := range n.Release {
		stmts = append(stmts, l.releaseStatement())
	}
	return stmts
}

// newPackageSQL is insertNewPackageSQL ($1 to $37) followed, in the same
// statement, by the package's deliveries ($38 to $45, as queueSQL's $2 to
// $9), the records of its messages ($46 to $60, as recordSQL's columns),
// their dead letters resolved and the locks let go ($60, $61). It returns
// the package's id and the destinations queued. The package is new, so
// none of its deliveries is sent anywhere yet and none is queued.
var newPackageSQL = strings.Replace(insertNewPackageSQL, `SELECT count(*) > 0 FROM pkg`, `, queued AS (
	INSERT INTO waiting_deliveries (package_id, destination_chat_id, account, route, opens_at,
		source_chat_id, source_topic_id, message_ids, part_count)
	SELECT pkg.id, w.dest, w.account, w.route, w.opens_at, $38, $39, $40, $41
	FROM pkg, unnest($42::bigint[], $43::text[], $44::text[], $45::timestamptz[]) AS w(dest, account, route, opens_at)
	WHERE $5::int > 0
	ON CONFLICT (package_id, destination_chat_id) DO NOTHING
	RETURNING destination_chat_id
), handled AS (
	INSERT INTO source_messages (chat_id, message_id, topic_id, album_id, date, file_name,
		file_size, unique_id, outcome, set_key, part_index, package_id, file_name_raw, file_name_cleaned, edit_date)
	SELECT m.chat, m.msg, m.topic, m.album, m.date, m.name, m.size, m.uid, m.outcome, m.set_key, m.part,
		COALESCE(m.pkg, pkg.id), m.raw, m.raw <> '', m.edit
	FROM pkg, unnest($46::bigint[], $47::bigint[], $48::bigint[], $49::bigint[], $50::timestamptz[], $51::text[],
		$52::bigint[], $53::text[], $54::text[], $55::text[], $56::int[], $57::bigint[], $58::text[], $59::timestamptz[])
		AS m(chat, msg, topic, album, date, name, size, uid, outcome, set_key, part, pkg, raw, edit)
	`+recordConflict+`
), resolved AS (
	UPDATE dead_letters d SET state = 'resolved', next_attempt_at = NULL, updated_at = now()
	FROM unnest($46::bigint[], $47::bigint[]) AS m(chat, msg)
	WHERE d.chat_id = m.chat AND d.message_id = m.msg AND d.state <> 'resolved'
), released AS (
	DELETE FROM package_locks l USING unnest($60::text[], $61::text[]) AS r(name, owner)
	WHERE l.name = r.name AND l.owner = r.owner
)
SELECT pkg.id, ARRAY(SELECT destination_chat_id FROM queued) FROM pkg`, 1)

// newPackageStatement is the unit of n, a package new to the catalogue
// (HashUnlocked, its sources' messages distinct), in one statement:
// args are insertNewPackageSQL's. It fails with the package's unique
// violation when the content hash is catalogued already.
func newPackageStatement(args []any, n NewPackage, out *Catalogued) Statement {
	var ws []any
	if len(n.Deliveries) > 0 {
		ws = queueArgs(n.Deliveries)
	} else {
		ws = []any{int64(0), int64(0), []int64{}, 0, []int64{}, []string{}, []string{}, []time.Time{}}
	}
	args = append(append(args, ws...), messageColumns(n.Sources)...)
	names, owners := make([]string, len(n.Release)), make([]string, len(n.Release))
	var committed []func()
	for i, l := range n.Release {
		names[i], owners[i] = l.name, l.owner
		committed = append(committed, l.startRelease())
	}
	args = append(args, names, owners)
	return Statement{SQL: newPackageSQL, Args: args,
		Read: func(rows pgx.Rows) error {
			var queued []int64
			if err := scanOne(rows, &out.ID, &queued); err != nil {
				return err
			}
			out.Created = true
			for _, d := range queued {
				out.Queued = append(out.Queued, tg.ChatID(d))
			}
			return nil
		},
		Committed: func() {
			for _, f := range committed {
				f()
			}
		}}
}

// queueArgs are queueStatement's arguments $2 to $9 for ws, deliveries of
// one package that share its parts.
func queueArgs(ws []Waiting) []any {
	w := ws[0]
	ids, chat := waitingParts(w)
	dests := make([]int64, len(ws))
	accounts, routes := make([]string, len(ws)), make([]string, len(ws))
	opens := make([]time.Time, len(ws))
	for i, d := range ws {
		dests[i], accounts[i], routes[i], opens[i] = int64(d.Destination), d.Account, d.Route, d.OpensAt
	}
	return []any{chat, w.Topic, ids, w.PartCount, dests, accounts, routes, opens}
}

// messageColumns are msgs as the arrays newPackageSQL unnests ($46 to $59),
// each as recordStatement writes it.
func messageColumns(msgs []SourceMessage) []any {
	k := len(msgs)
	chats, ids, topics, albums := make([]int64, k), make([]int64, k), make([]int64, k), make([]int64, k)
	dates, edits := make([]*time.Time, k), make([]*time.Time, k)
	names, uids, outcomes, sets, raws := make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k)
	sizes, pkgs := make([]int64, k), make([]*int64, k)
	parts := make([]int32, k)
	for i, m := range msgs {
		chats[i], ids[i], topics[i], albums[i] = int64(m.Key.Chat), int64(m.Key.Message), m.TopicID, m.AlbumID
		dates[i], edits[i] = timeOrNull(m.Date), timeOrNull(m.EditDate)
		names[i], raws[i] = storableName(m.FileName)
		sizes[i], uids[i], outcomes[i], sets[i], parts[i] = m.FileSize, text(m.UniqueID), string(m.Outcome), text(m.SetKey), int32(m.PartIndex)
		if m.PackageID != 0 {
			pkgs[i] = &msgs[i].PackageID
		}
	}
	return []any{chats, ids, topics, albums, dates, names, sizes, uids, outcomes, sets, parts, pkgs, raws, edits}
}

// distinctSources reports whether msgs name each message once: one
// statement may not write a row twice.
func distinctSources(msgs []SourceMessage) bool {
	seen := make(map[tg.MessageKey]bool, len(msgs))
	for _, m := range msgs {
		if seen[m.Key] {
			return false
		}
		seen[m.Key] = true
	}
	return true
}
