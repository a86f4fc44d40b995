//go:build libtdjson

package tdjsonsim_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"stashd/harness/demo"
	"stashd/internal/pgtest"
	"stashd/sim/tdjsonsim"
	"stashd/sim/tgsim"
	"stashd/tg"
	"stashd/tg/tdlib"
)

// These tests link the stand-in libtdjson.so (make test-standin): go-tdlib
// and the production adapter talk to the simulator through the cgo
// boundary and the stand-in's socket. The library reads STASHD_TDJSON_SOCKET
// when it connects, so the tests set it and do not run in parallel.

// standinConfig is an account's adapter configuration: the state
// directory's name is the account, which is how the server tells them
// apart.
func standinConfig(root, account string) tdlib.Config {
	return tdlib.Config{
		Account:  account,
		StateDir: filepath.Join(root, "accounts", account),
		APIID:    1,
		APIHash:  "stand-in",
		Logger:   slog.New(slog.DiscardHandler),
	}
}

func TestVersionFromStandIn(t *testing.T) {
	v, err := tdlib.Version()
	if err != nil {
		t.Fatal(err)
	}
	if v != "1.8.40" {
		t.Errorf("version %q, want the 1.8.40 that go-tdlib v0.7.6 expects", v)
	}
}

// runThroughStandIn runs the demo o with every account's client going
// through go-tdlib, the real adapter, the stand-in library and the
// TDLib-JSON server.
func runThroughStandIn(t *testing.T, o demo.Options) demo.Report {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "tdjson.sock")
	t.Setenv(tdjsonsim.SocketEnv, sock)
	ln, err := tdjsonsim.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	var (
		once   sync.Once
		srv    *tdjsonsim.Server
		served *tgsim.World
	)
	serveErr := make(chan error, 1)
	connect := func(ctx context.Context, world *tgsim.World, account string) (tg.Client, error) {
		// demo.Run makes the world; the server starts on its first dial.
		once.Do(func() {
			served = world
			srv = tdjsonsim.New(world, tdjsonsim.Config{})
			go func() { serveErr <- srv.Serve(ln) }()
		})
		if world != served {
			return nil, errors.New("demo dialed a second world")
		}
		return tdlib.New(ctx, standinConfig(dir, account))
	}
	// Each account's downloads land in its TDLib files directory, under
	// its state directory (standinConfig): the demo measures them there.
	o.DatabaseURL, o.FilesDir, o.Connect = pgtest.New(t), filepath.Join(dir, "accounts"), connect
	rep, err := demo.Run(t.Context(), o)
	if srv != nil {
		srv.Close()
		if err := <-serveErr; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	t.Logf("audit: %+v", rep)
	if !rep.OK() || !rep.Settled || rep.UniquePackages == 0 {
		t.Errorf("audit failed: %+v", rep)
	}
	if rep.Missing != 0 || rep.DuplicateDeliveries != 0 {
		t.Errorf("missing %d, delivered twice %d: want 0 and 0", rep.Missing, rep.DuplicateDeliveries)
	}
	return rep
}

// The realtime pipeline end to end once more, through go-tdlib, the real
// adapter, the stand-in library and the TDLib-JSON server.
func TestPipelineThroughStandIn(t *testing.T) {
	o := demo.Options{Seed: 7, Steps: 60, Rate: -1, Sources: 3, ForumTopics: 4, Accounts: 2}
	rep := runThroughStandIn(t, o)
	// The adapter loads chats until TDLib answers 404, so every client
	// start costs two loadChats where the in-process simulator costs one:
	// the calls went through the adapter.
	if got, want := rep.Calls[tg.MethodLoadChats], 2*o.Accounts; got < want {
		t.Errorf("loadChats served %d times, want at least %d (two per adapter start)", got, want)
	}
}

