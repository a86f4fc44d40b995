package catchup_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/catchup"
	"stashd/internal/pgembed"
	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

// restoreOnAdvance is the catch-up's store, which restores the catalogue
// from a dump right after the scan's first checkpoint: what a scan that
// is under way when an operator restores the database sees.
type restoreOnAdvance struct {
	*store.Store
	once    sync.Once
	restore func()
}

func (r *restoreOnAdvance) AdvanceWatermark(ctx context.Context, chat tg.ChatID, w int64) error {
	err := r.Store.AdvanceWatermark(ctx, chat, w)
	r.once.Do(r.restore)
	return err
}

// restoreUnderScan is a world of one source with 6 documents, a dump of
// its catalogue taken before any was handled, an instance, and its
// catch-up (pages of 2, the default policy), whose store restores that
// dump after the scan's first checkpoint, then checks the identity and
// reloads the source's state, as the daemon's check does.
func restoreUnderScan(t *testing.T) (*world, *instance, *catchup.Catchup) {
	t.Helper()
	ctx := t.Context()
	url := pgtest.New(t)
	w := newWorldOn(t, url, 1)
	src := w.sources[0]
	w.post(src, 0, 6)
	if _, err := w.st.CheckIdentity(ctx); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "catalogue.dump")
	if err := pgembed.Dump(ctx, "", url, backup); err != nil {
		t.Fatal(err)
	}
	in := w.start()
	st := &restoreOnAdvance{Store: w.st}
	st.restore = func() {
		if err := pgembed.Restore(ctx, "", url, backup); err != nil {
			t.Error(err)
			return
		}
		w.st.ResetConnections()
		if reason, err := w.st.CheckIdentity(ctx); err != nil || reason == "" {
			t.Errorf("the check after the restore: %q, %v; want the restore named", reason, err)
		}
		s, err := w.st.GetSource(ctx, src)
		if err != nil {
			t.Error(err)
			return
		}
		in.lst.Watch(s)
	}
	cu := catchup.New(catchup.Config{Account: "a", Owner: "test", Sources: w.sources, PageSize: 2},
		st, in.sess, in.lst, in.pipe, catchup.NewMetrics(prometheus.NewRegistry()))
	return w, in, cu
}

// A scan under way when the catalogue is restored from a dump handled its
// first pages into the catalogue the dump replaced. Once the identity
// check names the restore (and the sources are reloaded, watermarks as
// restored), the scan's later checkpoints must not carry the watermark
// past those pages: the catalogue forgot them, and nothing would read them
// again.
func TestScanUnderWayWhenTheCatalogueIsRestoredReadsItsPagesAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w, in, cu := restoreUnderScan(t)
	src := w.sources[0]
	for range 5 {
		if _, err := cu.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if !in.lst.IsDirty(src) {
			break
		}
	}
	if in.lst.IsDirty(src) {
		t.Fatal("the source is still dirty after five catch-up cycles")
	}
	var n int
	if err := w.st.Pool().QueryRow(ctx, `SELECT count(*) FROM packages`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 6 {
		t.Errorf("after a restore under a running scan the catalogue holds %d of the source's 6 packages; "+
			"the pages the scan handled before the restore were not read again", n)
	}
}

// A scan whose checkpoint the restore's check refused (store.ErrRewound)
// did not fail: the source is read again from the restored catalogue at
// once, with no failure counted against it and no retry delay waited.
func TestScanRefusedByARewindIsNoFailureOfTheSource(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// The default retry delay (10 s): a cycle that counted the refusal a
	// failure would leave the source unclaimed for the next cycles.
	w, in, cu := restoreUnderScan(t)
	src := w.sources[0]
	if _, err := cu.RunOnce(ctx); err != nil {
		t.Errorf("the cycle whose scan the restore refused reported %v; want no error", err)
	}
	var failures int
	var lastError string
	if err := w.st.Pool().QueryRow(ctx, `SELECT failures, last_error FROM sources WHERE chat_id = $1`,
		int64(src)).Scan(&failures, &lastError); err != nil {
		t.Fatal(err)
	}
	if failures != 0 || lastError != "" {
		t.Errorf("the source records %d failures (%q) after a scan the restore refused; want none", failures, lastError)
	}
	if _, err := cu.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if in.lst.IsDirty(src) {
		t.Error("the source is still dirty after the cycle that follows the refused scan; want it read again at once")
	}
}
