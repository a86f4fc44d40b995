package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/route"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// A route with topic "same" delivers each package into the destination
// forum's topic named like its source topic: the topic is created once
// (createForumTopic), whatever the number of workers, accounts and
// restarts delivering into it at once, and reused after; a package from
// outside any topic goes to the General topic. A fixed topic takes every
// package of its route.
func TestSameTopicIsCreatedOnceAndReused(t *testing.T) {
	t.Parallel()
	// Every request takes a while, so the four first deliveries below meet
	// at createForumTopic.
	e := newEnvWorld(t, tgsim.Config{Seed: 1, Latency: 30 * time.Millisecond}, "a", "b")
	forum := e.world.AddChat(tg.KindForum, "forum", "a", "b")
	if err := e.st.EnsureSource(e.ctx, store.Source{ChatID: forum, Account: "a", Kind: tg.KindForum}); err != nil {
		t.Fatal(err)
	}
	dragons := e.world.AddTopic(forum, "Dragons")
	cats := e.world.AddTopic(forum, "Cats")
	same := e.world.AddChat(tg.KindForum, "same", "a", "b")
	fixedForum := e.world.AddChat(tg.KindForum, "fixed", "a", "b")
	fixed := e.world.AddTopic(fixedForum, "Everything")
	tbl := route.NewTable(nil, []route.Route{{
		Sources: []route.Source{{Chat: forum}}, Destinations: []tg.ChatID{same, fixedForum},
		Topics: []route.Topic{{Same: true}, {Thread: fixed}},
	}})
	pipeline := func(account string) (*ingest.Pipeline, *tgsim.Client) {
		p, c, _ := e.pipelineWith(account, func(cfg *ingest.Config) { cfg.Routes = tbl }, nil)
		return p, c
	}
	post := func(thread int64, name string) tg.Message {
		return e.world.Post(forum, thread, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})})
	}
	topicOf := map[string]string{} // file name -> source topic ("" for General)

	// Four pipelines of two accounts ingest Dragons packages at once, then
	// their delivery stages deliver them at once.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	var four []*ingest.Pipeline
	for i, account := range []string{"a", "b", "a", "b"} {
		p, c := pipeline(account)
		four = append(four, p)
		name := fmt.Sprintf("dragon%d.tar", i)
		topicOf[name] = "Dragons"
		m := e.view(c, post(dragons, name))
		wg.Go(func() {
			if _, err := p.Handle(e.ctx, m); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	stageErrs := make(chan error, 4)
	for _, p := range four {
		wg.Go(func() {
			if _, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil).RunOnce(e.ctx); err != nil {
				stageErrs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	close(stageErrs)
	for err := range errs {
		t.Fatal(err)
	}
	for err := range stageErrs {
		t.Fatal(err)
	}
	p, c := pipeline("a")
	topicOf["cat.tar"], topicOf["general.tar"] = "Cats", ""
	mustHandle(t, p, e.view(c, post(cats, "cat.tar")), store.OutcomePackage)
	mustHandle(t, p, e.view(c, post(0, "general.tar")), store.OutcomePackage)
	// A restart (a new session of b, nothing cached) reuses the stored topic.
	p, c = pipeline("b")
	topicOf["late-dragon.tar"] = "Dragons"
	mustHandle(t, p, e.view(c, post(dragons, "late-dragon.tar")), store.OutcomePackage)
	e.deliver()

	created := e.world.Calls("a")[tg.MethodCreateForumTopic] + e.world.Calls("b")[tg.MethodCreateForumTopic]
	if created != 2 {
		t.Errorf("createForumTopic called %d times, want 2 (Dragons and Cats, once each)", created)
	}
	names := map[string]int64{}
	for thread, name := range e.world.Topics(same) {
		if _, dup := names[name]; dup {
			t.Errorf("the destination forum has two topics named %q", name)
		}
		names[name] = thread
	}
	if len(names) != 2 || names["Dragons"] == 0 || names["Cats"] == 0 {
		t.Errorf("the destination forum's topics are %v, want Dragons and Cats", e.world.Topics(same))
	}
	n := 0
	for _, m := range e.world.Messages(same) {
		if m.Document == nil {
			continue
		}
		n++
		want, ok := topicOf[m.Document.FileName]
		if !ok {
			t.Errorf("unexpected document %s", m.Document.FileName)
			continue
		}
		if got := m.TopicID(); got != names[want] {
			t.Errorf("%s is in topic %d of the destination, want %d (%q)", m.Document.FileName, got, names[want], want)
		}
	}
	if n != len(topicOf) {
		t.Errorf("the destination forum holds %d documents, want %d", n, len(topicOf))
	}
	n = 0
	for _, m := range e.world.Messages(fixedForum) {
		if m.Document != nil {
			n++
			if m.TopicID() != fixed {
				t.Errorf("%s is in topic %d of the fixed destination, want %d", m.Document.FileName, m.TopicID(), fixed)
			}
		}
	}
	if n != len(topicOf) {
		t.Errorf("the fixed destination holds %d documents, want %d", n, len(topicOf))
	}
}

// Topic "same" toward a chat that turned out not to be a forum fails the
// delivery with TDLib's 400, a permanent error (a dead letter with its
// reason), instead of sending outside any topic.
func TestSameTopicOnAChannelFailsPermanently(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	forum, dragons := sourceForum(t, e)
	tbl := route.NewTable(nil, []route.Route{{
		Sources: []route.Source{{Chat: forum}}, Destinations: []tg.ChatID{e.dest}, Topics: []route.Topic{{Same: true}},
	}})
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = tbl; cfg.Attempts = 1 }, nil)
	m := e.view(c, e.world.Post(forum, dragons, tgsim.Post{FileName: "d.tar", Data: archivetest.Tar([]archivetest.File{{Name: "d", Data: []byte("d")}})}))
	mustHandle(t, p, m, store.OutcomePackage)
	// The delivery is given up for good, not deferred.
	if res, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil).RunOnce(e.ctx); err != nil || res.Failed != 1 || res.Deferred != 0 {
		t.Fatalf("delivery = %+v, %v; want it failed for good", res, err)
	}
	if n := len(e.delivered()); n != 0 {
		t.Errorf("%d documents sent outside any topic", n)
	}
}

// topicCrashSession creates forum topics, then dies before the answer is
// used, as a daemon killed between createForumTopic and recording its
// topic would.
type topicCrashSession struct {
	*tg.Session
	kill context.CancelFunc
}

func (s topicCrashSession) CreateForumTopic(ctx context.Context, chat tg.ChatID, name string) (int64, error) {
	if _, err := s.Session.CreateForumTopic(ctx, chat, name); err != nil {
		return 0, err
	}
	s.kill()
	return 0, errors.New("process killed")
}

// A creator that died between createForumTopic and recording the topic
// leaves its creation marked as begun; the next one finds the topic by
// name (getForumTopics) instead of creating a second.
func TestTopicCreatedBeforeACrashIsFoundNotCreatedAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	forum, dragons := sourceForum(t, e)
	dest := e.world.AddChat(tg.KindForum, "mirror forum", "a")
	e.world.AddTopic(dest, "Dragons and more") // a name the search also finds
	tbl := route.NewTable(nil, []route.Route{{
		Sources: []route.Source{{Chat: forum}}, Destinations: []tg.ChatID{dest}, Topics: []route.Topic{{Same: true}},
	}})
	posted := e.world.Post(forum, dragons, tgsim.Post{FileName: "d.tar", Data: archivetest.Tar([]archivetest.File{{Name: "d", Data: []byte("d")}})})

	c := e.world.Client("a")
	t.Cleanup(func() { _ = c.Close() })
	if err := c.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	ctx, kill := context.WithCancel(e.ctx)
	defer kill()
	p := ingest.NewPipeline(ingest.Config{Account: "a", Routes: tbl, Attempts: 1, Now: func() time.Time { return e.now }},
		e.st, topicCrashSession{tg.NewSession(c, func(tg.Update) {}), kill}, nil)
	mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
	if _, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil).RunOnce(ctx); err == nil {
		t.Fatal("the delivery survived its crash")
	}
	p2, c2, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = tbl }, nil)
	mustHandle(t, p2, e.view(c2, posted), store.OutcomeDuplicate)
	e.deliver()

	if n := e.world.Calls("a")[tg.MethodCreateForumTopic]; n != 1 {
		t.Errorf("createForumTopic called %d times, want 1", n)
	}
	var thread int64
	switch threads := topicsNamed(e, dest, "Dragons"); len(threads) {
	case 0:
	case 1:
		thread = threads[0]
	default:
		t.Errorf("%d topics named Dragons in the destination", len(threads))
	}
	docs := 0
	for _, m := range e.world.Messages(dest) {
		if m.Document != nil {
			docs++
			if m.TopicID() != thread || thread == 0 {
				t.Errorf("the package is in topic %d, want the Dragons topic %d", m.TopicID(), thread)
			}
		}
	}
	if docs != 1 {
		t.Errorf("the destination holds %d documents, want 1", docs)
	}
}

