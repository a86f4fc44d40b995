package ingest_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// An edit that replaces a source message's document keeps the message id:
// the new archive must still be mirrored, and one whose bytes are known
// must be recognised as a duplicate.
func TestReplacedDocumentIsMirrored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	src := e.src["a"]
	posted := e.world.Post(src, 0, tgsim.Post{FileName: "v1.tar", Data: tarOf("a.txt", "first")})
	mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
	if n := len(e.delivered()); n != 1 {
		t.Fatalf("delivered %d documents, want 1", n)
	}

	edit := e.world.EditMessageMedia(src, posted.ID, tgsim.Post{FileName: "v2.tar", Data: tarOf("a.txt", "second")})
	if edit.OldUniqueID == edit.NewUniqueID {
		t.Fatal("the edit kept the file")
	}
	mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
	d := e.delivered()
	if len(d) != 2 || d[1].Document.File.UniqueID != edit.NewUniqueID {
		t.Fatalf("destination holds %d documents; want the first and the replacement", len(d))
	}
	// Handled again with the same document: layer 1 answers.
	mustHandle(t, p, e.view(c, posted), store.OutcomeDuplicate)
	if n, err := e.st.ReplacedDocuments(e.ctx); err != nil || n != 1 {
		t.Fatalf("replaced documents = %d, %v; want 1", n, err)
	}

	// A replacement with bytes already catalogued is linked, not sent.
	other := e.world.Post(src, 0, tgsim.Post{FileName: "w.tar", Data: archivetest.Tar([]archivetest.File{{Name: "x", Data: []byte("1")}})})
	e.world.EditMessageMedia(src, other.ID, tgsim.Post{FileName: "v1-again.tar", Data: tarOf("a.txt", "first")})
	mustHandle(t, p, e.view(c, other), store.OutcomeDuplicate)
	if n := len(e.delivered()); n != 2 {
		t.Fatalf("delivered %d documents, want still 2", n)
	}
}

// A document an edit replaced while it was on its way to a worker (its
// download finds the file gone) gives way to the new one at once: the new
// document is mirrored, and nothing records the message for the old one,
// whose record would keep the new document's record out. The new
// document's own update may come later, or never.
func TestDocumentReplacedBeforeFetchMirrorsTheNewOne(t *testing.T) {
	t.Parallel()
	e, p, c, seen, edit := replacedAfterSeen(t)

	if out, err := p.Process(e.ctx, seen); err != nil || out != store.OutcomePackage {
		t.Fatalf("process the old view = %q, %v; want the new document catalogued", out, err)
	}
	d := e.delivered()
	if len(d) != 1 || d[0].Document.File.UniqueID != edit.NewUniqueID {
		t.Fatalf("destination holds %d documents; want the new one alone", len(d))
	}
	if counts, err := e.st.DeadLetterCounts(e.ctx); err != nil || counts[store.DeadDeleted] != 0 || counts[store.DeadPending] != 0 {
		t.Fatalf("dead letters = %v, %v; want none", counts, err)
	}
	// The new document's own update finds it handled.
	mustHandle(t, p, e.view(c, seen), store.OutcomeDuplicate)
}

// A part's record kept out by a record of the document an edit replaced,
// written after this handling looked the message up (another worker's
// download of the old document failed, and its dead letter came first),
// is noticed: the message is handled again, the old record retired and
// the new part recorded. Before, the new part was lost for good.
func TestPartKeptOutByTheReplacedDocumentsRecordIsHandledAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	raced := &racedStore{}
	e.wrapStore = func(s ingest.Store) ingest.Store { raced.Store = s; return raced }
	p, c := e.pipeline("a")
	src := e.src["a"]
	posted := e.world.Post(src, 0, tgsim.Post{FileName: "set.part1.rar", Data: []byte("old volume")})
	old := e.view(c, posted)
	edit := e.world.EditMessageMedia(src, posted.ID, tgsim.Post{FileName: "set.part1.rar", Data: []byte("new volume")})
	raced.before = func() {
		if err := p.DeadLetter(e.ctx, old, errors.New("download stalled")); err != nil {
			t.Error(err)
		}
	}

	if out, err := p.Process(e.ctx, e.view(c, posted)); err != nil || out != store.OutcomePartPending {
		t.Fatalf("process the new document = %q, %v; want a part pending", out, err)
	}
	doc, err := e.st.MessageDocument(e.ctx, posted.Key())
	if err != nil || !doc.OK || doc.Outcome != store.OutcomePartPending || doc.UniqueID != edit.NewUniqueID {
		t.Fatalf("record = %+v, %v; want the new document's part pending", doc, err)
	}
	if counts, err := e.st.DeadLetterCounts(e.ctx); err != nil || counts[store.DeadPending] != 0 {
		t.Fatalf("dead letters = %v, %v; want the old document's resolved", counts, err)
	}
}

