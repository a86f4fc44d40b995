package chaos

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"stashd/internal/service"
)

// leasePoll is how often the harness reads the accounts' leases.
const leasePoll = 75 * time.Millisecond

// leaseRow is one account's lease as the accounts table holds it.
type leaseRow struct {
	account string
	owner   string    // "" when lease_owner is NULL
	until   time.Time // zero when lease_until is NULL
	epoch   int64     // lease_epoch: every acquisition increments it
}

// leaseLoss is an owner losing an account's lease: the lease lapsed, went
// to another owner, or was taken again (a new epoch) by the same one.
type leaseLoss struct {
	account string
	owner   string    // the owner that lost it
	at      time.Time // the reading that showed it, by the database's clock
}

// leaseWatch measures failovers and ownerless stretches from successive
// readings of the accounts' leases, each taken at the database's time.
//
// A failover is a change of an account's owner, from the owner of one
// live lease to that of the next (owner, nobody, other owner counts
// once); an ownerless stretch runs from the moment an account's live
// lease ended (its lease_until, or the release time a clean shutdown
// writes there) to the first reading that shows a live lease again, so it
// is measured to within one poll, never shorter. An account's time before
// its first owner (the daemons starting) is not a stretch.
type leaseWatch struct {
	mu        sync.Mutex
	accounts  map[string]*leaseState
	failovers int
	longest   time.Duration
	losses    []leaseLoss
}

// leaseState is what the watch knows of one account.
type leaseState struct {
	owner string    // owner of the last live lease seen; "" before the first
	until time.Time // when that lease ended or ends, as last seen
	epoch int64     // that lease's epoch
	// lapsed is set once a reading has shown no live lease since.
	lapsed bool
}

func newLeaseWatch() *leaseWatch { return &leaseWatch{accounts: make(map[string]*leaseState)} }

// observe takes one reading of every account's lease, made at now.
func (w *leaseWatch) observe(now time.Time, rows []leaseRow) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range rows {
		st := w.accounts[r.account]
		if st == nil {
			st = &leaseState{}
			w.accounts[r.account] = st
		}
		live := r.owner != "" && r.until.After(now)
		if !live {
			if st.owner == "" {
				continue // not owned yet
			}
			if !st.lapsed {
				w.losses = append(w.losses, leaseLoss{r.account, st.owner, now})
			}
			st.lapsed = true
			// A release (clean shutdown) ends the lease before its expiry.
			if !r.until.IsZero() && r.until.Before(st.until) {
				st.until = r.until
			}
			w.stretch(now.Sub(st.until))
			continue
		}
		if st.owner != "" && !st.lapsed && (r.owner != st.owner || r.epoch != st.epoch) {
			w.losses = append(w.losses, leaseLoss{r.account, st.owner, now})
		}
		if st.owner != "" && (st.lapsed || r.owner != st.owner) {
			if r.owner != st.owner {
				w.failovers++
			}
			// The previous lease had ended before this one was seen.
			w.stretch(now.Sub(st.until))
		}
		st.owner, st.until, st.epoch, st.lapsed = r.owner, r.until, r.epoch, false
	}
}

func (w *leaseWatch) stretch(d time.Duration) {
	if d > w.longest {
		w.longest = d
	}
}

// result returns the failovers and the longest ownerless stretch so far.
func (w *leaseWatch) result() (int, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failovers, w.longest
}

// lost returns every lease loss seen so far, in order.
func (w *leaseWatch) lost() []leaseLoss {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.losses)
}

// run reads the leases every leasePoll until ctx ends. A reading that
// fails (the database down) is skipped: the stretch it hides is measured
// by the next one, with the database's clock.
func (w *leaseWatch) run(ctx context.Context, db *pgxpool.Pool) {
	service.Every(ctx, leasePoll, nil, func(ctx context.Context) {
		now, rows, err := readLeases(ctx, db)
		if err == nil {
			w.observe(now, rows)
		}
	})
}

// readLeases reads every account's lease and the database's time.
func readLeases(ctx context.Context, db *pgxpool.Pool) (time.Time, []leaseRow, error) {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	rows, err := db.Query(qctx, `SELECT now(), name, lease_owner, lease_until, lease_epoch FROM accounts ORDER BY name`)
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("read leases: %w", err)
	}
	defer rows.Close()
	var now time.Time
	var out []leaseRow
	for rows.Next() {
		var r leaseRow
		var owner *string
		var until *time.Time
		if err := rows.Scan(&now, &r.account, &owner, &until, &r.epoch); err != nil {
			return time.Time{}, nil, fmt.Errorf("read leases: %w", err)
		}
		if owner != nil {
			r.owner = *owner
		}
		if until != nil {
			r.until = *until
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return time.Time{}, nil, fmt.Errorf("read leases: %w", err)
	}
	return now, out, nil
}

// liveOwners returns the accounts whose lease is live, with the process id
// of each owner, in account order.
func liveOwners(ctx context.Context, db *pgxpool.Pool) ([]leaseRow, map[string]int, error) {
	now, rows, err := readLeases(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	var live []leaseRow
	pids := make(map[string]int)
	for _, r := range rows {
		if r.owner == "" || !r.until.After(now) {
			continue
		}
		if pid, ok := ownerPID(r.owner); ok {
			live = append(live, r)
			pids[r.account] = pid
		}
	}
	return live, pids, nil
}

// ownerPID reads the process id from a lease owner, which a daemon names
// "host:pid" by default.
func ownerPID(owner string) (int, bool) {
	i := strings.LastIndexByte(owner, ':')
	if i < 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(owner[i+1:])
	return pid, err == nil && pid > 0
}