// Account a meets a FLOOD_WAIT on createForumTopic while it holds the
// destination topic's creation lock, and account b, whose budget and
// limiter are its own, has a delivery into the same topic: a does not sit
// the wait out under the lock (its delivery is put off by it), so b's
// delivery goes out while a is paused. A 429 pauses only its account.
func TestFloodWaitUnderTheTopicLockPausesOnlyItsAccount(t *testing.T) {
	t.Parallel()
	e := newEnvWorld(t, tgsim.Config{Seed: 1}, "a", "b")
	forum := e.world.AddChat(tg.KindForum, "forum", "a", "b")
	for _, acc := range []string{"a", "b"} {
		if err := e.st.EnsureSource(e.ctx, store.Source{ChatID: forum, Account: acc, Kind: tg.KindForum}); err != nil {
			t.Fatal(err)
		}
	}
	dragons := e.world.AddTopic(forum, "Dragons")
	same := e.world.AddChat(tg.KindForum, "same", "a", "b")
	tbl := route.NewTable(nil, []route.Route{{
		Sources: []route.Source{{Chat: forum}}, Destinations: []tg.ChatID{same}, Topics: []route.Topic{{Same: true}},
	}})
	pipeline := func(account string, paced bool) (*ingest.Pipeline, *tgsim.Client) {
		c := e.world.Client(account)
		t.Cleanup(func() { _ = c.Close() })
		var cl tg.Client = c
		if paced {
			cl = tg.NewPaced(c, tg.PacedConfig{Account: account, Rate: 1000, Burst: 1000}, nil)
		}
		sess := tg.NewSession(cl, func(tg.Update) {})
		if err := sess.LoadChats(e.ctx); err != nil {
			t.Fatal(err)
		}
		cfg := ingest.Config{Account: account, Routes: tbl, SetSettle: time.Minute, SetMaxWait: time.Hour,
			RetryBase: time.Millisecond, Now: func() time.Time { return e.now }}
		return ingest.NewPipeline(cfg, e.st, sess, nil), c
	}
	pa, ca := pipeline("a", true)
	pb, cb := pipeline("b", false)
	post := func(name string) tg.Message {
		return e.world.Post(forum, dragons, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})})
	}
	mustHandle(t, pa, e.view(ca, post("one.tar")), store.OutcomePackage)
	mustHandle(t, pb, e.view(cb, post("two.tar")), store.OutcomePackage)

	const wait = 30 * time.Second
	e.world.InjectFloodWait("a", tg.MethodCreateForumTopic, wait, 1)
	aDone := make(chan error, 1)
	go func() {
		_, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, pa, e.st, nil).RunOnce(e.ctx)
		aDone <- err
	}()
	for e.world.Calls("a")[tg.MethodCreateForumTopic] == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	res, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, pb, e.st, nil).RunOnce(e.ctx)
	took := time.Since(start)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("account b's delivery stage: %+v in %s", res, took.Round(time.Millisecond))
	if res.Delivered != 1 {
		t.Errorf("account b delivered %d packages, want 1", res.Delivered)
	}
	if took >= wait {
		t.Fatalf("account b's delivery stage was blocked %s by account a's FLOOD_WAIT (%s), which a sat out holding the topic lock %q",
			took.Round(time.Millisecond), wait, store.DestinationTopicLock(same, "Dragons"))
	}
	// a's creation was refused, so it left no mark of a creation begun:
	// b created the topic without looking for one first.
	if n := e.world.Calls("b")[tg.MethodGetForumTopics]; n != 0 {
		t.Errorf("account b looked for the topic %d time(s) after a's refused creation", n)
	}
}

