package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/internal/pgtest"
	"stashd/store"
)

// benchFiles is the size of the benchmark's catalogue: listed files, in
// packages of filesPerPackage.
const (
	benchFiles      = 1_000_000
	filesPerPackage = 50
)

var words = strings.Fields(`dragon knight orc elf dwarf wizard castle tower bridge wall gate tree rock
	bust base scatter terrain tile floor door chest barrel crate table chair throne statue column
	ruin tomb crypt cave forest swamp desert city village farm ship boat cart wagon horse wolf bear
	goblin troll giant ogre golem demon angel priest rogue ranger paladin monk bard druid warlock
	sword axe bow staff shield helm armor cloak ring amulet potion scroll book map coin gem crown`)

// loadBench catalogues benchFiles listed files with random model-like
// paths (dir/word_word_N.ext), plus one package listing the needle
// "heroes/Dragon_Bust_Hero.stl". The trigram index is dropped during the
// load and rebuilt after it, as a bulk import would.
func loadBench(ctx context.Context, st *store.Store) error {
	start := time.Now()
	pool := st.Pool()
	if _, err := pool.Exec(ctx, `DROP INDEX package_files_path_trgm`); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(1, 2))
	exts := []string{"stl", "obj", "png", "txt", "lys", "chitubox"}
	packages := benchFiles / filesPerPackage
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"packages"},
		[]string{"id", "content_hash", "name", "format", "total_size", "part_count", "file_count", "origin_chat_id", "origin_message_id", "created_at"},
		pgx.CopyFromFunc(func() func() ([]any, error) {
			i := 0
			return func() ([]any, error) {
				if i == packages {
					return nil, nil
				}
				i++
				var n [8]byte
				binary.BigEndian.PutUint64(n[:], uint64(i))
				h := sha256.Sum256(n[:])
				name := fmt.Sprintf("%s-%s-vol%d.zip", words[r.IntN(len(words))], words[r.IntN(len(words))], i)
				return []any{int64(i), h[:], name, "zip", int64(r.IntN(1 << 30)), 1, filesPerPackage,
					int64(-1001000000000 - int64(i%20)), int64(i) << 20, time.Now().Add(-time.Duration(i) * time.Minute)}, nil
			}
		}()))
	if err != nil {
		return fmt.Errorf("load packages: %w", err)
	}
	if _, err := pool.Exec(ctx, `SELECT setval('packages_id_seq', $1)`, packages); err != nil {
		return err
	}
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"package_files"}, []string{"package_id", "ord", "path", "size"},
		pgx.CopyFromFunc(func() func() ([]any, error) {
			i := 0
			return func() ([]any, error) {
				if i == benchFiles {
					return nil, nil
				}
				pkg, ord := int64(i/filesPerPackage+1), i%filesPerPackage
				i++
				path := fmt.Sprintf("%s/%s_%s_%d.%s", words[r.IntN(len(words))], words[r.IntN(len(words))],
					words[r.IntN(len(words))], r.IntN(1000), exts[r.IntN(len(exts))])
				if pkg == int64(packages/2) && ord == 7 {
					path = "heroes/Dragon_Bust_Hero.stl"
				}
				return []any{pkg, ord, path, int64(r.IntN(50 << 20))}, nil
			}
		}()))
	if err != nil {
		return fmt.Errorf("load files: %w", err)
	}
	if err := store.IndexAllListings(ctx, st); err != nil {
		return fmt.Errorf("index listings: %w", err)
	}
	loaded := time.Since(start)
	if _, err := pool.Exec(ctx, `CREATE INDEX package_files_path_trgm ON package_files USING gin (path gin_trgm_ops)`); err != nil {
		return err
	}
	for _, sql := range []string{`VACUUM ANALYZE package_files`, `VACUUM ANALYZE packages`, `VACUUM ANALYZE package_search`} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			return err
		}
	}
	fmt.Printf("seeded %d listed files in %d packages: load %v, trigram index and analyze %v\n",
		benchFiles, packages, loaded.Round(time.Millisecond), (time.Since(start) - loaded).Round(time.Millisecond))
	return nil
}

