package bench

import (
	"fmt"
	"testing"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// The baseline's schedulers, measured on a small world: polling costs one
// search per channel and topic every cycle; the skip rules check cold
// sources only every backoffEvery-th cycle and find a new message in a
// cold topic only on such a cycle.
func TestSeedSchedulers(t *testing.T) {
	const channels, topics = 3, 10
	w := &economyWorld{e: &env{world: tgsim.NewWorld(tgsim.Config{Seed: 1})}}
	world := w.e.world
	world.AddAccount("acct1", false)
	for i := range channels {
		c := world.AddChat(tg.KindChannel, fmt.Sprint("c", i), "acct1")
		world.Post(c, 0, tgsim.Post{FileName: "a.tar", Data: []byte("x")})
		w.chans = append(w.chans, c)
	}
	w.forum = world.AddChat(tg.KindForum, "forum", "acct1")
	for i := range topics {
		w.topics = append(w.topics, world.AddTopic(w.forum, fmt.Sprint("t", i)))
	}
	poll, err := (&seedScheduler{}).measure(t.Context(), w)
	if err != nil {
		t.Fatal(err)
	}
	sources := float64(channels + topics)
	want := map[string]float64{cycleIdle: sources, cycleOneNew: sources, cycleRestart: sources + 2}
	for k, v := range want {
		if poll[k] != v {
			t.Errorf("polling %s = %v calls, want %v", k, poll[k], v)
		}
	}
	skip, err := (&seedScheduler{skip: true}).measure(t.Context(), w)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := skip[cycleIdle], sources/backoffEvery; got != want {
		t.Errorf("skip rules idle = %v calls per cycle, want %v (every source checked once in %d cycles)", got, want, backoffEvery)
	}
	if got := skip[cycleOneNew+"_cycles"]; got < 1 || got > backoffEvery {
		t.Errorf("skip rules found the new message after %v cycles, want 1..%d", got, backoffEvery)
	}
}