// An account removed from a destination forum is refused there before
// any send when the delivery first finds its topic: createForumTopic
// (topic "same") answers 400 "Can't access the chat". That refusal is the
// destination's, as a send's "Have no write access to the chat" is: the
// delivery is handed to another account that may write there, or, with
// none, held for write access, never given up. The same refusal from the
// source, reading its topic's name, is the source's: nothing is handed
// over or held for the destination.
func TestTopicStepRefusedByTheDestinationHoldsOrHandsOver(t *testing.T) {
	for _, c := range []struct {
		name       string
		other      bool // another account may take the delivery
		sourceLost bool // the source refuses instead
		noRights   bool // a member without the right to post (or to create a topic)
	}{
		{"no other account: held", false, false, false},
		{"another account: handed over", true, false, false},
		{"no right to create the topic: handed over", true, false, true},
		{"the source refuses: handed to one that reads it", true, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, "a")
			forum, dragons := sourceForum(t, e)
			mirror := e.world.AddChat(tg.KindForum, "mirror", "a")
			tbl := route.NewTable(nil, []route.Route{{Sources: []route.Source{{Chat: forum}}, Destinations: []tg.ChatID{mirror},
				Topics: []route.Topic{{Same: true}}}})
			var asked []bool
			p, cl, _ := e.pipelineWith("a", func(cfg *ingest.Config) {
				cfg.Routes = tbl
				cfg.HandOver = func(src, dest tg.ChatID, refused bool) (string, bool) {
					asked = append(asked, refused)
					return "b", c.other
				}
			}, nil)
			m := e.view(cl, e.world.Post(forum, dragons, tgsim.Post{FileName: "d.tar", Data: archivetest.Tar([]archivetest.File{{Name: "d", Data: []byte("d")}})}))
			mustHandle(t, p, m, store.OutcomePackage)
			if c.sourceLost {
				// The topic's name is read from the source at the delivery.
				if _, err := e.st.Pool().Exec(e.ctx, `DELETE FROM topics`); err != nil {
					t.Fatal(err)
				}
				e.world.LoseAccess(forum, true)
			} else if c.noRights {
				e.world.SetWriteAccess("a", mirror, false)
			} else {
				e.world.LoseAccess(mirror, true)
			}
			res, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil).RunOnce(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			var account, lastError string
			queued := e.st.Pool().QueryRow(e.ctx, `SELECT account, coalesce(last_error, '') FROM waiting_deliveries`).Scan(&account, &lastError) == nil
			switch {
			case c.sourceLost:
				if !queued || account != "b" || res.Failed != 0 || res.Held != 0 || !slices.Equal(asked, []bool{false}) {
					t.Errorf("the source's refusal of its topic's name: %+v, queued %v for %q, hand-over asked %v; want it handed, as unreadable, to b", res, queued, account, asked)
				}
			case c.other:
				if !queued || account != "b" || res.Failed != 0 || !slices.Equal(asked, []bool{true}) {
					t.Errorf("destination refused at its topic: %+v, queued %v for %q, hand-over asked %v; want it handed to b", res, queued, account, asked)
				}
			default:
				if !queued || account != "a" || res.Failed != 0 || res.Held != 1 || !strings.Contains(lastError, tg.ErrNoWriteAccess.Error()) {
					t.Errorf("destination refused at its topic: %+v, queued %v for %q (%q); want it held for write access, not given up", res, queued, account, lastError)
				}
			}
		})
	}
}

