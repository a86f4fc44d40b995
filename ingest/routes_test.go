package ingest_test

import (
	"slices"
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

// documentsIn returns the unique ids of the documents in chat, in order.
func documentsIn(e *env, chat tg.ChatID) []string {
	e.deliver()
	var out []string
	for _, m := range e.world.Messages(chat) {
		if m.Document != nil {
			out = append(out, m.Document.File.UniqueID)
		}
	}
	return out
}

func TestRoutesDeliverEachPackageOncePerRoutedDestination(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	src := e.src["a"]
	forum := e.world.AddChat(tg.KindForum, "forum", "a")
	if err := e.st.EnsureSource(e.ctx, store.Source{ChatID: forum, Account: "a", Kind: tg.KindForum}); err != nil {
		t.Fatal(err)
	}
	dragons := e.world.AddTopic(forum, "Dragons")
	cats := e.world.AddTopic(forum, "Cats")
	d1 := e.world.AddChat(tg.KindChannel, "d1", "a")
	d2 := e.world.AddChat(tg.KindChannel, "d2", "a")
	d3 := e.world.AddChat(tg.KindChannel, "d3", "a")
	tbl := route.NewTable(nil, []route.Route{
		{Name: "7z", Sources: []route.Source{{Chat: src}}, Destinations: []tg.ChatID{d1, d2}, Filter: route.Filter{Formats: []string{"7z"}}},
		{Name: "dragons", Sources: []route.Source{{Chat: src}, {Chat: forum, Topics: []int64{dragons}}}, Destinations: []tg.ChatID{d2, d3},
			Filter: route.Filter{Include: []route.Pattern{route.MustPattern("*dragon*")}, Exclude: []route.Pattern{route.MustPattern("re:(?i)sample")}}},
		{Name: "big", Sources: []route.Source{{Chat: forum}}, Destinations: []tg.ChatID{d1}, Filter: route.Filter{MinSize: 4000}},
	})
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = tbl }, nil)
	sz := func(name string, n int) []byte {
		return archivetest.SevenZip([]archivetest.File{{Name: name, Data: []byte(strings.Repeat(name[:1], n))}})
	}
	tarOf := func(name string) []byte { return archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}}) }
	post := func(chat tg.ChatID, thread int64, name string, data []byte) tg.Message {
		return e.view(c, e.world.Post(chat, thread, tgsim.Post{FileName: name, Data: data}))
	}
	msgs := map[string]tg.Message{
		"dragon.7z":        post(src, 0, "dragon.7z", sz("d.txt", 10)),             // 7z and dragons: d1, d2 (once), d3
		"plain.7z":         post(src, 0, "plain.7z", sz("p.txt", 10)),              // 7z: d1, d2
		"dragon.tar":       post(src, 0, "dragon.tar", tarOf("t.txt")),             // dragons: d2, d3
		"dragon-sample.7z": post(src, 0, "dragon-sample.7z", sz("s", 10)),          // 7z only: d1, d2
		"other.tar":        post(src, 0, "other.tar", tarOf("o.txt")),              // no route
		"topic-dragon.tar": post(forum, dragons, "topic-dragon.tar", tarOf("x")),   // dragons: d2, d3
		"topic-cat.tar":    post(forum, cats, "topic-cat.tar", tarOf("y")),         // no route
		"topic-big.7z":     post(forum, cats, "topic-big.7z", sz("big.bin", 9000)), // big: d1
	}
	for name, m := range msgs {
		if big := m.Document.File.Size >= 4000; big != (name == "topic-big.7z") {
			t.Fatalf("%s is %d bytes: the size filter cannot tell it", name, m.Document.File.Size)
		}
		mustHandle(t, p, m, store.OutcomePackage)
	}
	want := map[tg.ChatID][]string{
		d1: {"dragon.7z", "plain.7z", "dragon-sample.7z", "topic-big.7z"},
		d2: {"dragon.7z", "plain.7z", "dragon.tar", "dragon-sample.7z", "topic-dragon.tar"},
		d3: {"dragon.7z", "dragon.tar", "topic-dragon.tar"},
	}
	for dest, names := range want {
		var uids []string
		for _, n := range names {
			uids = append(uids, msgs[n].Document.File.UniqueID)
		}
		got := documentsIn(e, dest)
		slices.Sort(uids)
		slices.Sort(got)
		if !slices.Equal(got, uids) {
			t.Errorf("destination %d holds %v, want %v (%v)", dest, got, uids, names)
		}
	}
	if n := len(documentsIn(e, e.dest)); n != 0 {
		t.Errorf("the unrouted global destination received %d documents", n)
	}

	// A forward of a delivered package is complete for its routes: nothing
	// is sent again.
	fwd := e.view(c, e.world.Post(src, 0, tgsim.Post{SameFileAs: msgs["dragon.7z"].Document.File.UniqueID}))
	mustHandle(t, p, fwd, store.OutcomeDuplicate)
	if n := len(documentsIn(e, d2)); n != 5 {
		t.Errorf("after a forward, d2 holds %d documents, want 5", n)
	}
	// A package forwarded into another source goes where that source
	// routes it too: topic-big.7z (d1 from the forum) forwarded into src
	// matches route "7z", so d2 gets it; d1 does not get it twice.
	big := msgs["topic-big.7z"].Document.File.UniqueID
	fwd = e.view(c, e.world.Post(src, 0, tgsim.Post{SameFileAs: big}))
	mustHandle(t, p, fwd, store.OutcomeDuplicate)
	if got := documentsIn(e, d2); !slices.Contains(got, big) {
		t.Errorf("topic-big.7z forwarded into the 7z route's source is not in d2 (%v)", got)
	}
	if n := countOf(documentsIn(e, d1), big); n != 1 {
		t.Errorf("d1 holds topic-big.7z %d times, want 1", n)
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

func TestRoutedSetIsCompletedForItsRoutesOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	d1 := e.world.AddChat(tg.KindChannel, "d1", "a")
	d2 := e.world.AddChat(tg.KindChannel, "d2", "a")
	tbl := route.NewTable(nil, []route.Route{
		{Sources: []route.Source{{Chat: e.src["a"]}}, Destinations: []tg.ChatID{d1}, Filter: route.Filter{Formats: []string{"7z"}}},
		{Sources: []route.Source{{Chat: e.src["a"]}}, Destinations: []tg.ChatID{d2}, Filter: route.Filter{Formats: []string{"rar"}}},
	})
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = tbl }, nil)
	whole := archivetest.SevenZip([]archivetest.File{{Name: "big/file.bin", Data: []byte(strings.Repeat("z", 9000))}})
	var msgs []tg.Message
	for i, part := range archivetest.Split(whole, 3) {
		msgs = append(msgs, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "big.7z.00" + string(rune('1'+i)), Data: part})))
	}
	for _, m := range msgs {
		mustHandle(t, p, m, store.OutcomePartPending)
	}
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want one completed set", res, err)
	}
	if got := documentsIn(e, d1); len(got) != 3 {
		t.Errorf("d1 holds %d parts, want 3", len(got))
	}
	if got := documentsIn(e, d2); len(got) != 0 {
		t.Errorf("d2 (rar only) holds %d parts, want 0", len(got))
	}
	// A part forwarded again is a duplicate of a package complete for its
	// routes (d1 only): not a new set.
	fwd := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{SameFileAs: msgs[1].Document.File.UniqueID}))
	mustHandle(t, p, fwd, store.OutcomeDuplicate)
}