// Send faults on the wire: updateMessageSendFailed with 500 and with 429
// "retry after N", and updateDeleteMessages for a pending send's temporary
// id. The adapter must decode each so that no send waits for ever and
// nothing is lost or sent twice.
func TestSendFaultsThroughStandIn(t *testing.T) {
	rep := runThroughStandIn(t, demo.Options{Seed: 11, Steps: 40, Rate: -1, Sources: 2, Accounts: 1, FailSends: 0.1, VanishSends: 0.1})
	if rep.VanishedSends == 0 || rep.FloodWaitedSends == 0 {
		t.Errorf("%d vanished and %d flood-waited sends: the test checked less than it should", rep.VanishedSends, rep.FloodWaitedSends)
	}
}

// Stalled and failed downloads through the real adapter: the stop arrives
// as TDLib's updateFile, stalls are cancelled with cancelDownloadFile, and
// every downloaded file is deleted with deleteFile; nothing is missing.
func TestDownloadFaultsThroughStandIn(t *testing.T) {
	rep := runThroughStandIn(t, demo.Options{
		Seed: 5, Steps: 40, Rate: -1, Sources: 2, Accounts: 1,
		StallDownloads: 0.1, FailDownloads: 0.1, DownloadStall: 300 * time.Millisecond,
	})
	if rep.StalledDownloads == 0 || rep.Calls[tg.MethodCancelDownloadFile] == 0 || rep.Calls[tg.MethodDeleteFile] == 0 {
		t.Errorf("stalled %d, cancelDownloadFile %d, deleteFile %d: want all above 0",
			rep.StalledDownloads, rep.Calls[tg.MethodCancelDownloadFile], rep.Calls[tg.MethodDeleteFile])
	}
}

// The chat faults on the wire, through the real adapter: archived sources
// (loadChats of chatListArchive), sources lost halfway ("Can't access the
// chat", updateSupergroup with status left), protected sources
// (has_protected_content, can_be_saved), null last_message and 406s.
func TestChatFaultsThroughStandIn(t *testing.T) {
	rep := runThroughStandIn(t, demo.Options{
		Seed: 11, Steps: 160, Rate: -1, Sources: 6, Accounts: 2,
		LoseAccess: 0.4, IgnorableErrors: 0.05, UnknownLastMessage: 0.3,
		ArchivedSources: 0.5, ProtectedSources: 0.5,
	})
	if rep.InaccessibleSources == 0 || rep.ProtectedRecorded == 0 {
		t.Errorf("%d inaccessible sources, %d protected packages recorded: the test checked less than it should",
			rep.InaccessibleSources, rep.ProtectedRecorded)
	}
}

