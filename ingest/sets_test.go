package ingest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/listener"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// postSet posts a 3-part 7z set named name.7z.00N and handles every part.
func postSet(t *testing.T, e *env, p *ingest.Pipeline, c *tgsim.Client, name string) []tg.Message {
	t.Helper()
	whole := archivetest.SevenZip([]archivetest.File{{Name: name + "/data.bin", Data: []byte(strings.Repeat(name, 3000))}})
	var msgs []tg.Message
	for i, part := range archivetest.Split(whole, 3) {
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("%s.7z.%03d", name, i+1), Data: part}))
		mustHandle(t, p, m, store.OutcomePartPending)
		msgs = append(msgs, m)
	}
	return msgs
}

// lockedBuffer collects log output from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// restarted returns a pipeline on a fresh client, as after a daemon restart:
// it knows the pending parts only from the store. wrap, when set, wraps the
// session.
func (e *env) restarted(logs *lockedBuffer, wrap func(*tg.Session) ingest.Telegram) *ingest.Pipeline {
	e.t.Helper()
	c := e.world.Client("a")
	if err := c.LoadChats(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	sess := tg.NewSession(c, func(tg.Update) {})
	var t ingest.Telegram = sess
	if wrap != nil {
		t = wrap(sess)
	}
	return ingest.NewPipeline(ingest.Config{
		Account: "a", Destinations: []tg.ChatID{e.dest},
		SetSettle: time.Minute, SetMaxWait: time.Hour, RetryBase: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Now:    func() time.Time { return e.now },
	}, e.st, t, nil)
}

// A complete set whose part was deleted on Telegram cannot be completed:
// after a restart the sweeper must turn it into dead letters at once (the
// deleted part's letter is exhausted, the others wait for a re-post), log
// it once, and stop asking Telegram for its parts.
func TestSetWithDeletedPartBecomesDeadLetter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	msgs := postSet(t, e, p, c, "gone")
	e.world.Delete(e.src["a"], msgs[1].ID)

	logs := &lockedBuffer{}
	p2 := e.restarted(logs, nil)
	e.now = e.now.Add(2 * time.Minute)
	res, err := p2.Sweep(e.ctx)
	if err != nil || res.DeadLetter != 1 || res.Completed != 0 {
		t.Fatalf("sweep = %+v, %v; want the set dead-lettered", res, err)
	}
	e.world.ResetCalls()
	for range 3 {
		if res, err := p2.Sweep(e.ctx); err != nil || res != (ingest.SweepResult{}) {
			t.Fatalf("later sweep = %+v, %v; want nothing left to sweep", res, err)
		}
	}
	if n := e.world.Calls("a")[tg.MethodGetMessage]; n != 0 {
		t.Errorf("later sweeps made %d getMessage calls, want 0", n)
	}
	if n := strings.Count(logs.String(), "set is a dead letter"); n != 1 {
		t.Errorf("set failure logged %d times, want once:\n%s", n, logs)
	}

	// The deleted part is recorded deleted at source: terminal, not a
	// letter for an operator.
	deleted, err := e.st.DeadLetters(e.ctx, store.DeadDeleted, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 1 || deleted[0].Key != msgs[1].Key() || deleted[0].ErrorClass != "deleted_at_source" {
		t.Fatalf("deleted-at-source letters = %+v; want the deleted part", deleted)
	}
	pending, err := e.st.DeadLetters(e.ctx, store.DeadPending, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 {
		t.Fatalf("pending letters = %+v; want the 2 remaining parts", pending)
	}
	for _, d := range pending {
		if d.ErrorClass != "set_failed" || !strings.Contains(d.Reason, "gone.7z") || d.NextAttemptAt.IsZero() {
			t.Errorf("letter %+v: want class set_failed naming the set, with a next attempt", d)
		}
	}
	if n := len(e.delivered()); n != 0 {
		t.Errorf("delivered %d parts of a broken set", n)
	}
}

// flakyDownloads fails every download with a retryable error.
type flakyDownloads struct{ *tg.Session }

func (flakyDownloads) Download(context.Context, tg.File, time.Duration) (tg.File, error) {
	return tg.File{}, errors.New("connection reset")
}

// A set whose completion keeps failing with a retryable error is tried at
// every sweep, logged once, and becomes a dead letter when SetMaxWait ends.
func TestSetFailingUntilMaxWaitBecomesDeadLetter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	postSet(t, e, p, c, "flaky")

	logs := &lockedBuffer{}
	p2 := e.restarted(logs, func(s *tg.Session) ingest.Telegram { return flakyDownloads{s} })
	e.now = e.now.Add(2 * time.Minute)
	for range 3 {
		if res, err := p2.Sweep(e.ctx); err != nil || res.Failed != 1 || res.DeadLetter != 0 {
			t.Fatalf("sweep = %+v, %v; want the set failed and kept", res, err)
		}
	}
	if n := strings.Count(logs.String(), "complete set failed"); n != 1 {
		t.Errorf("failure logged %d times over 3 sweeps, want once:\n%s", n, logs)
	}
	e.now = e.now.Add(time.Hour)
	if res, err := p2.Sweep(e.ctx); err != nil || res.DeadLetter != 1 {
		t.Fatalf("sweep after SetMaxWait = %+v, %v; want the set dead-lettered", res, err)
	}
	pending, err := e.st.DeadLetters(e.ctx, store.DeadPending, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 3 {
		t.Fatalf("pending letters = %+v; want the 3 parts", pending)
	}
	for _, d := range pending {
		if !strings.Contains(d.Reason, "connection reset") {
			t.Errorf("letter %+v: want the failure as its reason", d)
		}
	}
	if res, err := p2.Sweep(e.ctx); err != nil || res != (ingest.SweepResult{}) {
		t.Fatalf("sweep after the dead letter = %+v, %v; want nothing left", res, err)
	}
}

// A part posted twice, as the same Telegram file or as an identical
// re-upload, is a duplicate part: the set completes with one copy of it,
// and a copy posted after the set was catalogued is linked to the package
// instead of starting a new set that can only end as a dead letter.
func TestDuplicatePartIsNotABrokenSet(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	whole := archivetest.SevenZip([]archivetest.File{{Name: "dup/data.bin", Data: []byte(strings.Repeat("d", 9000))}})
	parts := archivetest.Split(whole, 3)
	post := func(i int) tg.Message {
		return e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("dup.7z.%03d", i+1), Data: parts[i]}))
	}
	var msgs []tg.Message
	for _, i := range []int{0, 1, 1, 2} { // part 2 uploaded twice
		m := post(i)
		mustHandle(t, p, m, store.OutcomePartPending)
		msgs = append(msgs, m)
	}
	// The same file forwarded again (same unique id) before the set completes.
	fwd := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{SameFileAs: msgs[0].Document.File.UniqueID}))
	mustHandle(t, p, fwd, store.OutcomePartPending)

	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 || res.DeadLetter != 0 {
		t.Fatalf("sweep = %+v, %v; want the set completed", res, err)
	}
	if n := len(e.delivered()); n != 3 {
		t.Errorf("delivered %d parts, want 3", n)
	}
	for _, m := range []tg.Message{msgs[2], fwd} {
		out, ok, err := e.st.MessageHandled(e.ctx, m.Key())
		if err != nil || !ok || out != store.OutcomeDuplicate {
			t.Errorf("second copy %s: outcome %q, %v, %v; want duplicate", m.Key(), out, ok, err)
		}
	}
	// Part 3 forwarded again once the set is catalogued.
	late := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{SameFileAs: msgs[3].Document.File.UniqueID}))
	mustHandle(t, p, late, store.OutcomeDuplicate)
	e.now = e.now.Add(2 * time.Hour)
	if res, err := p.Sweep(e.ctx); err != nil || res.DeadLetter != 0 {
		t.Fatalf("sweep = %+v, %v; want no dead letter", res, err)
	}
}