// A delivery handed to this account whose source it cannot read, while no
// running account can take it, waits (the account that handed it over may
// be stopped), at most unreadableTries attempts; then it is given up, the
// source lost for every account.
func TestHandedDeliveryOfAnUnreadableSourceIsGivenUpInTheEnd(t *testing.T) {
	for _, c := range []struct {
		attempts int
		givenUp  bool
	}{{0, false}, {11, false}, {12, true}} {
		t.Run(strconv.Itoa(c.attempts), func(t *testing.T) {
			e := newEnv(t, "a")
			ingester, cl, _ := e.pipelineWith("a", nil, nil)
			src := e.src["a"]
			m := e.view(cl, e.world.Post(src, 0, tgsim.Post{FileName: "d.tar", Data: archivetest.Tar([]archivetest.File{{Name: "d", Data: []byte("d")}})}))
			mustHandle(t, ingester, m, store.OutcomePackage)
			// Delivered by another run of the account, which loads the
			// part from the source.
			p, _, _ := e.pipelineWith("a", func(cfg *ingest.Config) {
				cfg.HandOver = func(src, dest tg.ChatID, refused bool) (string, bool) { return "", false }
			}, nil)
			if _, err := e.st.Pool().Exec(e.ctx, `UPDATE waiting_deliveries SET route = $1, attempts = $2`, ingest.HandOverRoute, c.attempts); err != nil {
				t.Fatal(err)
			}
			e.world.SetPrivate(src, true)
			res, err := ingest.NewDeliverer(ingest.DeliveryConfig{}, p, e.st, nil).RunOnce(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			var queued int
			if err := e.st.Pool().QueryRow(e.ctx, `SELECT count(*) FROM waiting_deliveries`).Scan(&queued); err != nil {
				t.Fatal(err)
			}
			if c.givenUp && (res.Failed != 1 || queued != 0) || !c.givenUp && (res.Deferred != 1 || queued != 1) {
				t.Errorf("after %d attempts: %+v, %d queued; want given up %v", c.attempts, res, queued, c.givenUp)
			}
		})
	}
}

// A catalogue that rewound (a restore, an asynchronous failover) forgets
// the destination topics created since, and the mark a creation leaves
// before createForumTopic with them. The reconciliation that follows
// records the copies sent into such a topic; the next package for it must
// go into that topic, found by name, not into a second topic of the same
// name.
func TestTopicTheRewoundCatalogueForgotIsFoundNotCreatedAgain(t *testing.T) {
	t.Parallel()
	e, dest := deliveredAcrossARewind(t, nil)
	checkAllInOneTopic(t, e, dest)
}

// In a busy destination forum more than a page of getForumTopics (100)
// topics match the name looked for, and all of them were active after the
// topic stashd created and the rewound catalogue forgot: the lookup pages
// on through the server's order until it meets that topic, and the next
// package goes into it rather than into a second topic of the same name.
func TestTopicBeyondTheFirstPageOfTheLookupIsFoundNotCreatedAgain(t *testing.T) {
	t.Parallel()
	e, dest := deliveredAcrossARewind(t, func(e *env, dest tg.ChatID) {
		// 150 topics the search for "Dragons" finds too, each newer than
		// the Dragons topic, one of them active again since.
		var others []int64
		for i := range 150 {
			others = append(others, e.world.AddTopic(dest, fmt.Sprintf("Dragons %d", i)))
		}
		e.world.Post(dest, others[0], tgsim.Post{Text: "still busy"})
	})
	checkAllInOneTopic(t, e, dest)
	// The lookup reads the matching topics to their end: two pages.
	if n := e.world.Calls("a")[tg.MethodGetForumTopics]; n != 2 {
		t.Errorf("getForumTopics called %d times, want 2", n)
	}
}

// A member made a second topic named Dragons after more than a page of
// others, and posts in it: the lookup after the rewind still takes the
// oldest Dragons topic, the one stashd created and delivered into, though
// the member's lies on an earlier page of getForumTopics.
func TestTopicLookupTakesTheOldestSameNamedTopicOnAnyPage(t *testing.T) {
	t.Parallel()
	var first []int64
	e, dest := deliveredAcrossARewind(t, func(e *env, dest tg.ChatID) {
		if first = topicsNamed(e, dest, "Dragons"); len(first) != 1 {
			t.Fatalf("the destination has %d topics named Dragons, want 1", len(first))
		}
		for i := range 150 {
			e.world.AddTopic(dest, fmt.Sprintf("Dragons %d", i))
		}
		second := e.world.AddTopic(dest, "Dragons")
		e.world.Post(dest, second, tgsim.Post{Text: "a member's own Dragons topic"})
	})
	for _, m := range e.world.Messages(dest) {
		if m.Document != nil && m.TopicID() != first[0] {
			t.Errorf("%s is in topic %d, want the Dragons topic stashd created (%d)", m.Document.FileName, m.TopicID(), first[0])
		}
	}
}

// deliveredAcrossARewind routes a's source forum's Dragons topic to a
// new destination forum (same topics), delivers d1.tar there, runs
// between, rewinds the catalogue's destination topics (with the
// reconciliation of the destination that follows a rewind) and delivers
// d2.tar through a new pipeline.
func deliveredAcrossARewind(t *testing.T, between func(e *env, dest tg.ChatID)) (*env, tg.ChatID) {
	t.Helper()
	e := newEnv(t, "a")
	forum, dragons := sourceForum(t, e)
	dest := e.world.AddChat(tg.KindForum, "mirror forum", "a")
	tbl := route.NewTable(nil, []route.Route{{
		Sources: []route.Source{{Chat: forum}}, Destinations: []tg.ChatID{dest}, Topics: []route.Topic{{Same: true}},
	}})
	post := func(name string) tg.Message {
		return e.world.Post(forum, dragons, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})})
	}
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = tbl }, nil)
	mustHandle(t, p, e.view(c, post("d1.tar")), store.OutcomePackage)
	e.deliver()
	if between != nil {
		between(e, dest)
	}
	if _, err := e.st.Pool().Exec(e.ctx, `DELETE FROM destination_topics`); err != nil {
		t.Fatal(err)
	}
	if err := e.st.RequestReconcile(e.ctx, []tg.ChatID{dest}, "test: the catalogue rewound"); err != nil {
		t.Fatal(err)
	}
	if err := e.st.FinishReconcile(e.ctx, dest, nil); err != nil {
		t.Fatal(err)
	}
	p2, c2, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = tbl }, nil)
	mustHandle(t, p2, e.view(c2, post("d2.tar")), store.OutcomePackage)
	e.deliver()
	return e, dest
}

