package daemon_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// A newly added source catches up by its history policy: everything (the
// default), nothing from before it was added, or the last 30 days.
func TestNewSourceHistoryPolicy(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	var offset atomic.Int64 // the world's clock, relative to now
	world := tgsim.NewWorld(tgsim.Config{Seed: 5, FilesDir: t.TempDir(),
		Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
	world.AddAccount("a", false)
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	all := world.AddChat(tg.KindChannel, "all", "a")
	none := world.AddChat(tg.KindChannel, "none", "a")
	month := world.AddChat(tg.KindChannel, "month", "a")
	n := 0
	post := func(chat tg.ChatID) tg.Message {
		n++
		name := fmt.Sprintf("f%d.tar", n)
		return world.Post(chat, 0, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})})
	}
	type posted struct {
		chat tg.ChatID
		m    tg.Message
	}
	var old []posted
	for _, age := range []time.Duration{40 * 24 * time.Hour, 10 * 24 * time.Hour} {
		offset.Store(int64(-age))
		for _, c := range []tg.ChatID{all, none, month} {
			old = append(old, posted{c, post(c)})
		}
	}
	offset.Store(0)

	key := func(c tg.ChatID) string { return strconv.FormatInt(int64(c), 10) }
	cfg := daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{all, none, month}, History: map[string]daemon.History{
			key(none): {None: true}, key(month): {Since: 30 * 24 * time.Hour},
		}}},
		Destinations: []tg.ChatID{dest}, Workers: 2, DrainTimeout: 10 * time.Second,
		Ingest: ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
	}
	d := daemon.New(cfg, st, func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil })
	prepareAndRun(t, d)
	fresh := []tg.Message{post(all), post(none), post(month)}
	for _, m := range fresh {
		waitHandled(t, st, m.Key())
	}
	for _, p := range old {
		if p.chat == all || (p.chat == month && p.m.Date.After(time.Now().Add(-30*24*time.Hour))) {
			waitHandled(t, st, p.m.Key())
		}
	}
	d.Shutdown(context.Background())

	want := map[string]bool{}
	for _, p := range old {
		want[p.m.Document.File.UniqueID] = p.chat == all || (p.chat == month && p.m.Date.After(time.Now().Add(-30*24*time.Hour)))
	}
	for _, m := range fresh {
		want[m.Document.File.UniqueID] = true
	}
	got := map[string]bool{}
	for _, m := range world.Messages(dest) {
		if m.Document != nil {
			got[m.Document.File.UniqueID] = true
		}
	}
	for uid, w := range want {
		if got[uid] != w {
			t.Errorf("file %s mirrored %v, want %v", uid, got[uid], w)
		}
	}
	if len(got) != 6 {
		t.Errorf("%d files mirrored, want 6 (3 new, 2 of all's history, 1 of month's last 30 days)", len(got))
	}
}

// A start cut short while it looks for a new source's start (a passing
// error of getChatMessageByDate) registers nothing: the next start asks
// again, and the source still starts where its policy says, not at its
// beginning.
func TestHistoryPolicySurvivesAFailedStart(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	world := tgsim.NewWorld(tgsim.Config{Seed: 6, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	none := world.AddChat(tg.KindChannel, "none", "a")
	last := world.Post(none, 0, tgsim.Post{FileName: "old.tar", Data: archivetest.Tar([]archivetest.File{{Name: "o", Data: []byte("o")}})})
	cfg := daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{none}, History: map[string]daemon.History{
			strconv.FormatInt(int64(none), 10): {None: true},
		}}},
		Destinations: []tg.ChatID{dest}, Workers: 1, DrainTimeout: 10 * time.Second,
	}
	dial := func(context.Context, string) (tg.Client, error) { return world.Client("a"), nil }
	world.InjectError("a", tg.MethodGetChatMessageByDate, &tg.Error{Code: 500, Message: "Internal server error"}, 1)
	if err := daemon.New(cfg, st, dial).Prepare(t.Context()); err == nil {
		t.Fatal("start survived the failed look-up")
	}
	d := daemon.New(cfg, st, dial)
	if err := d.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	src, err := st.GetSource(t.Context(), none)
	if err != nil {
		t.Fatal(err)
	}
	if src.Watermark != last.ID.ServerID() {
		t.Errorf("watermark %d after the retried start, want %d (the newest message: history none)", src.Watermark, last.ID.ServerID())
	}
}