// A session that did not hear of an edit (another instance's database,
// or a chat it does not follow) answers getMessage with the document the
// edit replaced. Its view, older than the record of the new document
// (edit dates), is known stale at once: no call to Telegram, and the
// record stands. Asking its own session would only get the stale answer
// back, and retire the new document's record for the old one.
func TestStaleViewOfAReplacedDocumentIsNotHandled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	src := e.src["a"]
	posted := e.world.Post(src, 0, tgsim.Post{FileName: "v1.tar", Data: tarOf("a", "v1")})
	mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
	other := e.world.ClientIn("a", "other instance")
	t.Cleanup(func() { _ = other.Close() })
	if err := other.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.view(other, posted)
	edit := e.world.EditMessageMedia(src, posted.ID, tgsim.Post{FileName: "v2.tar", Data: tarOf("a", "v2")})
	mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
	stale := e.view(other, posted)
	if stale.Document.File.UniqueID != edit.OldUniqueID {
		t.Fatalf("the other instance reads %q; want the stale document", stale.Document.FileName)
	}

	calls := e.world.Calls("a")[tg.MethodGetMessage]
	mustHandle(t, p, stale, store.OutcomeDuplicate)
	if n := e.world.Calls("a")[tg.MethodGetMessage] - calls; n != 0 {
		t.Errorf("getMessage called %d times for a stale view; want none", n)
	}
	doc, err := e.st.MessageDocument(e.ctx, posted.Key())
	if err != nil || doc.Outcome != store.OutcomePackage || doc.UniqueID != edit.NewUniqueID || doc.EditDate.IsZero() {
		t.Fatalf("record = %+v, %v; want the new document's, with its edit date", doc, err)
	}
	if n, err := e.st.ReplacedDocuments(e.ctx); err != nil || n != 1 {
		t.Fatalf("replaced documents = %d, %v; want the one edit", n, err)
	}
}

// racedStore runs before once, just ahead of the first part record.
type racedStore struct {
	ingest.Store
	once   sync.Once
	before func()
}

func (s *racedStore) RecordMessage(ctx context.Context, m store.SourceMessage) (bool, error) {
	if m.Outcome == store.OutcomePartPending {
		s.once.Do(s.before)
	}
	return s.Store.RecordMessage(ctx, m)
}

// replacedAfterSeen is an env whose account "a" saw old.tar posted in its
// source, with a's pipeline and session: it returns the message as a saw
// it, and the edit that then replaced its document with new.tar.
func replacedAfterSeen(t *testing.T) (*env, *ingest.Pipeline, *tgsim.Client, tg.Message, tgsim.MediaEdit) {
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	src := e.src["a"]
	posted := e.world.Post(src, 0, tgsim.Post{FileName: "old.tar", Data: tarOf("a", "old")})
	seen := e.view(c, posted)
	edit := e.world.EditMessageMedia(src, posted.ID, tgsim.Post{FileName: "new.tar", Data: tarOf("a", "new")})
	return e, p, c, seen, edit
}

