package ingest_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/internal/pgtest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// env is one simulated world with a catalogue and one pipeline per account.
type env struct {
	t     testing.TB
	ctx   context.Context
	world *tgsim.World
	st    *store.Store
	dest  tg.ChatID
	src   map[string]tg.ChatID // account -> its source
	now   time.Time
	files string // the world's download directory
	// pipes are the pipelines made so far, whose delivery stages
	// delivered runs.
	pipes []*ingest.Pipeline
	// wrapStore, when set, wraps the catalogue of pipelines made from
	// then on.
	wrapStore func(ingest.Store) ingest.Store
}

func newEnv(t *testing.T, accounts ...string) *env { return newEnvTB(t, accounts...) }

func newEnvB(b *testing.B) *env { return newEnvTB(b, "a") }

func newEnvTB(t testing.TB, accounts ...string) *env {
	t.Helper()
	return newEnvWorld(t, tgsim.Config{Seed: 1}, accounts...)
}

// newEnvWorld is newEnv on a world configured by cfg (its FilesDir is
// always a fresh temporary directory).
func newEnvWorld(t testing.TB, cfg tgsim.Config, accounts ...string) *env {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, store.Config{URL: pgtest.New(t), MaxConns: 32})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	e := &env{t: t, ctx: ctx, st: st, src: map[string]tg.ChatID{}, now: time.Now(), files: t.TempDir()}
	cfg.FilesDir = e.files
	e.world = tgsim.NewWorld(cfg)
	for _, a := range accounts {
		e.world.AddAccount(a, false)
	}
	e.dest = e.world.AddChat(tg.KindChannel, "mirror", accounts...)
	for _, a := range accounts {
		e.src[a] = e.world.AddChat(tg.KindChannel, "source of "+a, a)
		if err := st.EnsureSource(ctx, store.Source{ChatID: e.src[a], Account: a, Kind: tg.KindChannel}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// pipeline returns a pipeline on a fresh client of account.
func (e *env) pipeline(account string) (*ingest.Pipeline, *tgsim.Client) {
	e.t.Helper()
	p, c, _ := e.pipelineWith(account, nil, nil)
	return p, c
}

// pipelineWith is pipeline with the configuration changed by mod and the
// session wrapped by wrap (either may be nil); it also returns the
// pipeline's metrics.
func (e *env) pipelineWith(account string, mod func(*ingest.Config), wrap func(*tg.Session) ingest.Telegram) (*ingest.Pipeline, *tgsim.Client, *ingest.Metrics) {
	e.t.Helper()
	c := e.world.Client(account)
	if err := c.LoadChats(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	// The session follows its source, as the daemon's do: the edits made
	// there reach its database.
	if err := c.OpenChat(e.ctx, e.src[account]); err != nil {
		e.t.Fatal(err)
	}
	sess := tg.NewSession(c, func(tg.Update) {})
	e.t.Cleanup(func() { _ = c.Close() })
	cfg := ingest.Config{
		Account: account, Destinations: []tg.ChatID{e.dest},
		SetSettle: time.Minute, SetMaxWait: time.Hour, RetryBase: time.Millisecond,
		Now: func() time.Time { return e.now },
	}
	if mod != nil {
		mod(&cfg)
	}
	var t ingest.Telegram = sess
	if wrap != nil {
		t = wrap(sess)
	}
	m := ingest.NewMetrics(prometheus.NewRegistry())
	var st ingest.Store = e.st
	if e.wrapStore != nil {
		st = e.wrapStore(st)
	}
	p := ingest.NewPipeline(cfg, st, t, m)
	e.pipes = append(e.pipes, p)
	return p, c, m
}

// deliver runs the delivery stage of each account's latest pipeline (an
// earlier one is a session that has ended) over what is due in the queue:
// ingest only queues deliveries.
func (e *env) deliver() {
	e.t.Helper()
	var latest []*ingest.Pipeline
	seen := map[string]bool{}
	for i := len(e.pipes) - 1; i >= 0; i-- {
		if a := e.pipes[i].Config().Account; !seen[a] {
			seen[a] = true
			latest = append(latest, e.pipes[i])
		}
	}
	for range 2 { // a second round for deliveries handed to another account
		for _, p := range latest {
			if _, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil).RunOnce(e.ctx); err != nil {
				e.t.Fatalf("delivery stage: %v", err)
			}
		}
	}
}

// view returns msg as client c sees it (file ids and remote ids are per
// account and session).
func (e *env) view(c *tgsim.Client, m tg.Message) tg.Message {
	e.t.Helper()
	got, err := c.GetMessage(e.ctx, m.ChatID, m.ID)
	if errors.Is(err, tg.ErrMessageNotFound) {
		// A channel's message newer than the last one a session that did
		// not open the chat learned is hidden from it: the daemon's session
		// follows its sources.
		if err := c.OpenChat(e.ctx, m.ChatID); err != nil {
			e.t.Fatal(err)
		}
		got, err = c.GetMessage(e.ctx, m.ChatID, m.ID)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// delivered runs the delivery stages, then returns the documents in the
// destination.
func (e *env) delivered() []tg.Message {
	e.deliver()
	var out []tg.Message
	for _, m := range e.world.Messages(e.dest) {
		if m.Document != nil {
			out = append(out, m)
		}
	}
	return out
}

func zipOf(name, body string) []byte {
	return archivetest.Zip([]archivetest.File{{Name: name, Data: []byte(body)}})
}

func mustHandle(t *testing.T, p *ingest.Pipeline, m tg.Message, want store.Outcome) {
	t.Helper()
	got, err := p.Handle(t.Context(), m)
	if err != nil {
		t.Fatalf("handle %s: %v", m.Key(), err)
	}
	if got != want {
		t.Fatalf("handle %s: outcome %q, want %q", m.Key(), got, want)
	}
}

func TestSingleArchiveCataloguedAndDelivered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "photos.7z", Data: archivetest.SevenZip([]archivetest.File{
		{Name: "2024/beach.jpg", Data: []byte("jpeg bytes")}, {Name: "2024/notes.txt", Data: []byte("hello")},
	})})
	mustHandle(t, p, e.view(c, posted), store.OutcomePackage)

	pkgs, err := e.st.PackageHashes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 {
		t.Fatalf("catalogue has %d packages, want 1", len(pkgs))
	}
	for _, pkg := range pkgs {
		if pkg.Format != "7z" || pkg.FileCount != 2 || pkg.ListingError != "" {
			t.Errorf("package = %+v, want 7z with 2 files and no listing error", pkg)
		}
	}
	d := e.delivered()
	if len(d) != 1 || d[0].Document.File.UniqueID != posted.Document.File.UniqueID {
		t.Fatalf("destination holds %d documents, want the source file once", len(d))
	}
	if !strings.Contains(d[0].Caption, ingest.TokenPrefix) {
		t.Errorf("caption %q carries no delivery token", d[0].Caption)
	}
}

func TestLayer1SourceKeyCostsNoCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "a.tar", Data: archivetest.Tar([]archivetest.File{{Name: "x", Data: []byte("1")}})}))
	mustHandle(t, p, m, store.OutcomePackage)
	before := e.world.Calls("a")
	mustHandle(t, p, m, store.OutcomeDuplicate)
	after := e.world.Calls("a")
	for method, n := range after {
		if n != before[method] {
			t.Errorf("second handling called %s %d time(s); the source key must answer without Telegram", method, n-before[method])
		}
	}
	if n := len(e.delivered()); n != 1 {
		t.Errorf("delivered %d times, want 1", n)
	}
}

