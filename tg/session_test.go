package tg_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"stashd/tg"
)

// sameTempIDClient gives every send the same temporary id, as TDLib may for
// sends to different chats, and reports outcomes only when told to.
type sameTempIDClient struct {
	tg.Client
	updates chan tg.Update
	sent    chan tg.ChatID
}

func (c *sameTempIDClient) Updates() <-chan tg.Update { return c.updates }

func (c *sameTempIDClient) SendDocumentTo(_ context.Context, chat tg.ChatID, _ int64, _, _ string, _ tg.SendOptions) (tg.Message, error) {
	c.sent <- chat
	return tg.Message{ID: 1, ChatID: chat}, nil
}

// Sends to two chats whose temporary ids collide each get their own
// outcome, whatever order the outcomes arrive in.
func TestSessionCorrelatesSendsByChatAndTemporaryID(t *testing.T) {
	t.Parallel()
	c := &sameTempIDClient{updates: make(chan tg.Update), sent: make(chan tg.ChatID, 2)}
	s := tg.NewSession(c, func(tg.Update) {})
	defer func() { close(c.updates); <-s.Done() }()

	const a, b = tg.ChatID(-1), tg.ChatID(-2)
	got := map[tg.ChatID]tg.Message{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, chat := range []tg.ChatID{a, b} {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			m, err := s.Send(ctx, chat, "remote", "caption")
			if err != nil {
				t.Errorf("send to %d: %v", chat, err)
			}
			mu.Lock()
			got[chat] = m
			mu.Unlock()
		})
	}
	<-c.sent
	<-c.sent
	// b's outcome first, then a's; both name temporary id 1.
	c.updates <- tg.SendSucceeded{OldMessageID: 1, Message: tg.Message{ChatID: b, ID: tg.MessageIDFromServer(20)}}
	c.updates <- tg.SendSucceeded{OldMessageID: 1, Message: tg.Message{ChatID: a, ID: tg.MessageIDFromServer(10)}}
	wg.Wait()
	if got[a].ChatID != a || got[a].ID.ServerID() != 10 || got[b].ChatID != b || got[b].ID.ServerID() != 20 {
		t.Errorf("outcomes crossed: a got %+v, b got %+v", got[a], got[b])
	}
}

// downloadClient answers downloadFile with an active download and records
// cancellations; the test drives updateFile itself.
type downloadClient struct {
	tg.Client
	updates   chan tg.Update
	started   chan int32
	cancelled chan int32
}

func newDownloadClient() *downloadClient {
	return &downloadClient{updates: make(chan tg.Update), started: make(chan int32, 1), cancelled: make(chan int32, 1)}
}

func (c *downloadClient) Updates() <-chan tg.Update { return c.updates }

func (c *downloadClient) DownloadFile(_ context.Context, id int32) (tg.File, error) {
	c.started <- id
	return tg.File{ID: id, Size: 100, DownloadActive: true}, nil
}

func (c *downloadClient) CancelDownloadFile(_ context.Context, id int32) error {
	c.cancelled <- id
	return nil
}

// downloadResult is what a Download returned.
type downloadResult struct {
	f   tg.File
	err error
}

// startDownload runs s.Download of file id in the background and returns
// where its result arrives. Its 10 s deadline is a safety net: a download
// that waits for ever fails the test with it.
func startDownload(t *testing.T, s *tg.Session, id int32, stall time.Duration) <-chan downloadResult {
	res := make(chan downloadResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		f, err := s.Download(ctx, tg.File{ID: id}, stall)
		res <- downloadResult{f, err}
	}()
	return res
}