// checkAllInOneTopic checks that dest has one topic named Dragons and
// that both documents deliveredAcrossARewind sent are in it.
func checkAllInOneTopic(t *testing.T, e *env, dest tg.ChatID) {
	t.Helper()
	threads := topicsNamed(e, dest, "Dragons")
	if len(threads) != 1 {
		t.Fatalf("the destination has %d topics named Dragons, want 1", len(threads))
	}
	docs := 0
	for _, m := range e.world.Messages(dest) {
		if m.Document != nil {
			docs++
			if m.TopicID() != threads[0] {
				t.Errorf("%s is in topic %d, want the Dragons topic %d", m.Document.FileName, m.TopicID(), threads[0])
			}
		}
	}
	if docs != 2 {
		t.Errorf("the destination holds %d documents, want 2", docs)
	}
}

// sourceForum adds a forum, recorded as account a's source, with a topic
// named Dragons, and returns both.
func sourceForum(t *testing.T, e *env) (tg.ChatID, int64) {
	t.Helper()
	forum := e.world.AddChat(tg.KindForum, "forum", "a")
	if err := e.st.EnsureSource(e.ctx, store.Source{ChatID: forum, Account: "a", Kind: tg.KindForum}); err != nil {
		t.Fatal(err)
	}
	return forum, e.world.AddTopic(forum, "Dragons")
}

// topicsNamed returns the threads of chat's topics named name.
func topicsNamed(e *env, chat tg.ChatID, name string) []int64 {
	var threads []int64
	for id, n := range e.world.Topics(chat) {
		if n == name {
			threads = append(threads, id)
		}
	}
	return threads
}