func TestLayer2KnownUniqueIDsSkipDownload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	other := e.world.AddChat(tg.KindSupergroup, "second source", "a")
	if err := e.st.EnsureSource(e.ctx, store.Source{ChatID: other, Account: "a"}); err != nil {
		t.Fatal(err)
	}
	p, c := e.pipeline("a")
	first := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "set.zip", Data: zipOf("f", "one")})
	forward := e.world.Post(other, 0, tgsim.Post{FileName: "set.tar", SameFileAs: first.Document.File.UniqueID})
	// The plain .zip lists as a whole archive: a package at once.
	mustHandle(t, p, e.view(c, first), store.OutcomePackage)
	downloads := e.world.Calls("a")[tg.MethodDownloadFile]
	mustHandle(t, p, e.view(c, forward), store.OutcomeDuplicate)
	if got := e.world.Calls("a")[tg.MethodDownloadFile]; got != downloads {
		t.Errorf("forward was downloaded (%d downloads, want %d): known unique ids must settle it", got, downloads)
	}
	if n := len(e.delivered()); n != 1 {
		t.Errorf("delivered %d times, want 1", n)
	}
}

func TestLayer4ContentHashLinksReupload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	data := archivetest.TarGz([]archivetest.File{{Name: "doc.txt", Data: []byte("same bytes")}})
	first := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "a.tar.gz", Data: data})
	again := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "copy.tar.gz", Data: data})
	if first.Document.File.UniqueID == again.Document.File.UniqueID {
		t.Fatal("re-upload kept the unique id; the test needs a new one")
	}
	mustHandle(t, p, e.view(c, first), store.OutcomePackage)
	mustHandle(t, p, e.view(c, again), store.OutcomeDuplicate)
	if n := len(e.delivered()); n != 1 {
		t.Errorf("delivered %d times, want 1", n)
	}
	// The re-upload's unique id is remembered: a third copy costs no download.
	id, ok, err := e.st.PackageByUniqueIDs(e.ctx, []string{again.Document.File.UniqueID})
	if err != nil || !ok || id == 0 {
		t.Errorf("re-upload unique id not linked to the package (ok=%v, err=%v)", ok, err)
	}
}

