package store

import (
	"context"
	"fmt"
	"time"

	"stashd/tg"
)

// SetFlushTimeout bounds s's group commits to d instead of a minute; it
// is called before s's first commit.
func SetFlushTimeout(s *Store, d time.Duration) { s.commits.timeout = d }

// BuildSearch exposes the search SQL to the plan checks and the benchmark.
func BuildSearch(q SearchQuery) (sql string, args []any, err error) {
	sql, args, _, err = buildSearch(q)
	return sql, args, err
}

// searchRowSQL computes the package_search rows (as migration 008 does) of
// the packages whose file rows the condition keeps: package_id, paths,
// names.
const searchRowSQL = `SELECT package_id,
	string_agg(lower(replace(path, E'\n', U&'\FFFD')), E'\n' ORDER BY ord),
	E'\n' || string_agg(lower(replace(regexp_replace(path, '^.*/', ''), E'\n', U&'\FFFD')), E'\n' ORDER BY ord) || E'\n'
FROM package_files WHERE NOT is_dir AND %s GROUP BY package_id`

// searchListingSQL writes them.
const searchListingSQL = `INSERT INTO package_search (package_id, paths, names) ` + searchRowSQL

// SearchRowOf computes the search row of package id from its file rows as
// migration 008 does.
func SearchRowOf(ctx context.Context, s *Store, id int64) (paths, names string, err error) {
	var pkg int64
	err = s.pool.QueryRow(ctx, fmt.Sprintf(searchRowSQL, "package_id = $1"), id).Scan(&pkg, &paths, &names)
	return paths, names, err
}

// IndexAllListings writes the search rows of every package, as migration
// 008 does for a catalogue that predates it.
func IndexAllListings(ctx context.Context, s *Store) error {
	_, err := s.pool.Exec(ctx, fmt.Sprintf(searchListingSQL, "true"))
	return err
}

// ExplainSearch runs q and returns each statement it sent with its plan
// under EXPLAIN (ANALYZE, BUFFERS); with fileRows, answered as
// SearchFileRows does.
func ExplainSearch(ctx context.Context, s *Store, q SearchQuery, fileRows bool) ([]string, error) {
	_, plans, err := s.search(ctx, q, searchOptions{explain: true, fileRows: fileRows})
	return plans, err
}

// SetSearchBounds shrinks Search's bounds so that a small catalogue
// exercises their edges: window packages per walk statement, walk packages
// walked for a rank, shortWindows statements per page of a short text,
// probe matches before a text is broad. Zero keeps a default.
func SetSearchBounds(s *Store, window, walk, shortWindows, probe int) {
	s.searchBounds = searchBounds{window: window, walk: walk, shortWindows: shortWindows, probe: probe}
}

// SearchFileRows answers q from the file rows alone, ranking every match
// before paging, as every search did before package_search: the benchmark's
// baseline and the tests' reference.
func SearchFileRows(ctx context.Context, s *Store, q SearchQuery) (SearchPage, error) {
	page, _, err := s.search(ctx, q, searchOptions{fileRows: true})
	return page, err
}

// GroupCommitQueued returns how many callers wait for the group committer
// to take their unit.
func GroupCommitQueued(s *Store) int { return int(s.commits.queued.Load()) }

// IntentSQL is the statement that writes a delivery's intents, for its
// plan check.
func IntentSQL() string {
	return (*Store)(nil).newIntentWrite(context.Background(), 0, 0, []int{0}, "", nil).stmt.SQL
}

// SetServerSeen makes s believe its connections so far reached the server
// id (as before a failover): the next new connection compares with it.
func SetServerSeen(s *Store, id DatabaseIdentity) {
	s.server.mu.Lock()
	defer s.server.mu.Unlock()
	s.server.known, s.server.seen = id, true
}

// SkipIDsSQL is the statement that moves package ids on after a change of
// server.
const SkipIDsSQL = skipIDsSQL

// DueWaitingSQL is DueWaiting's query.
const DueWaitingSQL = dueWaitingSQL

// KeyPlansSQL is the setting the group commit, Look and the lock attempts
// run their statements under.
const KeyPlansSQL = keyPlansSQL

// HotStatements are the statements s sends for every package and every
// delivery, by what they do, for their plan check.
func HotStatements(s *Store) map[string]string {
	var b bool
	var ids []string
	var found Found
	return map[string]string{
		"look message and files":           LookMessageAndFiles(tg.MessageKey{}, []string{"u"}, &Document{}, &found, &found).SQL,
		"catalogue a new package":          newPackageSQL,
		"catalogue a package step by step": insertPackageSQL,
		"record a message":                 recordStatement(SourceMessage{}, nil).SQL,
		"record a message by hash":         recordStatement(SourceMessage{}, []byte{1}).SQL,
		"resolve dead letters":             resolveSQL,
		"queue deliveries":                 fmt.Sprintf(queueSQL, "p.content_hash = $1"),
		"look package by hash":             LookPackageByHash([]byte{1}, &found).SQL,
		"look package by signature":        LookPackageBySignature([]byte{1}, 0, &found, &b).SQL,
		"link contained packages":          fmt.Sprintf(containmentSQL, packageID),
		"look delivery":                    s.LookDelivery(1, -1, &Package{}, &b, &b, &ids).SQL,
		"write intents":                    IntentSQL(),
		"record sent": func() string {
			st, _ := s.markSentStatements(context.Background(), []Delivery{{}}, []tg.MessageID{1})
			return st[0].SQL
		}(),
		"clear queue row": ClearWaitingStatement(1, -1).SQL,
		"take lock":       lockSQL,
		"let lock go":     unlockSQL,
	}
}

// RenewLocksSQL is the statement that renews the held package locks.
const RenewLocksSQL = renewLocksSQL