// x.part1.rar and x.part2.rar look complete by name, but the archive says
// a volume follows: the set must not be delivered as whole. It becomes a
// dead letter naming the missing volume, and the late part completes it.
func TestSetWithNextVolumeMissingWaitsForLatePart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	vols := archivetest.RarVolumes([]archivetest.File{{Name: "vol/data.bin", Data: []byte(strings.Repeat("v", 9000))}}, 3)
	for i := range 2 {
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("vol.part%d.rar", i+1), Data: vols[i]}))
		mustHandle(t, p, m, store.OutcomePartPending)
	}
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.DeadLetter != 1 || res.Completed != 0 {
		t.Fatalf("sweep = %+v, %v; want the set dead-lettered", res, err)
	}
	if n := len(e.delivered()); n != 0 {
		t.Fatalf("delivered %d parts of a set missing its last volume", n)
	}
	dls, err := e.st.DeadLetters(e.ctx, store.DeadPending, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 2 {
		t.Fatalf("dead letters %+v; want both parts", dls)
	}
	for _, d := range dls {
		if d.ErrorClass != "incomplete_set" || !strings.Contains(d.Reason, "next volume missing") || !d.NextAttemptAt.IsZero() {
			t.Errorf("letter %+v: want incomplete_set naming the missing volume, waiting for it (no timer)", d)
		}
	}

	// The late part brings the set's dead letters back with it, without
	// waiting for their retry times.
	late := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "vol.part3.rar", Data: vols[2]}))
	mustHandle(t, p, late, store.OutcomePartPending)
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want the set completed", res, err)
	}
	if n := len(e.delivered()); n != 3 {
		t.Errorf("delivered %d parts, want 3", n)
	}
	pkgs, err := e.st.PackageHashes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range pkgs {
		if pkg.PartCount != 3 || pkg.ListingError != "" || pkg.FileCount != 1 {
			t.Errorf("package %+v; want 3 parts listed without error", pkg)
		}
	}
	if left, err := e.st.DeadLetters(e.ctx, "", 10); err != nil || len(left) != 0 {
		t.Errorf("dead letters left: %+v, %v", left, err)
	}
}