// BenchmarkSearch runs substring searches over a catalogue of 1,000,000
// listed files and prints each query's p50 and p95 latency, how many files
// and packages it matches, its hit count, and the statements of a rare and
// of a broad query with their plans. Run it with
//
//	go test -run '^$' -bench Search -benchtime 200x ./store/
//
// Timings are printed, never asserted.
func BenchmarkSearch(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{URL: pgtest.New(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := loadBench(ctx, st); err != nil {
		b.Fatal(err)
	}
	queries := []store.SearchQuery{
		{Text: "dragon_bust_hero"},                 // one file in the whole catalogue
		{Text: "DRAGON_BUST_H"},                    // the same, another case, a prefix
		{Text: "ogre_golem_99"},                    // a handful of files
		{Text: "golem_troll"},                      // a few hundred files
		{Text: "throne", Format: "zip", Limit: 20}, // tens of thousands: the first page
		{Text: "xyzzy_nowhere"},                    // nothing
		{Text: "rc"},                               // two characters: no trigram, most packages
		{Text: "q"},                                // one character, nothing: the walk's bound
	}
	for _, q := range []store.SearchQuery{queries[0], queries[4]} {
		plans, err := store.ExplainSearch(ctx, st, q, false)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("statements and plans of %q:\n  %s\n", q.Text, strings.ReplaceAll(strings.Join(plans, "\n\n"), "\n", "\n  "))
	}

	// Each query runs both ways in turn, so that both see the same load:
	// the walk over package_search, and, every fourth time, the file rows
	// alone (every match ranked before paging, as before package_search),
	// which takes up to a second on a broad text.
	var all []time.Duration
	fmt.Printf("%-18s %25s %5s  %-22s  %-22s\n", "query", "matching", "hits", "walk p50 / p95 ms", "file rows p50 / p95 ms")
	for _, q := range queries {
		b.Run(strings.ReplaceAll(q.Text, "_", "-"), func(b *testing.B) {
			var walk, rows []time.Duration
			hits := 0
			fileRows := func(ctx context.Context, q store.SearchQuery) (store.SearchPage, error) {
				return store.SearchFileRows(ctx, st, q)
			}
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				page, err := st.Search(ctx, q)
				walk = append(walk, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				hits = len(page.Hits)
				if i%4 == 0 {
					t0 := time.Now()
					if _, err := fileRows(ctx, q); err != nil {
						b.Fatal(err)
					}
					rows = append(rows, time.Since(t0))
				}
			}
			p50, p95 := percentiles(walk)
			b.ReportMetric(ms(p50), "p50-ms")
			b.ReportMetric(ms(p95), "p95-ms")
			if len(walk) >= 20 {
				all = append(all, walk...)
				r50, r95 := percentiles(rows)
				files, packages := matching(b, st, q.Text)
				fmt.Printf("%-18q %6d files, %5d packages %5d  %8.2f / %8.2f  %8.2f / %8.2f  (%d and %d runs)\n",
					q.Text, files, packages, hits, ms(p50), ms(p95), ms(r50), ms(r95), len(walk), len(rows))
			}
		})
	}
	if len(all) > 0 {
		p50, p95 := percentiles(all)
		fmt.Printf("all queries, walk: p50 %.2f ms, p95 %.2f ms over %d runs\n", ms(p50), ms(p95), len(all))
	}
}

func percentiles(d []time.Duration) (p50, p95 time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*50/100], s[min(len(s)*95/100, len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// matching counts the listed files whose path contains text, and their
// packages.
func matching(b *testing.B, st *store.Store, text string) (files, packages int) {
	err := st.Pool().QueryRow(context.Background(), `SELECT count(*), count(DISTINCT package_id) FROM package_files
		WHERE NOT is_dir AND lower(path) LIKE lower($1)`, "%"+strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(text)+"%").Scan(&files, &packages)
	if err != nil {
		b.Fatal(err)
	}
	return files, packages
}
