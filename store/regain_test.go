package store_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"stashd/store"
	"stashd/tg"
)

// A letter exhausted because the source's own account could not read the
// chat records the source inaccessible, whether or not a scan saw the
// loss. A scan that fails for want of access leaves it so, and so does
// one that read nothing from the server; the first scan that read the
// source records it readable and makes the letters lost for want of
// access due at once (other letters keep their state), and the scans
// after it leave the letters alone.
func TestNoAccessLettersAreDueOnceTheSourceIsReadAgain(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	const chat = tg.ChatID(-77)
	if err := st.EnsureSource(ctx, store.Source{ChatID: chat, Account: "a"}); err != nil {
		t.Fatal(err)
	}
	lost := tg.MessageKey{Chat: chat, Message: 3 << 20}
	broken := tg.MessageKey{Chat: chat, Message: 4 << 20}
	record := func(key tg.MessageKey, class string) {
		t.Helper()
		if err := st.RecordDeadLetter(ctx, store.DeadLetter{Key: key, Account: "a", ErrorClass: class,
			Reason: "download: Can't access the chat"}, store.SourceMessage{}); err != nil {
			t.Fatal(err)
		}
	}
	record(lost, store.ClassNoAccess)
	record(broken, string(tg.ClassPermanent))
	state := func(key tg.MessageKey) store.DeadLetterState {
		t.Helper()
		var s string
		if err := st.Pool().QueryRow(ctx, `SELECT state FROM dead_letters WHERE chat_id = $1 AND message_id = $2`,
			int64(key.Chat), int64(key.Message)).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return store.DeadLetterState(s)
	}
	src, err := st.GetSource(ctx, chat)
	if err != nil {
		t.Fatal(err)
	}
	if src.Access != store.AccessLost || src.AccessReason == "" {
		t.Fatalf("after the letter the source's access is %q (%q), want inaccessible with the letter's reason", src.Access, src.AccessReason)
	}

	denied := errors.Join(errors.New("search: Can't access the chat"), tg.ErrNoAccess)
	if src, err = st.FinishScan(ctx, chat, "", store.ScanOutcome{Err: denied, Permanent: true, NoAccess: true}, policy); err != nil {
		t.Fatal(err)
	}
	if src.Access != store.AccessLost || state(lost) != store.DeadExhausted {
		t.Fatalf("after a scan refused access: source %q, letter %s; want inaccessible, exhausted", src.Access, state(lost))
	}

	if src, err = st.FinishScan(ctx, chat, "", store.ScanOutcome{}, policy); err != nil {
		t.Fatal(err)
	}
	if src.Access != store.AccessLost || state(lost) != store.DeadExhausted {
		t.Fatalf("after a scan that read nothing from the server: source %q, letter %s; want inaccessible, exhausted", src.Access, state(lost))
	}

	if src, err = st.FinishScan(ctx, chat, "", store.ScanOutcome{Read: true}, policy); err != nil {
		t.Fatal(err)
	}
	if src.Access != store.AccessOK || src.AccessReason != "" {
		t.Errorf("after a scan that read the source its access is %q (%q), want ok", src.Access, src.AccessReason)
	}
	if got := state(lost); got != store.DeadPending {
		t.Errorf("the letter lost for want of access is %s once the source was read again, want pending", got)
	}
	if got := state(broken); got != store.DeadExhausted {
		t.Errorf("the permanent letter is %s, want exhausted still", got)
	}
	due, err := st.DueDeadLetters(ctx, "a", time.Now().Add(time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].Key != lost {
		t.Errorf("due letters %+v, want the one lost for want of access", due)
	}

	// Taken off the timer by hand: a later scan of a readable source
	// does not bring it back.
	if _, err := st.Pool().Exec(ctx, `UPDATE dead_letters SET state = 'exhausted', next_attempt_at = NULL
		WHERE chat_id = $1 AND message_id = $2`, int64(lost.Chat), int64(lost.Message)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishScan(ctx, chat, "", store.ScanOutcome{Read: true}, policy); err != nil {
		t.Fatal(err)
	}
	if got := state(lost); got != store.DeadExhausted {
		t.Errorf("a scan of a source never recorded inaccessible since made the letter %s", got)
	}
}

// Letters of one source lost for want of access, recorded side by side
// (several workers failing at once), all go in: each writes the source's
// row, which they take in turn.
func TestNoAccessLettersRecordedTogether(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	const chat = tg.ChatID(-78)
	if err := st.EnsureSource(ctx, store.Source{ChatID: chat, Account: "a"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			key := tg.MessageKey{Chat: chat, Message: tg.MessageID(i+1) << 20}
			errs <- st.RecordDeadLetter(ctx, store.DeadLetter{Key: key, Account: "a", ErrorClass: store.ClassNoAccess,
				Reason: fmt.Sprintf("download %d: Can't access the chat", i)}, store.SourceMessage{FileName: "x.zip"})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	letters, err := st.DeadLetters(ctx, store.DeadExhausted, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 16 {
		t.Errorf("%d letters recorded, want 16", len(letters))
	}
}

// A public chat read without joining it is recorded not_member, and stays
// so through scans without error, until one follows TDLib's report of the
// account a member (it joined, or the report of its return came after a
// scan had read the chat): that scan records the access ok.
func TestNotMemberBecomesOkOnceTDLibReportsAMember(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	const chat = tg.ChatID(-78)
	if err := st.EnsureSource(ctx, store.Source{ChatID: chat, Account: "a"}); err != nil {
		t.Fatal(err)
	}
	scan := func(o store.ScanOutcome) string {
		t.Helper()
		if _, err := st.ClaimSources(ctx, "a", "o", []tg.ChatID{chat}, time.Minute); err != nil {
			t.Fatal(err)
		}
		src, err := st.FinishScan(ctx, chat, "o", o, store.ScanPolicy{})
		if err != nil {
			t.Fatal(err)
		}
		return src.Access
	}
	if got := scan(store.ScanOutcome{Read: true, NotMember: true}); got != store.AccessNotMember {
		t.Fatalf("a chat read from outside: access %q, want %q", got, store.AccessNotMember)
	}
	if got := scan(store.ScanOutcome{Read: true}); got != store.AccessNotMember {
		t.Errorf("a later scan without a member's report: access %q, want %q kept", got, store.AccessNotMember)
	}
	if got := scan(store.ScanOutcome{Read: true, Member: true}); got != store.AccessOK {
		t.Errorf("a scan after TDLib reported a member: access %q, want %q", got, store.AccessOK)
	}
}
