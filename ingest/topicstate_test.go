package ingest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/route"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// topicEnv is a source forum with a topic and a destination forum that
// receives its packages into the topic of the same name.
type topicEnv struct {
	*env
	forum, dest tg.ChatID
	topic       int64
	routes      *route.Table
	n           int
}

func newTopicEnv(t *testing.T, topicName string) *topicEnv {
	e := newEnv(t, "a")
	te := &topicEnv{env: e}
	te.forum = e.world.AddChat(tg.KindForum, "forum", "a")
	if err := e.st.EnsureSource(e.ctx, store.Source{ChatID: te.forum, Account: "a", Kind: tg.KindForum}); err != nil {
		t.Fatal(err)
	}
	te.topic = e.world.AddTopic(te.forum, topicName)
	te.dest = e.world.AddChat(tg.KindForum, "mirror forum", "a")
	te.routes = route.NewTable(nil, []route.Route{{
		Sources: []route.Source{{Chat: te.forum}}, Destinations: []tg.ChatID{te.dest}, Topics: []route.Topic{{Same: true}},
	}})
	return te
}

// post publishes a new package in the source topic and has p ingest it.
func (te *topicEnv) post(p *ingest.Pipeline, c *tgsim.Client) string {
	te.t.Helper()
	te.n++
	name := strings.Repeat("x", te.n) + ".tar"
	m := te.world.Post(te.forum, te.topic, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})})
	mustHandle(te.t.(*testing.T), p, te.view(c, m), store.OutcomePackage)
	return name
}

// docs returns the documents of the destination by file name, with their
// topic.
func (te *topicEnv) docs() map[string]int64 {
	out := map[string]int64{}
	for _, m := range te.world.Messages(te.dest) {
		if m.Document != nil {
			out[m.Document.FileName] = m.TopicID()
		}
	}
	return out
}

func (te *topicEnv) threadNamed(name string) int64 {
	for id, n := range te.world.Topics(te.dest) {
		if n == name {
			return id
		}
	}
	return 0
}

// A destination topic deleted after stashd created it is forgotten and
// created again, and the package lands there (not dead-lettered, not
// given up).
func TestDeletedDestinationTopicIsCreatedAgain(t *testing.T) {
	t.Parallel()
	te := newTopicEnv(t, "Dragons")
	p, c, _ := te.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = te.routes }, nil)
	first := te.post(p, c)
	te.deliver()
	old := te.threadNamed("Dragons")
	if old == 0 || te.docs()[first] != old {
		t.Fatalf("first package in topic %d, want the Dragons topic %d", te.docs()[first], old)
	}
	te.world.DeleteTopic(te.dest, old)

	second := te.post(p, c)
	res, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, te.st, nil).RunOnce(te.ctx)
	if err != nil || res.Delivered != 1 {
		t.Fatalf("delivery after the topic was deleted = %+v, %v; want it delivered", res, err)
	}
	fresh := te.threadNamed("Dragons")
	if fresh == 0 || fresh == old {
		t.Fatalf("the Dragons topic is %d after deleting %d, want a new one", fresh, old)
	}
	if got := te.docs()[second]; got != fresh {
		t.Errorf("second package in topic %d, want the new Dragons topic %d", got, fresh)
	}
	if thread, _, err := te.st.DestinationTopic(te.ctx, te.dest, "Dragons"); err != nil || thread != fresh {
		t.Errorf("the store records topic %d (%v), want %d", thread, err, fresh)
	}
	if n := te.world.Calls("a")[tg.MethodCreateForumTopic]; n != 2 {
		t.Errorf("createForumTopic called %d times, want 2", n)
	}
}

// deletingCreator is an account's session whose first `deletions` topic
// creations in dest are each followed at once by an administrator deleting
// the new topic.
type deletingCreator struct {
	*tg.Session
	world     *tgsim.World
	dest      tg.ChatID
	deletions int
}

func (s *deletingCreator) CreateForumTopic(ctx context.Context, chat tg.ChatID, name string) (int64, error) {
	thread, err := s.Session.CreateForumTopic(ctx, chat, name)
	if err == nil && chat == s.dest && s.deletions > 0 {
		s.deletions--
		s.world.DeleteTopic(chat, thread)
	}
	return thread, err
}