// A multipart set posted as an album is listed as one archive, not part by
// part, next to the album's other archives.
func TestMultipartSetPostedAsAlbumIsListedAsOneSet(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	vols := archivetest.RarVolumes([]archivetest.File{{Name: "alb/data.bin", Data: []byte(strings.Repeat("a", 9000))}}, 3)
	// Posted out of order, with a lone zip in the album.
	for _, i := range []int{1, 0, 2} {
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("alb.part%d.rar", i+1), Data: vols[i], AlbumID: 88}))
		mustHandle(t, p, m, store.OutcomePartPending)
	}
	m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "notes.zip", Data: zipOf("notes.txt", "n"), AlbumID: 88}))
	mustHandle(t, p, m, store.OutcomePartPending)
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 || res.DeadLetter != 0 {
		t.Fatalf("sweep = %+v, %v; want one completed set", res, err)
	}
	pkgs, err := e.st.PackageHashes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 {
		t.Fatalf("%d packages, want 1", len(pkgs))
	}
	for _, pkg := range pkgs {
		if pkg.PartCount != 4 || pkg.FileCount != 2 || pkg.ListingError != "" {
			t.Errorf("package %+v; want the album of 4 documents, its rar set listed as one", pkg)
		}
	}
	if n := len(e.delivered()); n != 4 {
		t.Errorf("delivered %d documents, want 4", n)
	}
}

