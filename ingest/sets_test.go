package ingest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/store"
	"stashd/tg"
	"stashd/tg/tgsim"
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

	exhausted, err := e.st.DeadLetters(e.ctx, store.DeadExhausted, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(exhausted) != 1 || exhausted[0].Key != msgs[1].Key() || exhausted[0].ErrorClass != string(tg.ClassPermanent) {
		t.Fatalf("exhausted letters = %+v; want the deleted part, permanent", exhausted)
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
		if d.ErrorClass != "incomplete_set" || !strings.Contains(d.Reason, "next volume missing") || d.NextAttemptAt.IsZero() {
			t.Errorf("letter %+v: want incomplete_set naming the missing volume, retried later", d)
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

// A zip split set forwarded as an album after its package was delivered:
// every file of the album, the final x.zip included, is a duplicate part.
// The x.zip is not a plain archive to be mirrored on its own (it would be a
// second package of the same set's last volume).
func TestDeliveredSetForwardedAsAlbumIsDuplicate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	vols := archivetest.ZipSplit([]archivetest.File{{Name: "fwd/data.bin", Data: []byte(strings.Repeat("z", 9000))}}, 3)
	names := []string{"fwd.z01", "fwd.z02", "fwd.zip"}
	var orig []tg.Message
	for i, n := range names {
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: n, Data: vols[i]}))
		orig = append(orig, m)
		mustHandle(t, p, m, store.OutcomePartPending)
	}
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want the set completed", res, err)
	}
	for _, m := range orig {
		fwd := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{SameFileAs: m.Document.File.UniqueID, AlbumID: 77}))
		mustHandle(t, p, fwd, store.OutcomeDuplicate)
	}
	e.now = e.now.Add(2 * time.Minute)
	if _, err := p.Sweep(e.ctx); err != nil {
		t.Fatal(err)
	}
	if pkgs, err := e.st.PackageHashes(e.ctx); err != nil || len(pkgs) != 1 {
		t.Errorf("%d packages (%v), want the set's one", len(pkgs), err)
	}
	if n := len(e.delivered()); n != 3 {
		t.Errorf("delivered %d documents, want the set's 3", n)
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
	e.world.InjectError("a", tg.MethodSendMessage, &tg.Error{Code: 500, Message: "RPC_CALL_FAIL"}, 1000)
	if res, err := p.Sweep(e.ctx); err != nil || res.Failed != 1 || res.DeadLetter != 0 {
		t.Fatalf("sweep while sends fail = %+v, %v; want the set failed, no dead letter", res, err)
	}
	if pkgs, err := e.st.PackageHashes(e.ctx); err != nil || len(pkgs) != 1 {
		t.Fatalf("%d packages (%v), want the set catalogued before its delivery failed", len(pkgs), err)
	}
	e.world.InjectError("a", tg.MethodSendMessage, nil, 0)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep after sends recover = %+v, %v; want the set completed", res, err)
	}
	if n := len(e.delivered()); n != 3 {
		t.Errorf("delivered %d documents, want 3", n)
	}
}

// hookStore runs hook once, just before the first dead letter is written.
type hookStore struct {
	*store.Store
	once sync.Once
	hook func()
}

func (s *hookStore) RecordDeadLetter(ctx context.Context, d store.DeadLetter, m store.SourceMessage) error {
	s.once.Do(s.hook)
	return s.Store.RecordDeadLetter(ctx, d, m)
}

// A part recorded while the sweeper dead-letters its set (the listing of
// the part seen so far says the next volume is missing) finds no dead
// sibling to revive; the sweeper must bring the set back for it, or the
// late part waits alone for a part that is a dead letter.
func TestPartArrivingWhileSetIsDeadLetteredCompletesIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	other, oc := e.pipeline("a")
	// The sweeping pipeline has a client of its own: one session per client.
	c := e.world.Client("a")
	if err := c.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	vols := archivetest.RarVolumes([]archivetest.File{{Name: "race/data.bin", Data: []byte(strings.Repeat("r", 9000))}}, 2)
	first := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "race.part1.rar", Data: vols[0]}))
	hs := &hookStore{Store: e.st}
	hs.hook = func() {
		late := e.view(oc, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "race.part2.rar", Data: vols[1]}))
		mustHandle(t, other, late, store.OutcomePartPending)
	}
	p := ingest.NewPipeline(ingest.Config{
		Account: "a", Destinations: []tg.ChatID{e.dest},
		SetSettle: time.Minute, SetMaxWait: time.Hour, RetryBase: time.Millisecond,
		Now: func() time.Time { return e.now },
	}, hs, tg.NewSession(c, func(tg.Update) {}), nil)
	mustHandle(t, p, first, store.OutcomePartPending)
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.DeadLetter != 1 {
		t.Fatalf("first sweep = %+v, %v; want the lone first volume dead-lettered", res, err)
	}
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("second sweep = %+v, %v; want the set completed with its late part", res, err)
	}
	if n := len(e.delivered()); n != 2 {
		t.Errorf("delivered %d documents, want 2", n)
	}
}