// A new source with history "none" starts at its newest message even when
// the account's session, restarted on its database directory, has not yet
// learned the messages posted while it did not run: TDLib answers
// getChatMessageByDate from the chat's last message as the session knows
// it, until the chat is opened and its difference is in.
func TestHistoryNoneFromALaggingSession(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	world := tgsim.NewWorld(tgsim.Config{Seed: 7, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	none := world.AddChat(tg.KindChannel, "none", "a")
	world.Post(none, 0, tgsim.Post{FileName: "old.tar", Data: archivetest.Tar([]archivetest.File{{Name: "o", Data: []byte("o")}})})
	earlier := world.ClientIn("a", "db")
	if err := earlier.LoadChats(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := earlier.GetChat(t.Context(), none); err != nil {
		t.Fatal(err)
	}
	earlier.Close()
	newest := world.Post(none, 0, tgsim.Post{FileName: "down.tar", Data: archivetest.Tar([]archivetest.File{{Name: "d", Data: []byte("d")}})})

	if got := historyNoneStart(t, st, none, dest, func() tg.Client { return world.ClientIn("a", "db") }); got != newest.ID.ServerID() {
		t.Errorf("watermark %d, want %d (the newest message: history none)", got, newest.ID.ServerID())
	}
}

// A new source with history "none" in which the account's session holds a
// send of its own that failed (a chat that is also a destination) starts
// at the server's newest message: TDLib answers getChatMessageByDate with
// that failed message, whose local id names no server message.
func TestHistoryNoneOverAFailedSendOfTheSession(t *testing.T) {
	t.Parallel()
	st := openStore(t, poolConns)
	world := tgsim.NewWorld(tgsim.Config{Seed: 8, FilesDir: t.TempDir()})
	world.AddAccount("a", false)
	dest := world.AddChat(tg.KindChannel, "mirror", "a")
	feed := world.AddChat(tg.KindChannel, "feed", "a")
	both := world.AddChat(tg.KindChannel, "both", "a")
	doc := world.Post(feed, 0, tgsim.Post{FileName: "f.tar", Data: archivetest.Tar([]archivetest.File{{Name: "f", Data: []byte("f")}})})
	world.Post(both, 0, tgsim.Post{FileName: "older.tar", Data: archivetest.Tar([]archivetest.File{{Name: "a", Data: []byte("a")}})})
	newest := world.Post(both, 0, tgsim.Post{Text: "newest"})

	c := world.Client("a")
	if err := c.LoadChats(t.Context()); err != nil {
		t.Fatal(err)
	}
	m, err := c.GetMessage(t.Context(), feed, doc.ID)
	if err != nil {
		t.Fatal(err)
	}
	world.InjectSendFailures("a", true)
	if _, err := c.SendDocument(t.Context(), both, m.Document.File.RemoteID, "x"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(c.FailedMessages(both)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the send did not fail")
		}
	}

	if got := historyNoneStart(t, st, both, dest, func() tg.Client { return c }); got != newest.ID.ServerID() {
		t.Errorf("watermark %d, want %d (the server's newest message: history none)", got, newest.ID.ServerID())
	}
}

// historyNoneStart prepares a daemon of account a, whose session client
// dials, with the new source chat under history "none" and dest, and
// returns the watermark the source was registered with.
func historyNoneStart(t *testing.T, st *store.Store, chat, dest tg.ChatID, client func() tg.Client) int64 {
	t.Helper()
	cfg := daemon.Config{
		Accounts: []daemon.Account{{Name: "a", Sources: []tg.ChatID{chat}, History: map[string]daemon.History{
			strconv.FormatInt(int64(chat), 10): {None: true},
		}}},
		Destinations: []tg.ChatID{dest}, Workers: 1, DrainTimeout: 10 * time.Second, ViewSettle: 100 * time.Millisecond,
	}
	d := daemon.New(cfg, st, func(context.Context, string) (tg.Client, error) { return client(), nil })
	if err := d.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	src, err := st.GetSource(t.Context(), chat)
	if err != nil {
		t.Fatal(err)
	}
	return src.Watermark
}