// An album whose last document is still queued behind slower work must not
// be completed from the documents already recorded, however quiet and
// synced the source looks and however long the set has waited: the package
// would be catalogued under the wrong content, and its documents delivered
// again when the rest of the album (or a re-upload of it) arrives.
func TestAlbumWaitsForItsQueuedLastPart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	src := e.src["a"]
	lst := listener.New(listener.Config{Account: "a", QueueCapacity: 8}, e.st, nil)
	lst.Watch(store.Source{ChatID: src, Account: "a", Kind: tg.KindChannel})
	if !lst.CaughtUp(src, store.Era{}, 0) {
		t.Fatal("source not synced")
	}
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) {
		cfg.SetMaxWait = 90 * time.Second // taken by the sweep below
		// As the daemon wires them.
		cfg.SourceSynced = func(chat tg.ChatID, upTo int64) bool {
			low, _, ok := lst.Watermark(chat)
			return ok && !lst.IsDirty(chat) && low >= upTo
		}
		cfg.InFlight = lst.InFlight
	}, nil)
	for i := range 3 {
		m := e.world.Post(src, 0, tgsim.Post{FileName: fmt.Sprintf("doc%d.zip", i), Data: zipOf("f.txt", fmt.Sprint(i)), AlbumID: 99})
		lst.HandleUpdate(tg.NewMessage{Message: e.view(c, m)})
	}
	var items []listener.Item
	for range 3 {
		items = append(items, <-lst.Queue())
	}
	// Two documents handled; the third is taken by a worker still busy.
	for _, it := range items[:2] {
		mustHandle(t, p, it.Message, store.OutcomePartPending)
		lst.Done(it)
	}
	e.now = e.now.Add(2 * time.Minute) // past SetSettle and SetMaxWait
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 0 || res.DeadLetter != 0 {
		t.Fatalf("sweep with the album's last document in flight = %+v, %v; want it waiting", res, err)
	}
	mustHandle(t, p, items[2].Message, store.OutcomePartPending)
	lst.Done(items[2])
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want the album completed", res, err)
	}
	pkgs, err := e.st.PackageHashes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 {
		t.Fatalf("%d packages, want the album as one", len(pkgs))
	}
	for _, pkg := range pkgs {
		if pkg.PartCount != 3 {
			t.Errorf("album package has %d parts, want 3", pkg.PartCount)
		}
	}
	if n := len(e.delivered()); n != 3 {
		t.Errorf("delivered %d documents, want the album's 3", n)
	}
}

// lateParts is a store that lets a set's missing part arrive while the
// sweeper is dead-lettering the set: before the first dead letter is
// written, arrive runs.
type lateParts struct {
	ingest.Store
	once   sync.Once
	arrive func()
}

func (s *lateParts) RecordDeadLetter(ctx context.Context, d store.DeadLetter, m store.SourceMessage) error {
	s.once.Do(s.arrive)
	return s.Store.RecordDeadLetter(ctx, d, m)
}

// A set's missing part that arrives while the expired set is being
// dead-lettered finds nothing to revive yet; the set must still come back
// together and complete, not split into two dead sets that each miss the
// other's parts.
func TestPartArrivingWhileSetIsDeadLetteredRevivesIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	c := e.world.Client("a")
	if err := c.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	st := &lateParts{Store: e.st}
	p := ingest.NewPipeline(ingest.Config{
		Account: "a", Destinations: []tg.ChatID{e.dest},
		SetSettle: time.Minute, SetMaxWait: time.Hour, RetryBase: time.Millisecond,
		Now: func() time.Time { return e.now },
	}, st, tg.NewSession(c, func(tg.Update) {}), nil)
	e.pipes = append(e.pipes, p)

	whole := archivetest.SevenZip([]archivetest.File{{Name: "late/data.bin", Data: []byte(strings.Repeat("late", 3000))}})
	var msgs []tg.Message
	for i, part := range archivetest.Split(whole, 3) {
		msgs = append(msgs, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("late.7z.%03d", i+1), Data: part})))
	}
	mustHandle(t, p, msgs[0], store.OutcomePartPending)
	mustHandle(t, p, msgs[2], store.OutcomePartPending)
	st.arrive = func() { mustHandle(t, p, msgs[1], store.OutcomePartPending) }
	e.now = e.now.Add(2 * time.Hour) // the set of parts 1 and 3 has expired
	if res, err := p.Sweep(e.ctx); err != nil || res.DeadLetter != 1 {
		t.Fatalf("sweep = %+v, %v; want the expired set dead-lettered", res, err)
	}
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep after the late part = %+v, %v; want the set completed", res, err)
	}
	if n := len(e.delivered()); n != 3 {
		t.Errorf("delivered %d parts, want 3", n)
	}
	if left, err := e.st.DeadLetters(e.ctx, "", 10); err != nil || len(left) != 0 {
		t.Errorf("dead letters left: %+v, %v", left, err)
	}
}

