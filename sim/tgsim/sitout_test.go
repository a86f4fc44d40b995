package tgsim

import (
	"errors"
	"testing"
	"time"

	"stashd/tg"
)

// A send the chat's limit refuses with a wait TDLib sits out stays
// pending, in the session's view, through the wait; then it reaches the
// server again and lands. The client sees no 429.
func TestChatSendWaitIsSatOut(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{Now: time.Now})
	f.w.LimitChatSends(f.dest, 0.5, 1) // one send, then two seconds
	if _, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "stashd:first"); err != nil {
		t.Fatal(err)
	}
	next[tg.SendSucceeded](t, f.c, nil)
	start := time.Now()
	tmp, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "stashd:second")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if held, err := f.c.GetMessage(f.ctx, f.dest, tmp.ID); err != nil || held.Caption != "stashd:second" {
		t.Errorf("the message while TDLib sits out the wait: %+v, %v; want it pending in the session's view", held, err)
	}
	u := next[tg.Update](t, f.c, func(u tg.Update) bool {
		switch u := u.(type) {
		case tg.SendSucceeded:
			return u.OldMessageID == tmp.ID
		case tg.SendFailed:
			return u.OldMessageID == tmp.ID
		}
		return false
	})
	if ok, isOK := u.(tg.SendSucceeded); !isOK || ok.Message.Caption != "stashd:second" {
		t.Fatalf("second send ended with %+v; want it landed after the wait", u)
	}
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Errorf("second send landed after %s; want after the chat's wait", took)
	}
	if n := f.w.ChatFlooded(f.dest); n != 1 {
		t.Errorf("ChatFlooded = %d; want the one refusal TDLib sat out", n)
	}
	if st := f.w.SendStats(); st.ChatFlooded != 0 || st.Succeeded != 2 {
		t.Errorf("send stats %+v; want both landed, none failed by the chat's limit", st)
	}
	if n := f.w.FloodWaitsSatOut("alice"); n != 1 {
		t.Errorf("FloodWaitsSatOut = %d, want 1", n)
	}
	if msgs := f.w.Messages(f.dest); len(msgs) != 2 {
		t.Errorf("destination holds %d messages, want 2", len(msgs))
	}
}

// A wait past TDLib's limit reaches the client at once, in
// updateMessageSendFailed, as a 429 with the server's wait.
func TestChatSendWaitPastTheLimitFails(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{Now: time.Now, FloodSitOut: time.Second})
	f.w.LimitChatSends(f.dest, 0.5, 1)
	if _, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "stashd:first"); err != nil {
		t.Fatal(err)
	}
	next[tg.SendSucceeded](t, f.c, nil)
	if _, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "stashd:second"); err != nil {
		t.Fatal(err)
	}
	failed := next[tg.SendFailed](t, f.c, nil)
	var fw *tg.FloodWaitError
	if !errors.As(failed.Err, &fw) || fw.RetryAfter > 2*time.Second || fw.RetryAfter < time.Second {
		t.Fatalf("second send failed with %v; want the chat's 429 of about 2 s", failed.Err)
	}
	if n := f.w.FloodWaitsSatOut("alice"); n != 0 {
		t.Errorf("FloodWaitsSatOut = %d, want 0", n)
	}
}

// A client closed while TDLib sits out a send's wait closes at once; the
// send is not held for it (its outcome reaches nobody), and with
// ResendAfterRestart the next client on the directory sends it again.
func TestCloseDuringASitOut(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{Now: time.Now, ResendAfterRestart: true})
	sitOutASend(t, f)
	closeQuickly(t, f)
	c2 := f.w.Client("alice")
	defer c2.Close()
	if st := f.w.SendStats(); st.Resent != 1 {
		t.Errorf("send stats %+v; want the held send re-sent by the next client", st)
	}
	if n := len(f.w.Messages(f.dest)); n != 1 {
		t.Errorf("destination holds %d messages; want only the first while the wait lasts", n)
	}
}