// A destination topic deleted again right after stashd created it anew
// leaves the delivery queued, not given up: its next attempt creates the
// topic once more and the package lands there.
func TestDestinationTopicDeletedAgainKeepsItsDelivery(t *testing.T) {
	t.Parallel()
	te := newTopicEnv(t, "Dragons")
	p, c, _ := te.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = te.routes }, func(s *tg.Session) ingest.Telegram {
		// The topic's first creation and its creation again after the
		// refused send are both deleted at once.
		return &deletingCreator{Session: s, world: te.world, dest: te.dest, deletions: 2}
	})
	name := te.post(p, c)
	d := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, te.st, nil)
	res, err := d.RunOnce(te.ctx)
	if err != nil || res.Failed != 0 || res.Delivered != 0 {
		t.Fatalf("delivery into a topic deleted twice = %+v, %v; want it put off, not failed", res, err)
	}
	if n, err := te.st.QueuedDeliveries(te.ctx, ""); err != nil || n != 1 {
		t.Fatalf("%d deliveries queued (%v), want the one put off", n, err)
	}
	te.now = te.now.Add(time.Hour)
	if res, err = d.RunOnce(te.ctx); err != nil || res.Delivered != 1 {
		t.Fatalf("delivery once the topic stays = %+v, %v; want it delivered", res, err)
	}
	if thread := te.threadNamed("Dragons"); thread == 0 || te.docs()[name] != thread {
		t.Errorf("package in topic %d, want the Dragons topic %d", te.docs()[name], thread)
	}
	if n := te.world.Calls("a")[tg.MethodCreateForumTopic]; n != 3 {
		t.Errorf("createForumTopic called %d times, want 3", n)
	}
}

// closingReopener is an account's session whose first `closings`
// reopenings of a topic in dest are each undone at once by an
// administrator closing the topic again.
type closingReopener struct {
	*tg.Session
	world    *tgsim.World
	dest     tg.ChatID
	closings int
}

func (s *closingReopener) ToggleForumTopicIsClosed(ctx context.Context, chat tg.ChatID, thread int64, closed bool) error {
	err := s.Session.ToggleForumTopicIsClosed(ctx, chat, thread, closed)
	if err == nil && chat == s.dest && !closed && s.closings > 0 {
		s.closings--
		s.world.CloseTopic(chat, thread, true)
	}
	return err
}

// A destination topic closed again right after stashd reopened it leaves
// the delivery queued, not given up: its next attempt reopens the topic
// once more and the package lands there.
func TestDestinationTopicClosedAgainKeepsItsDelivery(t *testing.T) {
	t.Parallel()
	te := newTopicEnv(t, "Dragons")
	p, c, _ := te.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = te.routes }, func(s *tg.Session) ingest.Telegram {
		return &closingReopener{Session: s, world: te.world, dest: te.dest, closings: 1}
	})
	te.post(p, c)
	te.deliver()
	thread := te.threadNamed("Dragons")
	te.world.CloseTopic(te.dest, thread, true)

	name := te.post(p, c)
	d := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, te.st, nil)
	res, err := d.RunOnce(te.ctx)
	if err != nil || res.Failed != 0 || res.Delivered != 0 {
		t.Fatalf("delivery into a topic closed again = %+v, %v; want it put off, not failed", res, err)
	}
	te.now = te.now.Add(time.Hour)
	if res, err = d.RunOnce(te.ctx); err != nil || res.Delivered != 1 {
		t.Fatalf("delivery once the topic stays open = %+v, %v; want it delivered", res, err)
	}
	if got := te.docs()[name]; got != thread {
		t.Errorf("package in topic %d, want %d", got, thread)
	}
}

// A closed destination topic the account created is reopened
// (toggleForumTopicIsClosed) and the package lands in it.
func TestClosedDestinationTopicIsReopened(t *testing.T) {
	t.Parallel()
	te := newTopicEnv(t, "Dragons")
	p, c, _ := te.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = te.routes }, nil)
	te.post(p, c)
	te.deliver()
	thread := te.threadNamed("Dragons")
	te.world.CloseTopic(te.dest, thread, true)

	second := te.post(p, c)
	res, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, te.st, nil).RunOnce(te.ctx)
	if err != nil || res.Delivered != 1 {
		t.Fatalf("delivery into the closed topic = %+v, %v; want it delivered", res, err)
	}
	if te.world.TopicClosed(te.dest, thread) {
		t.Error("the topic is still closed")
	}
	if got := te.docs()[second]; got != thread {
		t.Errorf("package in topic %d, want %d", got, thread)
	}
}

