package store_test

import (
	"context"
	"testing"
	"time"

	"stashd/store"
	"stashd/tg"
)

// The account a source was taken from, draining its queue, records a dead
// letter of the source while another account takes the source over: the
// letter must end with the new account, whose retry loop alone fetches it,
// whichever of the two commits first. Here the record is held up (another
// transaction inserts the same letter and has not committed) after it
// looked up the source's account.
func TestDeadLetterRecordedDuringATakeOverGoesToTheNewAccount(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	const chat = tg.ChatID(-4242)
	key := tg.MessageKey{Chat: chat, Message: 7 << 20}
	for _, a := range []string{"old", "new"} {
		if err := st.UpsertAccount(ctx, a, 0, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.EnsureSource(ctx, store.Source{ChatID: chat, Account: "old"}); err != nil {
		t.Fatal(err)
	}
	blocker, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(context.Background()) }()
	if _, err := blocker.Exec(ctx, `INSERT INTO dead_letters (chat_id, message_id, account, error_class, reason, attempts, state)
		VALUES ($1, $2, 'old', 'retryable', 'x', 1, 'pending')`, int64(key.Chat), int64(key.Message)); err != nil {
		t.Fatal(err)
	}
	recorded := make(chan error, 1)
	go func() {
		recorded <- st.RecordDeadLetter(ctx, store.DeadLetter{Key: key, Account: "old", ErrorClass: "retryable",
			Reason: "fetch failed", NextAttemptAt: time.Now().Add(time.Hour)}, store.SourceMessage{})
	}()
	waitLockWaiters(t, st, 1, nil)
	taken := make(chan error, 1)
	go func() {
		moved, err := st.TakeSource(ctx, chat, "old", "new")
		if err == nil && !moved {
			t.Error("the source was not taken over")
		}
		taken <- err
	}()
	// The take-over commits, or waits for the record.
	waitLockWaiters(t, st, 2, taken)
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-recorded; err != nil {
		t.Fatal(err)
	}
	if err := <-taken; err != nil {
		t.Fatal(err)
	}
	var account string
	if err := st.Pool().QueryRow(ctx, `SELECT account FROM dead_letters WHERE chat_id = $1 AND message_id = $2`,
		int64(key.Chat), int64(key.Message)).Scan(&account); err != nil {
		t.Fatal(err)
	}
	if account != "new" {
		t.Errorf("the letter is %q's, the account the source was taken from; want the new account's", account)
	}
}
