package store

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"stashd/tg"
)

// SearchHit is one package of a result page.
type SearchHit struct {
	Package Package `json:"-"`
	// Rank is the best rank among the package's matches (RankName…).
	Rank int `json:"rank"`
	// File is the best matching listed path, empty when only the package
	// name matched; FileSize is its size.
	File     string `json:"file,omitempty"`
	FileSize int64  `json:"file_size,omitempty"`
	// Files counts the package's listed paths that match.
	Files      int             `json:"matching_files"`
	Created    time.Time       `json:"catalogued_at"`
	Deliveries []DeliveredPart `json:"deliveries"`
	// Links are the package's links to other packages, either way: the
	// same content in another container, or a strict subset of another.
	Links []HitLink `json:"links,omitempty"`
}

// HitLink is a search hit's link to another package, as it reads from
// the hit: Relation is "repack of", "repacked as", "contained in" or
// "contains".
type HitLink struct {
	Relation  string `json:"relation"`
	Other     int64  `json:"package_id"`
	OtherName string `json:"package_name"`
}

// DeliveredPart is one confirmed copy of a package part in a destination.
type DeliveredPart struct {
	Chat    tg.ChatID    `json:"chat_id"`
	Message tg.MessageID `json:"message_id"`
	Part    int          `json:"part"`
	SentAt  time.Time    `json:"sent_at"`
}

// SearchPage is one page of results. Next, when not empty, is the cursor
// of the following page.
type SearchPage struct {
	Hits []SearchHit `json:"hits"`
	Next string      `json:"next,omitempty"`
}

// Search returns one page of packages matching q, best ranked first and,
// within a rank, newest first, each with its confirmed deliveries.
//
// The work is bounded by the page, not by how many files match. The newest
// packages (a window of 200) are ranked first, in one statement over one
// row per package: its name and its listing in package_search. The share
// of them that matches tells a rare text from a broad one. A rare text
// (at most about 500 matching packages in the catalogue) is looked up in
// the trigram indexes of names and file rows and ranked whole, which costs
// what its few matches cost. A broad text is read rank by rank, newest
// first: a dense rank fills the page from the window, or from a few more
// windows, and a rank too sparse for that is completed from the indexes
// (names, base names, paths), whose candidates are then few.
// Texts of fewer than three characters have no trigram to look up: they
// are walked newest first whatever the rank, at most 1,000 packages a page,
// and a page may come back short, even empty, with a Next that continues
// the walk. A text holding a line break (or U+FFFD, which stands for one in
// package_search) is answered from the file rows alone.
//
// The cursor is the last hit's (rank, package id) — or, after a short
// walk, where the walk stopped — so a later page costs what the first
// does and pages neither repeat nor skip a package.
func (s *Store) Search(ctx context.Context, q SearchQuery) (SearchPage, error) {
	page, _, err := s.search(ctx, q, searchOptions{})
	return page, err
}

// searchOptions are the benchmark's and the tests' ways into a search.
type searchOptions struct {
	// explain also runs every statement under EXPLAIN ANALYZE and returns
	// the plans, in order.
	explain bool
	// fileRows answers from the file rows alone, ranking every match
	// before paging: the way every text went before package_search.
	fileRows bool
}

// searchBounds bounds Search's walks; zero fields mean the defaults below.
type searchBounds struct {
	// window is how many packages, newest first, a walk reads in one
	// statement; the first window also tells a rare text from a broad one.
	window int
	// walk bounds the packages a walk reads for one rank before the rest
	// of the rank is asked of the indexes: a walk of w packages fills a
	// page of n when at least n/w of them match; a sparser rank has at
	// most about n/w of the older packages, and the indexes hand over that
	// many candidates. 2,000 keeps both near two thousand rows for a page
	// of 50 in 100,000 packages.
	walk int
	// shortWindows bounds the windows one page of a short text reads.
	shortWindows int
	// probe bounds the matching names, and the matching file rows, that a
	// probe ranks: past it a text counts as broad and is walked.
	probe int
}

const (
	defaultSearchWindow       = 200
	defaultSearchWalk         = 2000
	defaultSearchShortWindows = 5
	defaultSearchProbe        = 500
	// shortText is the length, in characters, from which a text has a
	// trigram to look up.
	shortText = 3
)