// An album document the live stream lost leaves a hole in the album's
// consecutive ids. The album must not complete without it: the sweeper
// looks the hole up, finds the document and completes the album whole.
func TestAlbumWithAHoleFetchesTheMissingDocument(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	var msgs []tg.Message
	for i := range 3 {
		m := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("hole%d.zip", i), Data: zipOf("f.txt", fmt.Sprint(i)), AlbumID: 55})
		msgs = append(msgs, e.view(c, m))
	}
	mustHandle(t, p, msgs[0], store.OutcomePartPending)
	mustHandle(t, p, msgs[2], store.OutcomePartPending)
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 0 {
		t.Fatalf("sweep of an album with a hole = %+v, %v; want it waiting", res, err)
	}
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want the album completed", res, err)
	}
	pkgs, err := e.st.PackageHashes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 {
		t.Fatalf("%d packages, want the album as one", len(pkgs))
	}
	for _, pkg := range pkgs {
		if pkg.PartCount != 3 {
			t.Errorf("album package has %d parts, want 3", pkg.PartCount)
		}
	}
	if n := len(e.delivered()); n != 3 {
		t.Errorf("delivered %d documents, want the album's 3", n)
	}
}

// A split zip's final x.zip handled before its x.z01 and x.z02, still
// queued behind slower work, is not a lone archive: the set waits for them.
func TestSplitZipWaitsForItsQueuedFirstVolumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	src := e.src["a"]
	lst := listener.New(listener.Config{Account: "a", QueueCapacity: 8}, e.st, nil)
	lst.Watch(store.Source{ChatID: src, Account: "a", Kind: tg.KindChannel})
	if !lst.CaughtUp(src, store.Era{}, 0) {
		t.Fatal("source not synced")
	}
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) {
		cfg.SetMaxWait = 90 * time.Second // taken by the sweeps below
		cfg.SourceSynced = func(chat tg.ChatID, upTo int64) bool {
			low, _, ok := lst.Watermark(chat)
			return ok && !lst.IsDirty(chat) && low >= upTo
		}
		cfg.InFlight = lst.InFlight
	}, nil)
	vols := archivetest.ZipSplit([]archivetest.File{{Name: "split/data.bin", Data: []byte(strings.Repeat("s", 9000))}}, 3)
	names := []string{"split.z01", "split.z02", "split.zip"}
	for i, v := range vols {
		m := e.world.Post(src, 0, tgsim.Post{FileName: names[i], Data: v})
		lst.HandleUpdate(tg.NewMessage{Message: e.view(c, m)})
	}
	var items []listener.Item
	for range len(vols) {
		items = append(items, <-lst.Queue())
	}
	mustHandle(t, p, items[2].Message, store.OutcomePartPending)
	lst.Done(items[2])
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 0 || res.DeadLetter != 0 {
		t.Fatalf("sweep with the first volumes in flight = %+v, %v; want the set waiting", res, err)
	}
	for _, it := range items[:2] {
		mustHandle(t, p, it.Message, store.OutcomePartPending)
		lst.Done(it)
	}
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want the set completed", res, err)
	}
	pkgs, err := e.st.PackageHashes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range pkgs {
		if pkg.PartCount != 3 || pkg.ListingError != "" {
			t.Errorf("package %+v; want the 3 volumes listed without error", pkg)
		}
	}
	if len(pkgs) != 1 || len(e.delivered()) != 3 {
		t.Errorf("%d packages and %d documents delivered, want 1 and 3", len(pkgs), len(e.delivered()))
	}
}

// An album whose last document the live stream lost, taken because it
// expired while its source was still catching up, looks past its last part
// and completes whole.
func TestExpiredAlbumFetchesItsLostLastDocument(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) {
		cfg.SetMaxWait = 90 * time.Second
		cfg.SourceSynced = func(tg.ChatID, int64) bool { return false } // catch-up still running
	}, nil)
	var msgs []tg.Message
	for i := range 3 {
		m := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("tail%d.zip", i), Data: zipOf("f.txt", fmt.Sprint(i)), AlbumID: 56})
		msgs = append(msgs, e.view(c, m))
	}
	e.world.Post(e.src["a"], 0, tgsim.Post{Text: "after the album"})
	mustHandle(t, p, msgs[0], store.OutcomePartPending)
	mustHandle(t, p, msgs[1], store.OutcomePartPending)
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 0 {
		t.Fatalf("sweep of an expired album missing its last document = %+v, %v; want it waiting", res, err)
	}
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want the album completed", res, err)
	}
	wantOnePackage(t, e, 3, "album")
}

