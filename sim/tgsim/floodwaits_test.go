package tgsim

import (
	"errors"
	"testing"
	"time"

	"stashd/tg"
)

// A request made inside a 429's wait is noted, by what the wait holds: one
// answering another request holds every server request of the account
// (not its local ones), and ends when its retry-after has passed.
func TestRequestInsideAnAccountFloodWaitIsNoted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	f.w.InjectFloodWait("alice", tg.MethodGetMe, time.Minute, 1)
	var fw *tg.FloodWaitError
	if _, err := f.c.GetMe(f.ctx); !errors.As(err, &fw) {
		t.Fatalf("GetMe = %v; want the injected flood wait", err)
	}
	if b := f.w.FloodWaitBreaches("alice"); len(b) != 0 {
		t.Fatalf("the request the 429 answered counts as inside its wait: %+v", b)
	}
	if _, err := f.c.GetChat(f.ctx, f.chat); err != nil { // local: TDLib answers it
		t.Fatal(err)
	}
	// Within floodWaitGrace of the 429: decided on before it was read.
	f.clk.Advance(floodWaitGrace / 2)
	if _, err := f.c.GetMe(f.ctx); err != nil {
		t.Fatal(err)
	}
	if b := f.w.FloodWaitBreaches("alice"); len(b) != 0 {
		t.Fatalf("a request %v after the 429 counts as inside its wait: %+v", floodWaitGrace/2, b)
	}
	f.clk.Advance(30*time.Second - floodWaitGrace/2)
	if _, err := f.c.GetMe(f.ctx); err != nil {
		t.Fatal(err)
	}
	b := f.w.FloodWaitBreaches("alice")
	if len(b) != 1 || b[0].Method != tg.MethodGetMe || b[0].Left != 30*time.Second || b[0].Resend {
		t.Fatalf("breaches = %+v; want the getMe half-way through the wait", b)
	}
	f.clk.Advance(30 * time.Second)
	if _, err := f.c.GetMe(f.ctx); err != nil {
		t.Fatal(err)
	}
	if b := f.w.FloodWaitBreaches("alice"); len(b) != 1 {
		t.Fatalf("breaches = %+v; a request after the wait is none", b)
	}
	n, first := f.w.AllFloodWaitBreaches(10)
	if n != 1 || len(first) != 1 || first[0].String() != "account alice: getMe with 30s of a flood wait left" {
		t.Fatalf("every account's breaches = %d, %v; want alice's getMe", n, first)
	}
}

// A chat's send limit refusing a message holds the account's sends to
// that chat. TDLib's re-send, at the next start on the directory, of a
// message the closed client left pending reaches the server inside that
// wait: it is noted as a re-send, and the chat's limit refuses it again.
func TestResendInsideAChatFloodWaitIsNotedAndRefused(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, Config{ResendAfterRestart: true})
	f.w.LimitChatSends(f.dest, 1.0/120, 1) // one send, then two minutes: past what TDLib sits out
	f.w.HoldSends(true)
	if _, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "stashd:pending"); err != nil {
		t.Fatal(err)
	}
	f.w.HoldSends(false)
	if _, err := f.c.SendDocument(f.ctx, f.dest, f.src.Document.File.RemoteID, "stashd:refused"); err != nil {
		t.Fatal(err)
	}
	var fw *tg.FloodWaitError
	if failed := next[tg.SendFailed](t, f.c, nil); !errors.As(failed.Err, &fw) {
		t.Fatalf("second send failed with %v; want the chat's 429", failed.Err)
	}
	// Another chat is not held.
	other := f.w.AddChat(tg.KindChannel, "other", "alice")
	if _, err := f.c.SendDocument(f.ctx, other, f.src.Document.File.RemoteID, "stashd:other"); err != nil {
		t.Fatal(err)
	}
	if b := f.w.FloodWaitBreaches("alice"); len(b) != 0 {
		t.Fatalf("breaches = %+v; want none yet", b)
	}
	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(10 * time.Second)
	c2 := f.w.Client("alice")
	defer c2.Close()
	b := f.w.FloodWaitBreaches("alice")
	if len(b) != 1 || !b[0].Resend || b[0].Chat != f.dest || b[0].Method != tg.MethodSendMessage || b[0].Left != 110*time.Second {
		t.Fatalf("breaches = %+v; want TDLib's re-send to the destination, 110 s before the wait's end", b)
	}
	failed := next[tg.SendFailed](t, c2, nil)
	if !errors.As(failed.Err, &fw) || f.w.ChatFlooded(f.dest) != 2 || len(f.w.Messages(f.dest)) != 0 {
		t.Fatalf("re-send failed with %v, %d refused, destination %v; want it refused again by the chat's limit",
			failed.Err, f.w.ChatFlooded(f.dest), f.w.Messages(f.dest))
	}
}