// A source message deleted before its package was downloaded is recorded
// as deleted at source at once: a terminal dead letter, not retried.
func TestDeletedBeforeDownloadIsRecordedNotRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "gone.tar", Data: tarOf("a", "gone")})
	seen := e.view(c, posted)
	e.world.Delete(e.src["a"], posted.ID)

	before := e.world.Calls("a")[tg.MethodGetMessage]
	out, err := p.Process(e.ctx, seen)
	if err != nil || out != store.OutcomeDeadLetter {
		t.Fatalf("process = %q, %v; want a dead letter", out, err)
	}
	deleted, err := e.st.DeadLetters(e.ctx, store.DeadDeleted, 10)
	if err != nil || len(deleted) != 1 || deleted[0].ErrorClass != "deleted_at_source" || !deleted[0].NextAttemptAt.IsZero() {
		t.Fatalf("deleted-at-source letters = %+v, %v; want one, never due", deleted, err)
	}
	if due, err := e.st.DueDeadLetters(e.ctx, "a", e.now.Add(365*24*time.Hour), 10); err != nil || len(due) != 0 {
		t.Fatalf("due letters = %+v, %v; want none", due, err)
	}
	// The operator's "retry all" leaves it alone: its message is gone.
	if n, err := e.st.ScheduleDeadLetters(e.ctx, nil); err != nil || n != 0 {
		t.Fatalf("retry all scheduled %d, %v; want 0", n, err)
	}
	// One attempt tells: not the four attempts a stopped download costs.
	// The 404 is asked once more when the session's view of the chat may
	// lag (this pipeline never opened the source): a too-new message
	// answers 404 too until the chat's difference is in.
	if n := e.world.Calls("a")[tg.MethodGetMessage] - before; n < 1 || n > 2 {
		t.Errorf("getMessage called %d times, want once, or twice with a view not yet current, after the first attempt's download stopped", n)
	}
}

// A pending dead letter whose message is deleted meanwhile ends deleted
// at source on its next retry, not exhausted.
func TestRetryOfDeletedMessageEndsDeletedAtSource(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 1, FailDownloadRate: 1}, "a")
	p, c := e.pipeline("a")
	posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "flaky.tar", Data: tarOf("a", "flaky")})
	if out, err := p.Process(e.ctx, e.view(c, posted)); err != nil || out != store.OutcomeDeadLetter {
		t.Fatalf("process = %q, %v; want a dead letter", out, err)
	}
	if pending, _ := e.st.DeadLetters(e.ctx, store.DeadPending, 10); len(pending) != 1 {
		t.Fatalf("pending letters = %+v; want one", pending)
	}
	e.world.Delete(e.src["a"], posted.ID)
	e.now = e.now.Add(24 * time.Hour)
	r := ingest.NewRetrier(ingest.RetryConfig{}, p, e.st, nil)
	if _, err := r.RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	counts, err := e.st.DeadLetterCounts(e.ctx)
	if err != nil || counts[store.DeadDeleted] != 1 || counts[store.DeadExhausted] != 0 || counts[store.DeadPending] != 0 {
		t.Fatalf("dead letters by state = %v, %v; want one deleted at source", counts, err)
	}
}

// Status counts, per source, the documents edits replaced and the
// messages deleted before their package was fetched.
func TestStatusCountsSourceEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	src := e.src["a"]
	edited := e.world.Post(src, 0, tgsim.Post{FileName: "e1.tar", Data: tarOf("a", "e1")})
	mustHandle(t, p, e.view(c, edited), store.OutcomePackage)
	e.world.EditMessageMedia(src, edited.ID, tgsim.Post{FileName: "e2.tar", Data: tarOf("a", "e2")})
	mustHandle(t, p, e.view(c, edited), store.OutcomePackage)
	gone := e.world.Post(src, 0, tgsim.Post{FileName: "g.tar", Data: tarOf("a", "g")})
	seen := e.view(c, gone)
	e.world.Delete(src, gone.ID)
	if out, err := p.Process(e.ctx, seen); err != nil || out != store.OutcomeDeadLetter {
		t.Fatalf("process = %q, %v", out, err)
	}
	rep, err := e.st.Status(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sources) != 1 || rep.Sources[0].ReplacedDocuments != 1 || rep.Sources[0].DeletedAtSource != 1 ||
		rep.DeadLetters[string(store.DeadDeleted)] != 1 {
		t.Fatalf("status sources = %+v, dead letters %v; want one replaced, one deleted at source", rep.Sources, rep.DeadLetters)
	}
}