// A forwarded album holding a split zip, after the original was delivered:
// every document of it is a duplicate part, the final x.zip included, and
// nothing is sent again.
func TestForwardedAlbumWithSplitZipIsAllDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	vols := archivetest.ZipSplit([]archivetest.File{{Name: "fwd/data.bin", Data: []byte(strings.Repeat("f", 9000))}}, 2)
	names := []string{"fwd.z01", "fwd.zip"}
	var uids []string
	for i, v := range vols {
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: names[i], Data: v, AlbumID: 71}))
		mustHandle(t, p, m, store.OutcomePartPending)
		uids = append(uids, m.Document.File.UniqueID)
	}
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want the album completed", res, err)
	}
	for _, uid := range uids {
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{SameFileAs: uid, AlbumID: 72}))
		mustHandle(t, p, m, store.OutcomeDuplicate)
	}
	e.now = e.now.Add(2 * time.Minute)
	if _, err := p.Sweep(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.delivered()); n != 2 {
		t.Errorf("delivered %d documents, want the album's 2 once", n)
	}
}

// SetMaxWait bounds the wait for a set's parts, not its delivery: a set
// whose package is catalogued but whose sends keep failing (retryably) past
// SetMaxWait is retried at the next sweep, never dead-lettered with its
// package undelivered.
func TestSetDeliveryFailingPastMaxWaitIsRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	vols := archivetest.ZipSplit([]archivetest.File{{Name: "late/data.bin", Data: []byte(strings.Repeat("d", 9000))}}, 3)
	for i, n := range []string{"late.z01", "late.z02", "late.zip"} {
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: n, Data: vols[i]}))
		mustHandle(t, p, m, store.OutcomePartPending)
	}
	e.now = e.now.Add(2 * time.Hour) // settled and past SetMaxWait
	for _, m := range []string{tg.MethodSendMessage, tg.MethodSendMessageAlbum} {
		e.world.InjectError("a", m, &tg.Error{Code: 500, Message: "RPC_CALL_FAIL"}, 1000)
	}
	// The set is catalogued and its delivery queued: sends play no part in
	// completing it.
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 || res.DeadLetter != 0 {
		t.Fatalf("sweep while sends fail = %+v, %v; want the set completed, no dead letter", res, err)
	}
	if pkgs, err := e.st.PackageHashes(e.ctx); err != nil || len(pkgs) != 1 {
		t.Fatalf("%d packages (%v), want the set catalogued before its delivery failed", len(pkgs), err)
	}
	stage := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil)
	if res, err := stage.RunOnce(e.ctx); err != nil || res.Deferred != 1 || res.Failed != 0 || res.Delivered != 0 {
		t.Fatalf("delivery while sends fail = %+v, %v; want it deferred, not given up", res, err)
	}
	if left, err := e.st.DeadLetters(e.ctx, "", 10); err != nil || len(left) != 0 {
		t.Fatalf("dead letters: %+v, %v; want none", left, err)
	}
	e.world.InjectError("a", tg.MethodSendMessage, nil, 0)
	e.world.InjectError("a", tg.MethodSendMessageAlbum, nil, 0)
	e.now = e.now.Add(time.Minute) // past the retry delay
	if n := len(e.delivered()); n != 3 {
		t.Errorf("delivered %d documents, want 3", n)
	}
}

