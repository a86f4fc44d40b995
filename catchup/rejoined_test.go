package catchup_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/catchup"
	"stashd/store"
	"stashd/tg"
)

// failingReopen is the store with ReopenInaccessible failing while fail
// is set.
type failingReopen struct {
	*store.Store
	fail bool
}

func (s *failingReopen) ReopenInaccessible(ctx context.Context, account string, chats []tg.ChatID) (int, error) {
	if s.fail {
		return 0, errors.New("database unavailable")
	}
	return s.Store.ReopenInaccessible(ctx, account, chats)
}

// TDLib's report that the account is a member of a source recorded
// inaccessible reopens the source's circuit; a cycle whose reopening
// failed leaves the report for the next, which reads the source then,
// not when its circuit closes (an hour here).
func TestMemberReportOutlivesAFailedReopening(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	src := w.sources[0]
	policy := store.ScanPolicy{CircuitBase: time.Hour, MaxDelay: 6 * time.Hour}
	if _, err := w.st.FinishScan(ctx, src, "test", store.ScanOutcome{Err: tg.Permanent(tg.ErrNoAccess),
		NoAccess: true, Permanent: true}, policy); err != nil {
		t.Fatal(err)
	}
	in := w.start() // TDLib reports the account a member as it loads its chats
	// The report comes through the session's update pump: the cycle below
	// must have it to try the reopening.
	for deadline := time.Now().Add(10 * time.Second); !in.lst.MemberSinceLoss(src); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("TDLib's report of the account a member of the source never reached the listener")
		}
	}
	st := &failingReopen{Store: w.st, fail: true}
	cu := catchup.New(catchup.Config{Account: "a", Owner: "test", Sources: w.sources, Policy: policy},
		st, in.sess, in.lst, in.pipe, catchup.NewMetrics(prometheus.NewRegistry()))
	if _, err := cu.RunOnce(ctx); err == nil {
		t.Fatal("the cycle's reopening failed, and the cycle said nothing")
	}
	st.fail = false
	res, err := cu.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Paged != 1 {
		t.Errorf("after a failed reopening the next cycle: %+v; want the source paged, not left to its circuit", res)
	}
	got, err := w.st.GetSource(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if got.Access != store.AccessOK {
		t.Errorf("access %q; want %q", got.Access, store.AccessOK)
	}
}