// search runs q.
func (s *Store) search(ctx context.Context, q SearchQuery, o searchOptions) (SearchPage, []string, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 500)
	r := &searchRun{pool: s.pool, explain: o.explain,
		windowSize: cmp.Or(s.searchBounds.window, defaultSearchWindow),
		walkLimit:  cmp.Or(s.searchBounds.walk, defaultSearchWalk),
		shortWalks: cmp.Or(s.searchBounds.shortWindows, defaultSearchShortWindows),
		probeSize:  cmp.Or(s.searchBounds.probe, defaultSearchProbe)}
	var hits []SearchHit
	var next string
	var err error
	if o.fileRows || strings.ContainsAny(q.Text, "\n\uFFFD") {
		// package_search writes line breaks in paths as U+FFFD: only the
		// file rows can tell such texts apart.
		hits, err = r.scanFiles(ctx, q, limit)
		if len(hits) > limit {
			hits = hits[:limit]
			next = encodeCursor(hits[limit-1].Rank, hits[limit-1].Package.ID)
		}
		if err == nil {
			err = s.addDeliveries(ctx, hits)
		}
	} else {
		var found []int64
		var ranks []int
		found, ranks, next, err = r.probeOrWalk(ctx, q, limit)
		if len(found) > limit {
			found, ranks = found[:limit], ranks[:limit]
			rank := ranks[limit-1]
			if isShort(q.Text) {
				rank = 0 // newest first whatever the rank: see walkShort
			}
			next = encodeCursor(rank, found[limit-1])
		}
		if err == nil {
			hits, err = r.details(ctx, q.Text, found, ranks)
		}
	}
	if err == nil {
		err = s.addLinks(ctx, hits)
	}
	if err != nil {
		return SearchPage{}, r.plans, err
	}
	return SearchPage{Hits: hits, Next: next}, r.plans, nil
}

// addLinks reads the hits' links to other packages, either way.
func (s *Store) addLinks(ctx context.Context, hits []SearchHit) error {
	if len(hits) == 0 {
		return nil
	}
	ids := make([]int64, len(hits))
	for i, h := range hits {
		ids[i] = h.Package.ID
	}
	rows, err := s.pool.Query(ctx, `
		SELECT l.package_id, CASE l.kind WHEN 'repack' THEN 'repack of' ELSE 'contained in' END, o.id, o.name
		FROM package_links l JOIN packages o ON o.id = l.other_id WHERE l.package_id = ANY($1)
		UNION ALL
		SELECT l.other_id, CASE l.kind WHEN 'repack' THEN 'repacked as' ELSE 'contains' END, o.id, o.name
		FROM package_links l JOIN packages o ON o.id = l.package_id WHERE l.other_id = ANY($1)
		ORDER BY 1, 2, 3`, ids)
	if err != nil {
		return fmt.Errorf("read package links: %w", err)
	}
	defer rows.Close()
	links := map[int64][]HitLink{}
	for rows.Next() {
		var id int64
		var l HitLink
		if err := rows.Scan(&id, &l.Relation, &l.Other, &l.OtherName); err != nil {
			return fmt.Errorf("read package links: %w", err)
		}
		links[id] = append(links[id], l)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read package links: %w", err)
	}
	for i := range hits {
		hits[i].Links = links[hits[i].Package.ID]
	}
	return nil
}

// addDeliveries reads the confirmed deliveries of the hits.
func (s *Store) addDeliveries(ctx context.Context, hits []SearchHit) error {
	ids := make([]int64, len(hits))
	for i, h := range hits {
		ids[i] = h.Package.ID
	}
	dels, err := s.deliveredParts(ctx, ids)
	if err != nil {
		return err
	}
	for i := range hits {
		hits[i].Deliveries = dels[hits[i].Package.ID]
	}
	return nil
}

// deliveredParts returns the confirmed deliveries of the packages by id.
func (s *Store) deliveredParts(ctx context.Context, ids []int64) (map[int64][]DeliveredPart, error) {
	out := map[int64][]DeliveredPart{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT package_id, destination_chat_id, dest_message_id, part_idx, sent_at
		FROM deliveries WHERE package_id = ANY($1) AND state = 'sent'
		ORDER BY package_id, destination_chat_id, part_idx`, ids)
	if err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var pkg, c, m int64
		var d DeliveredPart
		var sent *time.Time
		if err := rows.Scan(&pkg, &c, &m, &d.Part, &sent); err != nil {
			return nil, fmt.Errorf("read deliveries: %w", err)
		}
		d.Chat, d.Message = tg.ChatID(c), tg.MessageID(m)
		if sent != nil {
			d.SentAt = *sent
		}
		out[pkg] = append(out[pkg], d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}
	return out, nil
}