// Two accounts, each with two workers, race on the same package posted in
// both their sources: exactly one delivery, one package.
func TestRaceTwoAccountsTwoWorkersOneDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a", "b")
	pa, ca := e.pipeline("a")
	pb, cb := e.pipeline("b")
	data := archivetest.Tar([]archivetest.File{{Name: "shared.bin", Data: []byte("contended")}})
	ma := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "shared.tar", Data: data})
	mb := e.world.Post(e.src["b"], 0, tgsim.Post{FileName: "shared.tar", SameFileAs: ma.Document.File.UniqueID})
	va, vb := e.view(ca, ma), e.view(cb, mb)

	if packages := packagesBroughtIn(t, e, []raceJob{{pa, va}, {pa, va}, {pb, vb}, {pb, vb}}); packages != 1 {
		t.Errorf("%d workers brought the package in, want exactly 1", packages)
	}
	if n := len(e.delivered()); n != 1 {
		t.Errorf("destination holds %d copies, want 1", n)
	}
}

// raceJob is a message a pipeline processes in packagesBroughtIn.
type raceJob struct {
	p *ingest.Pipeline
	m tg.Message
}

// packagesBroughtIn processes every job at the same moment, each on its
// own goroutine, and returns how many ended as a new package.
func packagesBroughtIn(t *testing.T, e *env, jobs []raceJob) int {
	t.Helper()
	start := make(chan struct{})
	var wg sync.WaitGroup
	outcomes := make(chan store.Outcome, len(jobs))
	for _, job := range jobs {
		wg.Go(func() {
			<-start
			out, err := job.p.Process(e.ctx, job.m)
			if err != nil {
				t.Errorf("process %v: %v", job.m.Key(), err)
			}
			outcomes <- out
		})
	}
	close(start)
	wg.Wait()
	close(outcomes)
	packages := 0
	for o := range outcomes {
		if o == store.OutcomePackage {
			packages++
		}
	}
	return packages
}

// Identical bytes uploaded twice (two unique ids, so no lock on them is
// shared) and handled at the same moment by several workers of two
// accounts: one package, the other upload its duplicate, one delivery.
// The catalogue's unique content hash decides between them.
func TestRaceIdenticalUploadsOnePackage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a", "b")
	pa, ca := e.pipeline("a")
	pb, cb := e.pipeline("b")
	for round := range 4 {
		data := archivetest.Tar([]archivetest.File{{Name: "same.bin", Data: fmt.Appendf(nil, "identical %d", round)}})
		va := e.view(ca, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "a.tar", Data: data}))
		vb := e.view(cb, e.world.Post(e.src["b"], 0, tgsim.Post{FileName: "b.tar", Data: data}))
		if packages := packagesBroughtIn(t, e, []raceJob{{pa, va}, {pb, vb}, {pa, va}, {pb, vb}}); packages != 1 {
			t.Errorf("round %d: %d workers brought the package in, want exactly 1", round, packages)
		}
		sum := sha256.Sum256(data)
		var id int64
		if err := e.st.Pool().QueryRow(e.ctx, `SELECT id FROM packages WHERE content_hash = $1`, sum[:]).Scan(&id); err != nil {
			t.Fatalf("round %d: package not catalogued (%v)", round, err)
		}
		for _, u := range []string{va.Document.File.UniqueID, vb.Document.File.UniqueID} {
			if got, ok, err := e.st.PackageOfPart(e.ctx, u); err != nil || !ok || got != id {
				t.Errorf("round %d: unique id %s gives package %d (%v, %v), want %d", round, u, got, ok, err, id)
			}
		}
	}
	queued, err := e.st.DueWaiting(e.ctx, "a", e.now, 100)
	if err != nil {
		t.Fatal(err)
	}
	more, err := e.st.DueWaiting(e.ctx, "b", e.now, 100)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(queued) + len(more); n != 4 {
		t.Errorf("%d deliveries queued, want one per package (4)", n)
	}
}