// The adapter loads the archive chat list as well as the main one: a
// source in the archive is found, not "Chat not found".
func TestArchivedSourceThroughStandIn(t *testing.T) {
	world := tgsim.NewWorld(tgsim.Config{Seed: 1})
	world.AddAccount("acct1", false)
	archived := world.AddChat(tg.KindChannel, "old backups", "acct1")
	world.SetArchived(archived, true)
	dir, _ := serveWorld(t, world)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := tdlib.New(ctx, standinConfig(dir, "acct1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess := tg.NewSession(c, func(tg.Update) {})
	if err := sess.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sess.GetChat(ctx, archived); err != nil {
		t.Fatalf("getChat of an archived source after LoadChats: %v", err)
	}
}

// watchedListener hands each accepted connection to conns, and closes
// asked the first time a connection reads a request for method.
type watchedListener struct {
	net.Listener
	conns  chan net.Conn
	method string
	asked  chan struct{}
	once   *sync.Once
}

func (l watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	w := watchedConn{c, l}
	l.conns <- w
	return w, nil
}

type watchedConn struct {
	net.Conn
	l watchedListener
}

func (c watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if bytes.Contains(p[:n], []byte(`"@type":"`+c.l.method+`"`)) {
		c.l.once.Do(func() { close(c.l.asked) })
	}
	return n, err
}

// A server that goes away (a crashed `stashd sim`) is, to the adapter,
// TDLib closing by itself: the stand-in answers the request in flight with
// 500 "Request aborted", reports authorizationStateClosing and Closed, the
// update stream ends and requests fail with ErrClosed.
func TestLostServerClosesTheClient(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "tdjson.sock")
	t.Setenv(tdjsonsim.SocketEnv, sock)
	ln, err := tdjsonsim.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	// Every simulated call takes a minute: getMe is still running when the
	// connection goes.
	world := tgsim.NewWorld(tgsim.Config{Seed: 1, Latency: time.Minute})
	world.AddAccount("acct1", false)
	srv := tdjsonsim.New(world, tdjsonsim.Config{})
	wl := watchedListener{Listener: ln, conns: make(chan net.Conn, 4), method: tg.MethodGetMe, asked: make(chan struct{}), once: new(sync.Once)}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(wl) }()
	defer func() {
		srv.Close()
		<-serveErr
	}()

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := tdlib.New(ctx, standinConfig(dir, "acct1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := make(chan error, 1)
	go func() {
		_, err := c.GetMe(ctx)
		got <- err
	}()
	<-wl.asked
	(<-wl.conns).Close() // cut the connection under the library

	var te *tg.Error
	if err := <-got; !errors.As(err, &te) || te.Code != 500 || te.Message != "Request aborted" {
		t.Errorf("getMe in flight when the server went away: %v, want 500 Request aborted", err)
	}
	for range c.Updates() {
		// Drain until the stream ends: TDLib closed.
	}
	if _, err := c.GetMe(ctx); !errors.Is(err, tg.ErrClosed) {
		t.Errorf("getMe after the server went away: %v, want tg.ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// The stand-in keeps one connection per server socket: an instance
// created once the environment names another server talks to that one,
// while the instances of the first keep theirs. (The same rule never
// starts an instance on a connection its server closed: a test that began
// right after another's server went away once started on that dead
// connection and failed with 500 "Request aborted".)
func TestEachServerItsOwnConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var clients [2]*tdlib.Client
	for i, premium := range []bool{false, true} {
		world := tgsim.NewWorld(tgsim.Config{Seed: int64(i + 1)})
		world.AddAccount("acct1", premium)
		dir, _ := serveWorld(t, world)
		c, err := tdlib.New(ctx, standinConfig(dir, "acct1"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}
	for i, c := range clients {
		me, err := c.GetMe(ctx)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		if me.IsPremium != (i == 1) {
			t.Errorf("client %d got the account of the other server (premium %v)", i, me.IsPremium)
		}
	}
}

// Without a server, starting a client fails at once with the reason,
// instead of waiting for go-tdlib's 60-second timeout.
func TestNoServerFailsTheStart(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(tdjsonsim.SocketEnv, filepath.Join(dir, "nobody-listens.sock"))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := tdlib.New(ctx, standinConfig(dir, "acct1"))
	if err == nil {
		c.Close()
		t.Fatal("New succeeded without a server")
	}
	if !strings.Contains(err.Error(), "connect to") || !strings.Contains(err.Error(), "nobody-listens.sock") {
		t.Errorf("New without a server: %v, want the connect error", err)
	}
}

// TDLib may hold a request for a minute under FLOOD_WAIT (it sits out
// the server's waits itself), and go-tdlib's receiver can lose the reply,
// or panic, when it lands at go-tdlib's own 60-second timeout. The adapter
// ends every request at its own deadline, below go-tdlib's, with a
// retryable tg.ErrRequestTimeout.
func TestRequestsEndAtTheAdapterDeadline(t *testing.T) {
	world := tgsim.NewWorld(tgsim.Config{Seed: 1})
	world.AddAccount("acct1", false)
	dir, _ := serveWorld(t, world)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cfg := standinConfig(dir, "acct1")
	cfg.RequestTimeout = 300 * time.Millisecond
	c, err := tdlib.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// One request, then a wait of 30 s, which TDLib sits out.
	world.LimitRequests("acct1", 1.0/30, 1)
	if _, err := c.GetMe(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.GetMe(ctx)
	if !errors.Is(err, tg.ErrRequestTimeout) || tg.Classify(err) != tg.ClassRetryable || ctx.Err() != nil {
		t.Fatalf("getMe held by TDLib: %v, want tg.ErrRequestTimeout (retryable) before the caller's deadline", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("getMe held by TDLib ended after %s; want at the adapter's deadline", took)
	}
	if n := world.FloodWaitsSatOut("acct1"); n != 1 {
		t.Errorf("FloodWaitsSatOut = %d; want the wait TDLib was sitting out", n)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close with the request still held: %v", err)
	}
}

// The adapter resolves a named source through searchPublicChat, and tells
// a forum by its supergroup, through the stand-in as through TDLib.
func TestSearchPublicChatThroughStandIn(t *testing.T) {
	world := tgsim.NewWorld(tgsim.Config{Seed: 2, FilesDir: t.TempDir()})
	world.AddAccount("acct1", false)
	forum := world.AddChat(tg.KindForum, "exchange", "acct1")
	world.SetUsername(forum, "exchange_pub")
	dir, srv := serveWorld(t, world)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := tdlib.New(ctx, standinConfig(dir, "acct1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.SearchPublicChat(ctx, "exchange_pub")
	if want := (tg.Chat{ID: forum, Kind: tg.KindForum, Title: "exchange"}); err != nil || got != want {
		t.Errorf("SearchPublicChat: %+v, %v; want %+v", got, err, want)
	}
	var te *tg.Error
	if _, err := c.SearchPublicChat(ctx, "nobody_here"); !errors.As(err, &te) || te.Code != 400 {
		t.Errorf("SearchPublicChat of an unknown name: %v, want a 400", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	for _, v := range tdjsonsim.WireViolations(srv) {
		t.Errorf("TDLib schema: %s", v)
	}
}

// serveWorld serves world to the stand-in library on a socket of its own
// for the rest of the test and returns the directory of the socket (for
// the adapter's configuration) and the server.
func serveWorld(t *testing.T, world *tgsim.World) (string, *tdjsonsim.Server) {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "tdjson.sock")
	t.Setenv(tdjsonsim.SocketEnv, sock)
	ln, err := tdjsonsim.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := tdjsonsim.New(world, tdjsonsim.Config{})
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-serveErr; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return dir, srv
}

// The adapter creates a forum topic (createForumTopic, 400 on a chat that
// is not a forum) and sends a document into it (sendMessage with
// message_thread_id); the message lands in the topic.
func TestForumTopicThroughStandIn(t *testing.T) {
	world := tgsim.NewWorld(tgsim.Config{Seed: 3, FilesDir: t.TempDir()})
	world.AddAccount("acct1", false)
	src := world.AddChat(tg.KindChannel, "backups", "acct1")
	forum := world.AddChat(tg.KindForum, "mirror forum", "acct1")
	posted := world.Post(src, 0, tgsim.Post{FileName: "a.zip", Data: []byte("PK")})
	dir, srv := serveWorld(t, world)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := tdlib.New(ctx, standinConfig(dir, "acct1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess := tg.NewSession(c, func(tg.Update) {})
	if err := sess.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	var te *tg.Error
	if _, err := sess.CreateForumTopic(ctx, src, "Dragons"); !errors.As(err, &te) || te.Code != 400 {
		t.Errorf("CreateForumTopic on a channel: %v, want a 400", err)
	}
	thread, err := sess.CreateForumTopic(ctx, forum, "Dragons")
	if err != nil || world.Topics(forum)[thread] != "Dragons" {
		t.Fatalf("CreateForumTopic = %d, %v; the forum's topics are %v", thread, err, world.Topics(forum))
	}
	m, err := sess.GetMessage(ctx, src, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := sess.SendTo(ctx, forum, thread, m.Document.File.RemoteID, "a.zip")
	if err != nil {
		t.Fatal(err)
	}
	if sent.TopicID() != thread {
		t.Errorf("sent message is in topic %d, want %d", sent.TopicID(), thread)
	}
	// Behind 150 topics active since, the adapter finds it on the second
	// and last page of getForumTopics, sending back the first page's next
	// offsets.
	for i := range 150 {
		world.AddTopic(forum, fmt.Sprintf("Dragons %d", i))
	}
	before := world.Calls("acct1")[tg.MethodGetForumTopics]
	found, err := tg.ForumTopics(ctx, sess, forum, "Dragons")
	if n := world.Calls("acct1")[tg.MethodGetForumTopics] - before; err != nil || len(found) != 151 || found[150].ThreadID != thread || n != 2 {
		t.Errorf("ForumTopics: %d topics in %d requests, %v; want 151 in 2, the last topic %d", len(found), n, err, thread)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	<-sess.Done()
	for _, v := range tdjsonsim.WireViolations(srv) {
		t.Errorf("TDLib schema: %s", v)
	}
}

// The adapter deletes a message the account sent (deleteMessages, then
// updateDeleteMessages decoded as tg.MessagesDeleted) and gets TDLib's
// 400 "Message can't be deleted" for one another sender posted. An id
// the session never loaded is answered ok and deleted nowhere, as TDLib
// does.
func TestDeleteMessagesThroughStandIn(t *testing.T) {
	world := tgsim.NewWorld(tgsim.Config{Seed: 4, FilesDir: t.TempDir()})
	world.AddAccount("acct1", false)
	src := world.AddChat(tg.KindChannel, "backups", "acct1")
	dest := world.AddChat(tg.KindChannel, "mirror", "acct1")
	posted := world.Post(src, 0, tgsim.Post{FileName: "a.zip", Data: []byte("PK")})
	unseen := world.Post(dest, 0, tgsim.Post{FileName: "b.zip", Data: []byte("PK")})
	world.SetDeleteRights("acct1", dest, true)
	dir, srv := serveWorld(t, world)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := tdlib.New(ctx, standinConfig(dir, "acct1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deleted := make(chan tg.MessagesDeleted, 4)
	sess := tg.NewSession(c, func(u tg.Update) {
		if d, ok := u.(tg.MessagesDeleted); ok && d.Chat == dest {
			deleted <- d
		}
	})
	if err := sess.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := sess.GetMessage(ctx, src, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := sess.Send(ctx, dest, m.Document.File.RemoteID, "a.zip")
	if err != nil {
		t.Fatal(err)
	}
	var te *tg.Error
	if err := sess.DeleteMessages(ctx, src, []tg.MessageID{posted.ID}, true); !errors.As(err, &te) || te.Code != 400 || te.Message != "Message can't be deleted" {
		t.Errorf("DeleteMessages of another sender's message: %v, want 400 Message can't be deleted", err)
	}
	if err := sess.DeleteMessages(ctx, dest, []tg.MessageID{unseen.ID, sent.ID}, true); err != nil {
		t.Fatalf("DeleteMessages: %v", err)
	}
	select {
	case d := <-deleted:
		if len(d.IDs) != 1 || d.IDs[0] != sent.ID || !d.IsPermanent {
			t.Errorf("MessagesDeleted = %+v, want permanent [%d]", d, sent.ID)
		}
	case <-ctx.Done():
		t.Fatal("no updateDeleteMessages")
	}
	if got := world.Messages(dest); len(got) != 1 || got[0].ID != unseen.ID {
		t.Errorf("the destination holds %v; want only %d, which the session never loaded", got, unseen.ID)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	<-sess.Done()
	for _, v := range tdjsonsim.WireViolations(srv) {
		t.Errorf("TDLib schema: %s", v)
	}
}