// A send held in flight and landed while its client is open meets the
// chat's limit like any: TDLib sits the wait out, and closing the client
// meanwhile does not wait for it.
func TestCloseDuringTheSitOutOfASendLandedFromFlight(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{Now: time.Now})
	f.w.LimitChatSends(f.dest, 1.0/30, 1) // one send, then 30 s
	if _, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "stashd:first"); err != nil {
		t.Fatal(err)
	}
	next[tg.SendSucceeded](t, f.c, nil)
	f.w.HoldInFlight(true)
	if _, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "stashd:in flight"); err != nil {
		t.Fatal(err)
	}
	f.w.HoldInFlight(false)
	if n := f.w.LandInFlight(); n != 1 {
		t.Fatalf("LandInFlight landed %d requests, want 1", n)
	}
	if n := f.w.FloodWaitsSatOut("alice"); n != 1 {
		t.Fatalf("FloodWaitsSatOut = %d; want the landed send's wait sat out", n)
	}
	closeQuickly(t, f)
	if n := len(f.w.Messages(f.dest)); n != 1 {
		t.Errorf("destination holds %d messages; want only the first while the wait lasts", n)
	}
}

// A client closed (no ResendAfterRestart) while TDLib sits out a
// chat's wait for a send: the 429 was never handed to anyone, so the send
// is no ChatFlooded send, and the account's next client is under no wait.
func TestCloseDuringASitOutHandsOnNoWait(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{Now: time.Now})
	sitOutASend(t, f)
	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	if st := f.w.SendStats(); st.ChatFlooded != 0 {
		t.Errorf("send stats %+v; want ChatFlooded 0: no 429 past the sit-out reached any client", st)
	}
	c2 := f.w.Client("alice")
	defer c2.Close()
	if err := c2.LoadChats(f.ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // past floodWaitGrace
	if _, err := c2.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "stashd:next"); err != nil {
		t.Fatal(err)
	}
	if b := f.w.FloodWaitBreaches("alice"); len(b) != 0 {
		t.Errorf("breaches %v; no client was ever told to wait", b)
	}
}

// An album left pending by a closed client is one request when
// TDLib re-sends it at the next start (sendMultiMedia): the chat's limit
// judges it once and it sits out its waits as one, its messages landing
// together.
func TestResentAlbumSitsOutAsOne(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{Now: time.Now, ResendAfterRestart: true})
	f.w.LimitChatSends(f.dest, 0.5, 2) // two sends, then one every two seconds
	f.w.HoldSends(true)
	id := f.src.Document.File.RemoteID
	if _, err := f.c.SendDocumentAlbum(f.ctx, f.dest, 0, []tg.AlbumItem{{RemoteFileID: id, Caption: "m1"}, {RemoteFileID: id, Caption: "m2"}}, tg.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	f.w.HoldSends(false)
	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	c2 := f.w.Client("alice")
	defer c2.Close()
	landed := map[string]time.Time{}
	deadline := time.Now().Add(waitTimeout)
	for len(landed) < 2 && time.Now().Before(deadline) {
		for _, m := range f.w.Messages(f.dest) {
			if _, ok := landed[m.Caption]; !ok {
				landed[m.Caption] = time.Now()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(landed) != 2 {
		t.Fatalf("landed %v; want both of the album's messages", landed)
	}
	if gap := landed["m2"].Sub(landed["m1"]).Abs(); gap > 500*time.Millisecond {
		t.Errorf("the album's messages landed %s apart (sat out %d waits); want together, as one request", gap, f.w.FloodWaitsSatOut("alice"))
	}
}

// sitOutASend gives f's destination a limit of one send, then 30 s, sends
// twice, and returns once TDLib sits out the second send's wait.
func sitOutASend(t *testing.T, f sendFixture) {
	t.Helper()
	f.w.LimitChatSends(f.dest, 1.0/30, 1)
	if _, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "stashd:first"); err != nil {
		t.Fatal(err)
	}
	next[tg.SendSucceeded](t, f.c, nil)
	if _, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "stashd:held"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitTimeout)
	for f.w.FloodWaitsSatOut("alice") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("TDLib never sat out the chat's wait")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// closeQuickly closes f's client during a sit-out of 30 s and fails the
// test when Close waited for it.
func closeQuickly(t *testing.T, f sendFixture) {
	t.Helper()
	start := time.Now()
	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %s during a sit-out of 30 s", took)
	}
}