func TestCorruptArchiveIsMirroredWithListingError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	good := archivetest.TarGz([]archivetest.File{{Name: "x", Data: []byte(strings.Repeat("y", 4096))}})
	m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "broken.tar.gz", Data: good[:len(good)/2]}))
	mustHandle(t, p, m, store.OutcomePackage)
	pkgs, err := e.st.PackageHashes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range pkgs {
		if pkg.ListingError == "" {
			t.Errorf("truncated archive catalogued without a listing error")
		}
	}
	if n := len(e.delivered()); n != 1 {
		t.Errorf("corrupt archive delivered %d times, want 1", n)
	}
}

func TestMultipartSetIsOnePackage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	whole := archivetest.SevenZip([]archivetest.File{{Name: "big/file.bin", Data: []byte(strings.Repeat("z", 9000))}})
	var msgs []tg.Message
	for i, part := range archivetest.Split(whole, 3) {
		name := "big.7z.00" + string(rune('1'+i))
		msgs = append(msgs, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name, Data: part})))
	}
	// Parts arrive out of order, as workers finish them.
	for _, i := range []int{2, 0, 1} {
		mustHandle(t, p, msgs[i], store.OutcomePartPending)
	}
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 0 || res.Waiting != 1 {
		t.Fatalf("sweep before settling = %+v, %v; want the set waiting", res, err)
	}
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
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
		if pkg.PartCount != 3 || pkg.FileCount != 1 || pkg.ListingError != "" {
			t.Errorf("package = %+v; want 3 parts listed as one 7z", pkg)
		}
	}
	d := e.delivered()
	if len(d) != 3 {
		t.Fatalf("delivered %d parts, want 3", len(d))
	}
	for i, m := range d {
		if m.Document.File.UniqueID != msgs[i].Document.File.UniqueID {
			t.Errorf("part %d delivered out of order", i)
		}
	}
}

func TestIncompleteSetBecomesDeadLetter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	for _, name := range []string{"movie.part1.rar", "movie.part3.rar"} {
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name, Data: []byte("volume " + name)}))
		mustHandle(t, p, m, store.OutcomePartPending)
	}
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 0 || res.DeadLetter != 0 {
		t.Fatalf("sweep = %+v, %v; an incomplete set must keep waiting until SetMaxWait", res, err)
	}
	e.now = e.now.Add(2 * time.Hour)
	if res, err := p.Sweep(e.ctx); err != nil || res.DeadLetter != 1 {
		t.Fatalf("sweep = %+v, %v; want the set dead-lettered", res, err)
	}
	dls, err := e.st.DeadLetters(e.ctx, store.DeadPending, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 2 {
		t.Fatalf("%d dead letters, want one per part (2)", len(dls))
	}
	for _, d := range dls {
		if d.ErrorClass != "incomplete_set" || !strings.Contains(d.Reason, "2") || !d.NextAttemptAt.IsZero() {
			t.Errorf("dead letter %+v: want class incomplete_set, a reason naming part 2 and no timer (it waits for the part)", d)
		}
	}
	if n := len(e.delivered()); n != 0 {
		t.Errorf("incomplete set delivered %d parts", n)
	}
}

