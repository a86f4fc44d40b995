package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"stashd/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// Kills strike the owner of an account, read from the leases, but every
// fifth a standby; with no live lease, any instance.
func TestKillTargetsTheOwner(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := pgxpool.New(ctx, pgtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dir := t.TempDir()
	h := &harness{db: db, rng: rand.New(rand.NewPCG(1, 2)), killed: map[*proc]bool{}}
	for n := 1; n <= 2; n++ {
		p, err := start("sleep", []string{"600"}, nil, filepath.Join(dir, fmt.Sprintf("sleep-%d.log", n)), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			p.signal(syscall.SIGKILL)
			<-p.exited
		})
		h.instances = append(h.instances, &instance{n: n, p: p})
	}
	owner, standby := h.instances[1], h.instances[0]
	if _, err := db.Exec(ctx, `INSERT INTO accounts (name, lease_owner, lease_until) VALUES
		('acct1', $1, now() + interval '1 minute'), ('acct2', $1, now() + interval '1 minute'),
		('acct3', 'elsewhere:1', now() + interval '1 minute'), ('acct4', NULL, NULL)`,
		fmt.Sprintf("host:%d", owner.p.pid())); err != nil {
		t.Fatal(err)
	}
	for i := range 2 * standbyEvery {
		want, wantOwns := owner, true
		if (i+1)%standbyEvery == 0 {
			want, wantOwns = standby, false
		}
		if in, owns := h.target(ctx, i); in != want || owns != wantOwns {
			t.Errorf("kill %d: instance %d (owner %v), want %d (owner %v)", i, in.n, owns, want.n, wantOwns)
		}
	}

	// Lapsed leases: no owner to strike.
	if _, err := db.Exec(ctx, `UPDATE accounts SET lease_until = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if _, owns := h.target(ctx, 0); owns {
		t.Errorf("with every lease lapsed, a kill claims to strike an owner")
	}
}
