package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"stashd/harness/audit"
	"stashd/internal/service"
	"stashd/store"
	"time"
)

// settleChecks is how many audits in a row must pass, with no work
// pending, before the run counts as settled.
const settleChecks = 3

// settle audits every second until the audit passes settleChecks times in
// a row with no work pending, or SettleTimeout passes; it returns the last
// audit.
func (h *harness) settle(ctx context.Context, auditURL string) (audit.Report, error) {
	st, err := store.Open(ctx, store.Config{URL: h.pgURL, MaxConns: 4})
	if err != nil {
		return audit.Report{}, err
	}
	defer st.Close()
	deadline := time.Now().Add(h.o.SettleTimeout)
	lastLog := time.Now()
	passed := 0
	var rep audit.Report
	for {
		truth, err := fetchTruth(ctx, auditURL)
		if err != nil {
			return rep, err
		}
		h.mu.Lock()
		h.rep.InFlightAtFreeze = excuseFrozen(&truth, h.freezes)
		h.mu.Unlock()
		if h.o.Audit == AuditCatalogue {
			rep, err = audit.CheckCatalogue(ctx, st, truth)
		} else {
			rep, err = audit.Check(ctx, st, truth)
		}
		if err != nil {
			return rep, err
		}
		// With a catalogue audit, deliveries may still wait.
		pending, err := pendingWork(ctx, st, h.o.Audit == AuditFull)
		if err != nil {
			return rep, err
		}
		rep.Settled = pending == 0
		if rep.DeliveriesRecovered, err = st.RecoveredDeliveries(ctx); err != nil {
			return rep, err
		}
		h.mu.Lock()
		h.rep.PendingWork = pending
		h.mu.Unlock()
		// An overlap, or a request inside a flood wait, cannot be undone:
		// settle on the rest, so that the report says what else holds;
		// the verdict still fails on it.
		rest := rep
		rest.SessionOverlaps, rest.FloodWaitBreaches = 0, 0
		if rest.OK() {
			passed++
		} else {
			passed = 0
		}
		if passed >= settleChecks {
			return rep, nil
		}
		if time.Since(lastLog) >= 10*time.Second {
			h.log.Info("settling", "missing", rep.Missing, "catalogued", rep.CataloguedPackages, "of", rep.UniquePackages,
				"delivered_twice", rep.DuplicateDeliveries, "pending_work", pending, "session_overlaps", rep.SessionOverlaps,
				"incomplete_sets_dead_lettered", rep.IncompleteDeadLettered, "of_incomplete", rep.IncompleteSets)
			lastLog = time.Now()
		}
		if time.Now().After(deadline) {
			rep.Settled = false
			return rep, nil
		}
		if !service.Sleep(ctx, time.Second) {
			return rep, ctx.Err()
		}
	}
}

// pendingWork counts set parts waiting for their set, dead letters the
// retry loop will take again (but an incomplete set's, which waits for a
// part that may never come) and, with deliveries, queued deliveries (but
// those a route's window holds).
func pendingWork(ctx context.Context, st *store.Store, deliveries bool) (int, error) {
	var n int
	err := st.Pool().QueryRow(ctx, `SELECT
		(SELECT count(*) FROM source_messages WHERE outcome = 'part_pending') +
		(SELECT count(*) FROM dead_letters WHERE state = 'pending' AND next_attempt_at IS NOT NULL
			AND error_class <> 'incomplete_set') +
		CASE WHEN $1 THEN (SELECT count(*) FROM waiting_deliveries WHERE route = '' OR opens_at <= now()) ELSE 0 END`,
		deliveries).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count pending work: %w", err)
	}
	return n, nil
}

func fetchTruth(ctx context.Context, url string) (audit.Truth, error) {
	var t audit.Truth
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return t, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return t, fmt.Errorf("read the world's ground truth: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return t, fmt.Errorf("read the world's ground truth: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
		return t, fmt.Errorf("read the world's ground truth: %w", err)
	}
	return t, nil
}