func TestAlbumIsOnePackage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	for i, name := range []string{"one.zip", "two.tar", "notes.pdf"} {
		data := []byte("%PDF-1.4")
		if i < 2 {
			data = zipOf(name+".txt", name)
			if i == 1 {
				data = archivetest.Tar([]archivetest.File{{Name: "t.txt", Data: []byte(name)}})
			}
		}
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name, Data: data, AlbumID: 77}))
		want := store.OutcomePartPending
		if i == 2 {
			want = store.OutcomeNotArchive
		}
		mustHandle(t, p, m, want)
	}
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want the album completed", res, err)
	}
	pkgs, _ := e.st.PackageHashes(e.ctx)
	for _, pkg := range pkgs {
		if pkg.PartCount != 2 || pkg.FileCount != 2 || pkg.ListingError != "" {
			t.Errorf("album package = %+v; want 2 parts, each listed", pkg)
		}
	}
	if n := len(e.delivered()); n != 2 {
		t.Errorf("delivered %d documents, want the album's 2 archives", n)
	}
}

// crashingSession sends, then dies before the outcome arrives, as a daemon
// killed mid-delivery would.
type crashingSession struct {
	*tg.Session
	client tg.Client
	// kill cancels the work of the process that dies.
	kill context.CancelFunc
}

func (s crashingSession) SendTo(ctx context.Context, chat tg.ChatID, thread int64, remoteID, caption string) (tg.Message, error) {
	if _, err := s.client.SendDocumentTo(ctx, chat, thread, remoteID, caption, tg.SendOptions{}); err != nil {
		return tg.Message{}, err
	}
	_ = s.client.Close()
	s.kill()
	return tg.Message{}, errors.New("process killed")
}

// crashDelivering handles m through a pipeline on session s1 (of client
// c1) whose process dies right after sendMessage: ingest catalogues the
// package and queues its delivery, and the delivery stage is killed in the
// middle of the send, leaving the queue row and the intent behind.
func crashDelivering(t *testing.T, e *env, s1 *tg.Session, c1 tg.Client, m tg.Message) {
	t.Helper()
	ctx, kill := context.WithCancel(e.ctx)
	defer kill()
	p1 := ingest.NewPipeline(ingest.Config{Account: "a", Destinations: []tg.ChatID{e.dest}, Now: func() time.Time { return e.now }},
		e.st, crashingSession{s1, c1, kill}, nil)
	mustHandle(t, p1, m, store.OutcomePackage)
	if _, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p1, e.st, nil).RunOnce(ctx); err == nil {
		t.Fatal("the delivery survived the crash")
	}
}

// crashOn loads c1's chats and handles posted through crashDelivering on
// a session of c1, returning once that session has ended.
func crashOn(t *testing.T, e *env, c1 *tgsim.Client, posted tg.Message) {
	t.Helper()
	if err := c1.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	s1 := tg.NewSession(c1, func(tg.Update) {})
	crashDelivering(t, e, s1, c1, e.view(c1, posted))
	<-s1.Done()
}

func TestCrashMidDeliveryIsReconciledWithoutResend(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "crash.tar", Data: archivetest.Tar([]archivetest.File{{Name: "c", Data: []byte("c")}})})

	// A watcher on the destination sees the crashed send land.
	watcher := e.world.Client("a")
	t.Cleanup(func() { _ = watcher.Close() })
	landed := make(chan struct{}, 1)
	wsess := tg.NewSession(watcher, func(u tg.Update) {
		if nm, ok := u.(tg.NewMessage); ok && nm.Message.ChatID == e.dest && nm.Message.Document != nil {
			landed <- struct{}{}
		}
	})
	if err := wsess.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := wsess.OpenChat(e.ctx, e.dest); err != nil {
		t.Fatal(err)
	}

	c1 := e.world.Client("a")
	if err := c1.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	s1 := tg.NewSession(c1, func(tg.Update) {})
	m1, err := c1.GetMessage(e.ctx, posted.ChatID, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	crashDelivering(t, e, s1, c1, m1)
	select {
	case <-landed:
	case <-time.After(10 * time.Second):
		t.Fatal("the crashed send never reached the destination")
	}

	// After the restart the message is handled again: the intent is found
	// in the destination by its token, and nothing is sent twice.
	p2, c2 := e.pipeline("a")
	mustHandle(t, p2, e.view(c2, posted), store.OutcomeDuplicate)
	e.deliver()
	if n := len(e.delivered()); n != 1 {
		t.Fatalf("destination holds %d copies after reconciliation, want 1", n)
	}
	if sends := e.world.Calls("a")[tg.MethodSendMessage]; sends != 1 {
		t.Errorf("%d sendMessage calls, want 1 (the crashed one)", sends)
	}
	if e.world.Calls("a")[tg.MethodGetChatHistory] == 0 {
		t.Error("the destination's history was not read for the token before deciding")
	}
}