// What is recorded about a document an edit replaced never overwrites the
// record of the message's new document: neither a late part_pending nor a
// dead letter of the old one.
func TestOldDocumentRecordsDoNotOverwriteTheNew(t *testing.T) {
	t.Parallel()
	e, p, c, old, _ := replacedAfterSeen(t)
	// The new document is handled first (the content change overtook the
	// old message in the queue), then the old one's download fails.
	mustHandle(t, p, e.view(c, old), store.OutcomePackage)
	if out, err := p.Process(e.ctx, old); err != nil {
		t.Fatalf("process the old document: %q, %v", out, err)
	}
	if out, ok, err := e.st.MessageHandled(e.ctx, old.Key()); err != nil || !ok || out != store.OutcomePackage {
		t.Fatalf("message record = %q, %v, %v; want the new document's package", out, ok, err)
	}
	if counts, err := e.st.DeadLetterCounts(e.ctx); err != nil || len(counts) != 0 {
		t.Fatalf("dead letters = %v, %v; want none", counts, err)
	}
	if n := len(e.delivered()); n != 1 {
		t.Errorf("delivered %d documents, want the new one", n)
	}
}

// deletingSession deletes the message a download is for as it starts, as
// a source admin deleting a post mid-download.
type deletingSession struct {
	*tg.Session
	world *tgsim.World
	msg   tg.MessageKey
}

func (s deletingSession) Download(ctx context.Context, f tg.File, stall time.Duration) (tg.File, error) {
	s.world.Delete(s.msg.Chat, s.msg.Message)
	return s.Session.Download(ctx, f, stall)
}

// A message deleted while its download runs (TDLib stops the download)
// ends deleted at source at once, not retried: a compressed tar, whose
// parts are all downloaded before one read hashes and lists them, as any
// other.
func TestDeletedMidDownloadEndsDeletedAtSource(t *testing.T) {
	t.Parallel()
	for name, data := range map[string][]byte{
		"gone.tar":    tarOf("a", "gone"),
		"gone.tar.gz": archivetest.TarGz([]archivetest.File{{Name: "a", Data: []byte("gone")}}),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnvWorld(t, tgsim.Config{Seed: 1, FailDownloadRate: 1}, "a")
			posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name, Data: data})
			p, c, _ := e.pipelineWith("a", nil, func(s *tg.Session) ingest.Telegram {
				return deletingSession{s, e.world, posted.Key()}
			})
			if out, err := p.Process(e.ctx, e.view(c, posted)); err != nil || out != store.OutcomeDeadLetter {
				t.Fatalf("process = %q, %v; want a dead letter", out, err)
			}
			counts, err := e.st.DeadLetterCounts(e.ctx)
			if err != nil || counts[store.DeadDeleted] != 1 || counts[store.DeadPending] != 0 {
				t.Fatalf("dead letters by state = %v, %v; want one deleted at source, none pending", counts, err)
			}
		})
	}
}