// An album whose last documents the live stream lost, with nothing posted
// after it: the source looks synced up to the first document and the album
// is quiet, which proves nothing about what follows it. The sweep asks for
// the id after its last part, finds the rest and completes the album whole
// (once, as one package) instead of delivering its first document alone.
func TestSettledAlbumLooksPastItsLastPart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) {
		cfg.SourceSynced = func(tg.ChatID, int64) bool { return true } // synced up to the part seen
	}, nil)
	var msgs []tg.Message
	for i := range 3 {
		m := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("lost%d.zip", i), Data: zipOf("f.txt", fmt.Sprint(i)), AlbumID: 57})
		msgs = append(msgs, e.view(c, m))
	}
	mustHandle(t, p, msgs[0], store.OutcomePartPending)
	for range 4 {
		e.now = e.now.Add(time.Minute)
		if _, err := p.Sweep(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	wantOnePackage(t, e, 3, "album")
}

// A multipart set whose last volumes the live stream lost, with nothing
// posted after them: quiet and synced up to the parts seen, it is still
// not taken short. The sweep finds the rest after its last part and the
// set is one package of every volume. Likewise the final x.zip of a split
// zip seen alone: its x.z01… before it are asked for.
func TestSettledSetLooksForLostParts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		names []string
		seen  []int
	}{
		{[]string{"lost.zip.001", "lost.zip.002", "lost.zip.003", "lost.zip.004"}, []int{0, 1}},
		{[]string{"split.z01", "split.z02", "split.zip"}, []int{2}},
	} {
		e := newEnv(t, "a")
		p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) {
			cfg.SourceSynced = func(tg.ChatID, int64) bool { return true }
		}, nil)
		whole := zipOf("inside.txt", strings.Repeat("z", 4000))
		vols := archivetest.Split(whole, len(tc.names))
		var msgs []tg.Message
		for i, n := range tc.names {
			msgs = append(msgs, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: n, Data: vols[i]})))
		}
		for _, i := range tc.seen {
			mustHandle(t, p, msgs[i], store.OutcomePartPending)
		}
		for range 4 {
			e.now = e.now.Add(time.Minute)
			if _, err := p.Sweep(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
		wantOnePackage(t, e, len(tc.names), fmt.Sprint(tc.names))
	}
}

// wantOnePackage fails the test unless the catalogue holds exactly one
// package, of parts parts, and every part was delivered once.
func wantOnePackage(t *testing.T, e *env, parts int, what string) {
	t.Helper()
	pkgs, err := e.st.PackageHashes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 {
		t.Fatalf("%s: %d packages, want one", what, len(pkgs))
	}
	for _, pkg := range pkgs {
		if pkg.PartCount != parts {
			t.Errorf("%s: package of %d parts, want %d", what, pkg.PartCount, parts)
		}
	}
	if n := len(e.delivered()); n != parts {
		t.Errorf("%s: %d documents delivered, want %d", what, n, parts)
	}
}

// An album catalogued but not yet delivered when the daemon died (all its
// messages unhandled) may be gathered again short: here its last two
// documents come back first and look like a whole album. They are some of
// the catalogued package's files, so they wait for it rather than become a
// package of their own, which would deliver them twice; the first document
// completes the set and the package is delivered whole, once.
func TestAlbumGatheredShortWaitsForItsPackage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) {
		cfg.SourceSynced = func(tg.ChatID, int64) bool { return true }
	}, nil)
	sweep := func() {
		for range 4 {
			e.now = e.now.Add(time.Minute)
			if _, err := p.Sweep(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	var msgs []tg.Message
	var parts []store.Part
	for i := range 3 {
		data := zipOf("f.txt", fmt.Sprint(i))
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("short%d.zip", i), Data: data, AlbumID: 61}))
		msgs = append(msgs, m)
		sum := sha256.Sum256(data)
		parts = append(parts, store.Part{Index: i, FileName: m.Document.FileName, Size: int64(len(data)),
			SHA256: sum[:], UniqueID: m.Document.File.UniqueID, Source: m.Key()})
	}
	hash := sha256.Sum256([]byte("the album's content hash"))
	if _, _, err := e.st.CreatePackage(e.ctx, store.Package{ContentHash: hash[:], Name: "short0.zip", Format: "album",
		PartCount: 3, Origin: msgs[0].Key()}, parts, nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs[1:] {
		mustHandle(t, p, m, store.OutcomePartPending)
	}
	sweep()
	if n := len(e.delivered()); n != 0 {
		t.Fatalf("%d documents delivered from the album gathered short, want none", n)
	}
	mustHandle(t, p, msgs[0], store.OutcomePartPending)
	sweep()
	wantOnePackage(t, e, 3, "album gathered short, then whole")
}