// lockSpy is the real store, reporting each advisory lock a pipeline asks
// for before it waits on it.
type lockSpy struct {
	*store.Store
	asked chan string
}

func (s lockSpy) Lock(ctx context.Context, name string, reads ...store.Statement) (*store.Lock, error) {
	s.asked <- name
	return s.Store.Lock(ctx, name, reads...)
}

// A package is delivered to a destination only under its delivery lock,
// whichever copy queued it. Here one worker is in the middle of delivering
// the package (it holds the lock and has written its intent) when a
// forward of an identical re-upload arrives, known by other unique ids:
// its delivery must wait for the lock, not send.
func TestDeliveryWaitsForContentHashLock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	// One client and one session: two sessions on a client would split its
	// update stream between them.
	c := e.world.Client("a")
	t.Cleanup(func() { _ = c.Close() })
	sess := tg.NewSession(c, func(tg.Update) {})
	if err := sess.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	data := archivetest.Tar([]archivetest.File{{Name: "r", Data: []byte("contended copies")}})
	orig := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "r.tar", Data: data}))
	reup := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "r.tar", Data: data}))
	fwd := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "r.tar", SameFileAs: reup.Document.File.UniqueID}))

	// The state the first worker has reached: package catalogued, the
	// re-upload's unique id linked, an intent written, the lock held.
	sum := sha256.Sum256(data)
	pkg, _, err := e.st.CreatePackage(e.ctx, store.Package{ContentHash: sum[:], Name: "r.tar", Format: "tar",
		TotalSize: int64(len(data)), PartCount: 1, Origin: orig.Key()},
		[]store.Part{{FileName: "r.tar", Size: int64(len(data)), SHA256: sum[:], UniqueID: orig.Document.File.UniqueID, Source: orig.Key()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.AddRemoteFiles(e.ctx, pkg, []string{reup.Document.File.UniqueID}); err != nil {
		t.Fatal(err)
	}
	intent, _, err := e.st.EnsureIntent(e.ctx, pkg, e.dest, 0, "a")
	if err != nil {
		t.Fatal(err)
	}
	deliveryLock := fmt.Sprintf("d:%d:%d", pkg, e.dest)
	held, err := e.st.Lock(e.ctx, deliveryLock)
	if err != nil {
		t.Fatal(err)
	}

	spy := lockSpy{e.st, make(chan string, 8)}
	p := ingest.NewPipeline(ingest.Config{Account: "a", Destinations: []tg.ChatID{e.dest}}, spy, sess, nil)
	// Ingest only queues the copy's delivery: it never waits for a send.
	if out, err := p.Handle(e.ctx, fwd); err != nil || out != store.OutcomeDuplicate {
		t.Fatalf("handle the copy = %q, %v; want a duplicate", out, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, spy, nil).RunOnce(e.ctx)
		done <- err
	}()
	for waiting := false; !waiting; {
		select {
		case name := <-spy.asked:
			waiting = name == deliveryLock
		case err := <-done:
			held.Unlock()
			t.Fatalf("the copy was delivered (%v) while another worker held the package's delivery lock", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the copy's delivery never asked for the package's delivery lock")
		}
	}

	// The first worker finishes its send and records it, then lets go.
	sendCtx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	sent, err := sess.Send(sendCtx, e.dest, orig.Document.File.RemoteID, ingest.Caption(store.Package{Name: "r.tar", PartCount: 1}, 0, intent.Token))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.MarkSent(e.ctx, intent, sent.ID); err != nil {
		t.Fatal(err)
	}
	held.Unlock()
	if err := <-done; err != nil {
		t.Fatalf("deliver the copy: %v", err)
	}
	if n := len(e.delivered()); n != 1 {
		t.Fatalf("destination holds %d copies, want 1", n)
	}
}

// An incomplete set's dead letters wait for the missing part, not for a
// timer: the retry loop never fetches them (no Telegram call, however long
// they wait), and the part, posted late, completes the set and resolves
// them.
func TestIncompleteSetWaitsForItsPartNotATimer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	whole := archivetest.SevenZip([]archivetest.File{{Name: "late/part.bin", Data: []byte(strings.Repeat("q", 5000))}})
	parts := archivetest.Split(whole, 3)
	for _, i := range []int{0, 2} {
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: fmt.Sprintf("late.7z.00%d", i+1), Data: parts[i]}))
		mustHandle(t, p, m, store.OutcomePartPending)
	}
	e.now = e.now.Add(2 * time.Hour)
	if res, err := p.Sweep(e.ctx); err != nil || res.DeadLetter != 1 {
		t.Fatalf("sweep = %+v, %v; want the set dead-lettered", res, err)
	}
	r := ingest.NewRetrier(ingest.RetryConfig{}, p, e.st, nil)
	before := e.world.Calls("a")[tg.MethodGetMessage]
	for range 3 {
		e.now = e.now.Add(24 * time.Hour)
		if res, err := r.RunOnce(e.ctx); err != nil || res.Tried != 0 {
			t.Fatalf("retry = %+v, %v; an incomplete set's letters must not be retried on a timer", res, err)
		}
	}
	if n := e.world.Calls("a")[tg.MethodGetMessage] - before; n != 0 {
		t.Fatalf("%d getMessage calls for letters waiting for a part", n)
	}

	late := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "late.7z.002", Data: parts[1]}))
	mustHandle(t, p, late, store.OutcomePartPending)
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want the set completed", res, err)
	}
	if n := len(e.delivered()); n != 3 {
		t.Errorf("delivered %d parts, want 3", n)
	}
	pending, err := e.st.DeadLetters(e.ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 0 {
		t.Errorf("%d dead letters still unresolved: %+v", len(pending), pending)
	}
}

