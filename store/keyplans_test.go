package store_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"stashd/store"
)

// The hot statements' generic plans, made on a catalogue still empty, read
// every large table by an index. A connection keeps the plan it made for a
// statement: one that read packages or the lock rows whole while they
// were empty would go on reading them whole a package as the catalogue
// grew, until an ANALYZE replanned it.
func TestHotStatementsReadByKeyOnAnEmptyCatalogue(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	// Tables that hold a row or a handful (one per account or source),
	// read whole by any plan.
	small := []string{"database_identity", "accounts", "sources"}
	seq := regexp.MustCompile(`Seq Scan on (\w+)`)
	stmts := store.HotStatements(st)
	names := make([]string, 0, len(stmts))
	for name := range stmts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		var plan []string
		err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, store.KeyPlansSQL); err != nil {
				return err
			}
			sd, err := tx.Conn().Prepare(ctx, "hot", stmts[name])
			if err != nil {
				return err
			}
			// Under force_generic_plan any arguments show the generic plan.
			args := strings.Repeat("NULL, ", len(sd.ParamOIDs))
			rows, err := tx.Query(ctx, "EXPLAIN EXECUTE hot("+strings.TrimSuffix(args, ", ")+")")
			if err != nil {
				return err
			}
			if plan, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return err
			}
			return tx.Conn().Deallocate(ctx, "hot")
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		text := strings.Join(plan, "\n")
		for _, m := range seq.FindAllStringSubmatch(text, -1) {
			if !slices.Contains(small, m[1]) {
				t.Errorf("%s reads %s whole:\n%s", name, m[1], text)
			}
		}
	}
}