// A set part whose document an edit replaced, the edit's update lost, is
// not completed as the new document under the part's old record (which
// kept the new record out: a set "completed" at every sweep, its parts
// never recorded, one getMessage each time). The part's record is retired
// and the new document handled; a volume uploaded again rejoins its set,
// which completes at the next sweep.
func TestSetPartReplacedUnheardRejoinsItsSet(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	src := e.src["a"]
	vols := archivetest.RarVolumes([]archivetest.File{{Name: "set/data.bin", Data: []byte(strings.Repeat("s", 9000))}}, 2)
	one := e.world.Post(src, 0, tgsim.Post{FileName: "s.part1.rar", Data: vols[0]})
	two := e.world.Post(src, 0, tgsim.Post{FileName: "s.part2.rar", Data: vols[1]})
	mustHandle(t, p, e.view(c, one), store.OutcomePartPending)
	mustHandle(t, p, e.view(c, two), store.OutcomePartPending)
	edit := e.world.EditMessageMedia(src, one.ID, tgsim.Post{FileName: "s.part1.rar", Data: vols[0]})

	// A restart: the new session knows the parts by their records only.
	p2, _ := e.pipeline("a")
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p2.Sweep(e.ctx); err != nil || res.Completed != 0 || res.Failed != 1 {
		t.Fatalf("first sweep = %+v, %v; want the set put off by its replaced part", res, err)
	}
	doc, err := e.st.MessageDocument(e.ctx, one.Key())
	if err != nil || doc.Outcome != store.OutcomePartPending || doc.UniqueID != edit.NewUniqueID {
		t.Fatalf("part record = %+v, %v; want the new document's, pending", doc, err)
	}
	if res, err := p2.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("second sweep = %+v, %v; want the set completed", res, err)
	}
	for _, m := range []tg.Message{one, two} {
		if out, ok, err := e.st.MessageHandled(e.ctx, m.Key()); err != nil || !ok || out != store.OutcomePackage {
			t.Errorf("%s = %q, %v, %v; want recorded with the package", m.Key(), out, ok, err)
		}
	}
	if d := e.delivered(); len(d) != 2 || d[0].Document.File.UniqueID != edit.NewUniqueID {
		t.Errorf("delivered %d documents; want the set with the new first volume", len(d))
	}
}

// A delivery handed to another account loads its parts through that
// account's session. The session answers from its own database: in a
// chat it does not follow, a message it read before an edit is still the
// old document there. The part is not taken as replaced on that answer
// (the package would never be delivered): the chat is opened, its
// difference fetched, and the message read again.
func TestHandedDeliveryLoadsAPartTheSessionHoldsStale(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a", "b")
	deliverHandedStalePart(t, e, func(cb *tgsim.Client, posted tg.Message, edit tgsim.MediaEdit) {
		if stale := e.view(cb, posted); stale.Document.File.UniqueID != edit.OldUniqueID {
			t.Fatalf("b reads %q; want its stale copy", stale.Document.FileName)
		}
	})
}

// deliverHandedStalePart posts a document in a's source, lets b's session
// read it, and replaces it; then checks (edited, when set, with b's
// client) that a's package of the new document, handed to b, reaches the
// destination through b as the new document, and only that.
func deliverHandedStalePart(t *testing.T, e *env, edited func(cb *tgsim.Client, posted tg.Message, edit tgsim.MediaEdit)) {
	t.Helper()
	pa, ca := e.pipeline("a")
	pb, cb := e.pipeline("b")
	src := e.src["a"]
	e.world.Join("b", src)
	if err := cb.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	posted := e.world.Post(src, 0, tgsim.Post{FileName: "v1.tar", Data: tarOf("a", "v1")})
	e.view(cb, posted) // b's database holds v1
	edit := e.world.EditMessageMedia(src, posted.ID, tgsim.Post{FileName: "v2.tar", Data: tarOf("a", "v2")})
	if edited != nil {
		edited(cb, posted, edit)
	}

	// a catalogues v2; its delivery is handed to b (a lost write access).
	mustHandle(t, pa, e.view(ca, posted), store.OutcomePackage)
	pkg, ok, err := e.st.PackageByUniqueIDs(e.ctx, []string{edit.NewUniqueID})
	if err != nil || !ok {
		t.Fatalf("package of v2: %v, %v", ok, err)
	}
	if err := e.st.WaitDelivery(e.ctx, store.Waiting{PackageID: pkg, Destination: e.dest, Account: "b",
		Route: ingest.HandOverRoute, OpensAt: e.now, Parts: []tg.MessageKey{posted.Key()}, PartCount: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, pb, e.st, nil).RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	var sent []string
	for _, m := range e.world.Messages(e.dest) {
		if m.Document != nil {
			sent = append(sent, m.Document.File.UniqueID)
		}
	}
	if len(sent) != 1 || sent[0] != edit.NewUniqueID {
		t.Fatalf("destination holds %v; want v2 (%s), sent by b", sent, edit.NewUniqueID)
	}
}
