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
	// database_identity holds one row, and no index.
	small := []string{"database_identity"}
	seq := regexp.MustCompile(`Seq Scan on (\w+)`)
	stmts := store.HotStatements(st)
	names := make([]string, 0, len(stmts))
	for name := range stmts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		plan := genericPlan(t, st, stmts[name])
		for _, m := range seq.FindAllStringSubmatch(plan, -1) {
			if !slices.Contains(small, m[1]) {
				t.Errorf("%s reads %s whole:\n%s", name, m[1], plan)
			}
		}
	}
}

// genericPlan is the plan sql runs on, prepared and executed under the
// setting of the transactions that send the hot statements (KeyPlansSQL):
// its generic plan, made from the catalogue's statistics as they are now.
func genericPlan(t *testing.T, st *store.Store, sql string) string {
	t.Helper()
	ctx := t.Context()
	var plan []string
	err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, store.KeyPlansSQL); err != nil {
			return err
		}
		sd, err := tx.Conn().Prepare(ctx, "hot", sql)
		if err != nil {
			return err
		}
		// Under force_generic_plan any arguments show the generic plan.
		args := strings.TrimSuffix(strings.Repeat("NULL, ", len(sd.ParamOIDs)), ", ")
		rows, err := tx.Query(ctx, "EXPLAIN EXECUTE hot("+args+")")
		if err != nil {
			return err
		}
		if plan, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		return tx.Conn().Deallocate(ctx, "hot")
	})
	if err != nil {
		t.Fatalf("plan of %.60q: %v", sql, err)
	}
	return strings.Join(plan, "\n")
}