// A download that TDLib ends neither active nor complete (failed or
// cancelled) fails at once with ErrDownloadStopped instead of waiting for a
// completion that will never come. The stop may come alone with the
// progress before it: the session keeps a waiter's latest state only, so
// a progress report still unread when the stop arrives is replaced by it.
func TestSessionDownloadStoppedByTDLibFails(t *testing.T) {
	t.Parallel()
	for name, updates := range map[string][]tg.File{
		"after progress":    {{ID: 7, Size: 100, Downloaded: 25, DownloadActive: true}, {ID: 7, Size: 100, Downloaded: 25}},
		"with its progress": {{ID: 7, Size: 100, Downloaded: 25}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newDownloadClient()
			s := tg.NewSession(c, func(tg.Update) {})
			defer func() { close(c.updates); <-s.Done() }()

			res := startDownload(t, s, 7, time.Hour)
			<-c.started
			for _, f := range updates {
				c.updates <- tg.FileUpdated{File: f}
			}
			if err := (<-res).err; !errors.Is(err, tg.ErrDownloadStopped) {
				t.Fatalf("download = %v, want ErrDownloadStopped", err)
			}
		})
	}
	if tg.Classify(tg.ErrDownloadStopped) != tg.ClassRetryable || tg.Classify(tg.ErrDownloadStalled) != tg.ClassRetryable {
		t.Error("a stopped or stalled download must be retryable")
	}
}

// A download that reports no progress for the stall limit is cancelled in
// TDLib and fails with ErrDownloadStalled.
func TestSessionDownloadStallIsCancelled(t *testing.T) {
	t.Parallel()
	c := newDownloadClient()
	s := tg.NewSession(c, func(tg.Update) {})
	defer func() { close(c.updates); <-s.Done() }()

	res := startDownload(t, s, 9, 20*time.Millisecond)
	<-c.started
	select {
	case id := <-c.cancelled:
		if id != 9 {
			t.Errorf("cancelled file %d, want 9", id)
		}
	case <-time.After(10 * time.Second): // safety net
		t.Fatal("a stalled download was not cancelled in TDLib")
	}
	// TDLib reports the cancelled download as stopped.
	c.updates <- tg.FileUpdated{File: tg.File{ID: 9, Size: 100}}
	if err := (<-res).err; !errors.Is(err, tg.ErrDownloadStalled) {
		t.Fatalf("download = %v, want ErrDownloadStalled", err)
	}
}

// TDLib downloads nothing while its connection is away: a download makes
// no progress through an outage longer than the stall limit and is not
// given up for it. Back connected, the stall limit counts again from the
// return.
func TestSessionDownloadStallPausesWhileAway(t *testing.T) {
	t.Parallel()
	const stall = 50 * time.Millisecond
	c := newDownloadClient()
	s := tg.NewSession(c, func(tg.Update) {})
	defer func() { close(c.updates); <-s.Done() }()

	c.updates <- tg.ConnectionStateChanged{State: tg.ConnReady}
	res := startDownload(t, s, 4, stall)
	<-c.started
	c.updates <- tg.ConnectionStateChanged{State: tg.ConnConnecting}
	select {
	case id := <-c.cancelled:
		t.Fatalf("file %d cancelled as stalled while the connection was away", id)
	case <-time.After(10 * stall):
	}
	c.updates <- tg.ConnectionStateChanged{State: tg.ConnReady}
	back := time.Now()
	select {
	case <-c.cancelled:
		if since := time.Since(back); since < stall*4/5 {
			t.Errorf("cancelled %s after the return, want the stall limit (%s) counted from it", since, stall)
		}
	case <-time.After(10 * time.Second): // safety net
		t.Fatal("a download stalled after the return was not cancelled")
	}
	c.updates <- tg.FileUpdated{File: tg.File{ID: 4, Size: 100}}
	if err := (<-res).err; !errors.Is(err, tg.ErrDownloadStalled) {
		t.Fatalf("download = %v, want ErrDownloadStalled", err)
	}
}

// Progress reports do not end a download: it completes with the final
// update's local path.
func TestSessionDownloadFollowsProgressToCompletion(t *testing.T) {
	t.Parallel()
	c := newDownloadClient()
	s := tg.NewSession(c, func(tg.Update) {})
	defer func() { close(c.updates); <-s.Done() }()

	res := startDownload(t, s, 3, time.Hour)
	<-c.started
	for _, n := range []int64{10, 50, 90} {
		c.updates <- tg.FileUpdated{File: tg.File{ID: 3, Size: 100, Downloaded: n, DownloadActive: true}}
	}
	c.updates <- tg.FileUpdated{File: tg.File{ID: 3, Size: 100, Downloaded: 100, DownloadDone: true, LocalPath: "/files/3"}}
	r := <-res
	if r.err != nil || r.f.LocalPath != "/files/3" {
		t.Fatalf("download = %+v, %v; want the completed file", r.f, r.err)
	}
}