// A closed destination topic the account may not reopen holds its
// deliveries (put off with the reason, never given up); when an
// administrator reopens it, the updateForumTopicInfo the account receives
// resumes them.
func TestClosedDestinationTopicWaitsForItsReopening(t *testing.T) {
	t.Parallel()
	te := newTopicEnv(t, "Dragons")
	// Someone else created the destination topic: the account may not
	// reopen it.
	thread := te.world.AddTopic(te.dest, "Dragons")
	if _, err := te.st.SetDestinationTopic(te.ctx, te.dest, "Dragons", thread, "someone"); err != nil {
		t.Fatal(err)
	}
	te.world.CloseTopic(te.dest, thread, true)
	p, c, _ := te.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = te.routes }, nil)
	name := te.post(p, c)
	d := ingest.NewDeliverer(ingest.DeliveryConfig{RetryDelay: time.Hour}, p, te.st, nil)
	res, err := d.RunOnce(te.ctx)
	if err != nil || res.Deferred != 1 || res.Failed != 0 {
		t.Fatalf("delivery into a closed topic = %+v, %v; want it put off", res, err)
	}
	queued, err := te.st.AllWaiting(te.ctx, "a")
	if err != nil || len(queued) != 1 || !strings.Contains(queued[0].LastError, tg.ErrTopicClosed.Error()) {
		t.Fatalf("queued deliveries = %+v, %v; want one put off because the topic is closed", queued, err)
	}
	if got := te.world.FailedMessages("a"); got != 0 {
		t.Errorf("%d failed local messages left in the session, want 0", got)
	}

	// The pipeline opened the destination, so that its reopening reaches
	// the session as updateForumTopicInfo (the listener then resumes the
	// delivery: ResumeDeliveries).
	if n := te.world.Calls("a")[tg.MethodOpenChat]; n == 0 {
		t.Fatal("the destination was not opened: its reopening would never be seen")
	}
	te.world.CloseTopic(te.dest, thread, false)
	if n, err := te.st.ResumeDeliveries(te.ctx, te.dest, tg.ErrTopicClosed.Error(), te.now); err != nil || n != 1 {
		t.Fatalf("resumed %d deliveries (%v), want 1", n, err)
	}
	if res, err := d.RunOnce(te.ctx); err != nil || res.Delivered != 1 {
		t.Fatalf("delivery after the reopening = %+v, %v; want it delivered", res, err)
	}
	if got := te.docs()[name]; got != thread {
		t.Errorf("package in topic %d, want %d", got, thread)
	}
}

// A source topic whose name TDLib would clean (spaces folded, longer than
// 128 characters) is found again by its cleaned name after a creator died
// between createForumTopic and recording the topic: no second topic.
func TestTopicRecoveryComparesCleanedNames(t *testing.T) {
	t.Parallel()
	raw := "Dragons  of\u2003the\n\nNorth " + strings.Repeat("é", 130)
	te := newTopicEnv(t, raw)
	c := te.world.Client("a")
	t.Cleanup(func() { _ = c.Close() })
	if err := c.LoadChats(te.ctx); err != nil {
		t.Fatal(err)
	}
	ctx, kill := context.WithCancel(te.ctx)
	defer kill()
	p := ingest.NewPipeline(ingest.Config{Account: "a", Routes: te.routes, Attempts: 1, Now: func() time.Time { return te.now }},
		te.st, topicCrashSession{tg.NewSession(c, func(tg.Update) {}), kill}, nil)
	posted := te.world.Post(te.forum, te.topic, tgsim.Post{FileName: "d.tar", Data: archivetest.Tar([]archivetest.File{{Name: "d", Data: []byte("d")}})})
	mustHandle(t, p, te.view(c, posted), store.OutcomePackage)
	if _, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, te.st, nil).RunOnce(ctx); err == nil {
		t.Fatal("the delivery survived its crash")
	}
	p2, c2, _ := te.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = te.routes }, nil)
	mustHandle(t, p2, te.view(c2, posted), store.OutcomeDuplicate)
	te.deliver()

	if n := te.world.Calls("a")[tg.MethodCreateForumTopic]; n != 1 {
		t.Errorf("createForumTopic called %d times, want 1", n)
	}
	topics := te.world.Topics(te.dest)
	if len(topics) != 1 {
		t.Fatalf("destination topics %v, want one", topics)
	}
	for thread, name := range topics {
		if name != tg.CleanTopicName(raw) {
			t.Errorf("the topic is named %q, want the cleaned name", name)
		}
		if got := te.docs()["d.tar"]; got != thread {
			t.Errorf("the package is in topic %d, want %d", got, thread)
		}
	}
}
