package daemon_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/ingest"
	"stashd/route"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// Routes are resolved and checked at start: every problem stops the start
// with a line of its own, and good routes decide where packages go.
func TestRoutesAreCheckedAtStart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t, poolConns)
	var err error
	world := tgsim.NewWorld(tgsim.Config{Seed: 5, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	src := world.AddChat(tg.KindChannel, "news", "a")
	group := world.AddChat(tg.KindSupergroup, "group", "a")
	d1 := world.AddChat(tg.KindChannel, "mirror one", "a")
	d2 := world.AddChat(tg.KindChannel, "mirror two", "a")
	world.SetUsername(d2, "mirror_two")
	hidden := world.AddChat(tg.KindChannel, "not a member") // no account sees it

	cfg := daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{src, group}}},
		Workers:  2, DrainTimeout: 10 * time.Second,
		Ingest: ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
	}
	dial := func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil }

	cfg.Routes = []route.Spec{
		{Name: "bad", Sources: []route.SpecSource{{Chat: route.Chat{ID: -42}}, {Chat: route.Chat{ID: group}, Topics: []int64{3}}},
			Destinations: []route.Chat{{ID: hidden}, {ID: src}}},
	}
	err = daemon.New(cfg, st, dial).Prepare(ctx)
	if err == nil {
		t.Fatal("bad routes started")
	}
	for _, want := range []string{"source -42: unknown chat", "is a supergroup, not a forum", "unknown chat (no account can see it)", "is also a source"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start error lacks %q:\n%v", want, err)
		}
	}
	// Destination topics: a topic on a channel, and "same" on a route
	// without a forum source.
	destForum := world.AddChat(tg.KindForum, "mirror forum", "a")
	cfg.Routes = []route.Spec{
		{Name: "topic on a channel", Sources: []route.SpecSource{{Chat: route.Chat{ID: src}}}, Destinations: []route.Chat{{ID: d1}},
			Topics: []route.Topic{{Thread: 3 << 20}}},
		{Name: "same without a forum", Sources: []route.SpecSource{{Chat: route.Chat{ID: src}}}, Destinations: []route.Chat{{ID: destForum}},
			Topics: []route.Topic{{Same: true}}},
	}
	err = daemon.New(cfg, st, dial).Prepare(ctx)
	if err == nil {
		t.Fatal("routes with impossible destination topics started")
	}
	for _, want := range []string{
		fmt.Sprintf(`route "topic on a channel": destination %d has topic 3145728 but is a channel, not a forum`, d1),
		fmt.Sprintf(`route "same without a forum": destination %d has topic "same" but none of the route's sources is a forum`, destForum),
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start error lacks %q:\n%v", want, err)
		}
	}
	cfg.Routes = []route.Spec{{Name: "typo", Sources: []route.SpecSource{{Chat: route.Chat{ID: src}}}, Destinations: []route.Chat{{Username: "no_such_chat"}}}}
	if err := daemon.New(cfg, st, dial).Prepare(ctx); err == nil || !strings.Contains(err.Error(), `route "typo": destination @no_such_chat: unknown chat`) {
		t.Fatalf("unresolvable destination: start error %v", err)
	}

	cfg.Routes = []route.Spec{
		{Name: "7z", Sources: []route.SpecSource{{Chat: route.Chat{ID: src}}}, Destinations: []route.Chat{{ID: d1}},
			Filter: route.Filter{Formats: []string{"7z"}}},
		{Name: "all", Sources: []route.SpecSource{{Chat: route.Chat{ID: src}}, {Chat: route.Chat{ID: group}}}, Destinations: []route.Chat{{Username: "mirror_two"}}},
	}
	d := daemon.New(cfg, st, dial)
	prepareAndRun(t, d)
	sz := world.Post(src, 0, tgsim.Post{FileName: "a.7z", Data: archivetest.SevenZip([]archivetest.File{{Name: "a", Data: []byte("a")}})})
	tr := world.Post(group, 0, tgsim.Post{FileName: "b.tar", Data: archivetest.Tar([]archivetest.File{{Name: "b", Data: []byte("b")}})})
	waitHandled(t, st, sz.Key())
	waitHandled(t, st, tr.Key())
	d.Shutdown(context.Background())
	count := func(chat tg.ChatID) int {
		n := 0
		for _, m := range world.Messages(chat) {
			if m.Document != nil {
				n++
			}
		}
		return n
	}
	if count(d1) != 1 || count(d2) != 2 {
		t.Errorf("d1 holds %d documents (want the 7z), d2 %d (want both)", count(d1), count(d2))
	}
}