// A document of a source with protected content cannot be re-sent: it is
// recorded as an exhausted dead letter with that reason before any
// download, and nothing is delivered or retried.
func TestProtectedContentIsDeadLetterBeforeDownload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	e.world.SetProtected(e.src["a"], true)
	p, c := e.pipeline("a")
	m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "secret.zip", Data: zipOf("x", "protected")}))
	if !m.Protected {
		t.Fatalf("message of a protected chat = %+v, want Protected (can_be_saved false)", m)
	}
	before := e.world.Calls("a")
	out, err := p.Process(e.ctx, m)
	if err != nil || out != store.OutcomeDeadLetter {
		t.Fatalf("process = %q, %v; want a dead letter", out, err)
	}
	if n := e.world.Calls("a")[tg.MethodDownloadFile] - before[tg.MethodDownloadFile]; n != 0 {
		t.Errorf("downloaded %d time(s) a file that cannot be re-sent", n)
	}
	if n := len(e.delivered()); n != 0 {
		t.Errorf("delivered %d documents from a protected source", n)
	}
	dls, err := e.st.DeadLetters(e.ctx, store.DeadExhausted, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || !strings.Contains(dls[0].Reason, "protected content") || dls[0].ErrorClass != string(tg.ClassPermanent) {
		t.Fatalf("exhausted dead letters = %+v, want one, permanent, with a protected-content reason", dls)
	}
	st, err := e.st.Status(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Sources {
		if tg.ChatID(s.ChatID) == e.src["a"] && s.ProtectedDocuments != 1 {
			t.Errorf("status shows %d protected documents for the source, want 1", s.ProtectedDocuments)
		}
	}
}

// A message without a document costs no database work, and a document
// edited into it later is still mirrored (nothing recorded it as handled).
func TestTextMessageLeavesNoRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{Text: "hello"}))
	mustHandle(t, p, m, store.OutcomeNotArchive)
	if _, ok, err := e.st.MessageHandled(e.ctx, m.Key()); err != nil || ok {
		t.Fatalf("text message recorded as handled (%v, %v)", ok, err)
	}
	e.world.EditIntoDocument(m.ChatID, m.ID, tgsim.Post{FileName: "late.tar",
		Data: archivetest.Tar([]archivetest.File{{Name: "late.txt", Data: []byte("late")}})})
	mustHandle(t, p, e.view(c, m), store.OutcomePackage)
}
