package listener

import (
	"testing"

	"stashd/store"
	"stashd/tg"
)

func changed(s int64) tg.MessageContentChanged {
	return tg.MessageContentChanged{Chat: chat, Message: tg.MessageIDFromServer(s)}
}

// notes returns the server ids of the edits noted for chat.
func notes(t *testing.T, st *store.Store) []int64 {
	t.Helper()
	got, err := st.PendingEdits(t.Context(), []tg.ChatID{chat}, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, e := range got {
		ids = append(ids, e.Key.Message.ServerID())
	}
	return ids
}

func take(t *testing.T, l *Listener) Item {
	t.Helper()
	select {
	case it := <-l.Queue():
		return it
	default:
		t.Fatal("nothing queued")
		return Item{}
	}
}

// A content change below the watermark is noted in the store while its
// re-fetch waits, and forgotten once the re-fetch is handled.
func TestEditIsNotedUntilItsRefetchIsHandled(t *testing.T) {
	t.Parallel()
	l, st, _ := setup(t, 8, 10)
	l.HandleUpdate(changed(5))
	l.flush(t.Context())
	if got := notes(t, st); len(got) != 1 || got[0] != 5 {
		t.Fatalf("notes %v while the re-fetch is queued, want [5]", got)
	}
	it := take(t, l)
	if !it.Refetch || it.Message.ID.ServerID() != 5 || it.Edit == 0 {
		t.Fatalf("queued %+v, want a noted re-fetch of 5", it)
	}
	l.Done(it)
	l.flush(t.Context())
	if got := notes(t, st); len(got) != 0 {
		t.Errorf("notes %v after the re-fetch was handled, want none", got)
	}
}

// A message changed again while its re-fetch was in a worker's hands (which
// may have read it before the change) is fetched again, and its note kept
// until that second fetch is handled.
func TestEditChangedAgainDuringItsRefetchIsFetchedAgain(t *testing.T) {
	t.Parallel()
	l, st, _ := setup(t, 8, 10)
	l.HandleUpdate(changed(5))
	first := take(t, l)
	l.HandleUpdate(changed(5))
	if n := len(l.Queue()); n != 0 {
		t.Fatalf("%d items queued while the first re-fetch runs, want 0", n)
	}
	l.Done(first)
	l.flush(t.Context())
	second := take(t, l)
	if second.Edit <= first.Edit {
		t.Fatalf("second re-fetch's note %d, want after %d", second.Edit, first.Edit)
	}
	if got := notes(t, st); len(got) != 1 {
		t.Fatalf("notes %v before the second re-fetch was handled, want one", got)
	}
	l.Done(second)
	l.flush(t.Context())
	if got := notes(t, st); len(got) != 0 {
		t.Errorf("notes %v after the second re-fetch was handled, want none", got)
	}
}

// A content change that finds the queue full is noted, and its re-fetch
// queued once the queue has room, rather than left to the rescan.
func TestEditOnAFullQueueIsQueuedWhenRoomFrees(t *testing.T) {
	t.Parallel()
	l, st, _ := setup(t, 1, 10)
	l.CaughtUp(chat, store.Era{}, 10)
	l.HandleUpdate(doc(11))
	l.HandleUpdate(changed(5))
	l.flush(t.Context())
	if got := notes(t, st); len(got) != 1 {
		t.Fatalf("notes %v for a change that found the queue full, want one", got)
	}
	l.Done(take(t, l))
	l.flush(t.Context())
	if it := take(t, l); !it.Refetch || it.Message.ID.ServerID() != 5 {
		t.Fatalf("queued %+v once there was room, want the re-fetch of 5", it)
	}
}

// Notes an earlier process left (it stopped with the re-fetches queued)
// are queued by the next listener's first flush; an abandoned re-fetch
// keeps its note for the next start, without being queued again at once.
func TestNotedEditsAreQueuedAtStart(t *testing.T) {
	t.Parallel()
	l, st, _ := setup(t, 8, 10)
	keys := []store.PendingEdit{{Key: tg.MessageKey{Chat: chat, Message: tg.MessageIDFromServer(4)}, Seq: 1}}
	if err := st.NoteEdits(t.Context(), "a", keys); err != nil {
		t.Fatal(err)
	}
	l.flush(t.Context())
	it := take(t, l)
	if !it.Refetch || it.Message.ID.ServerID() != 4 || it.Edit != 1 {
		t.Fatalf("queued %+v at start, want the noted re-fetch of 4", it)
	}
	l.Release(it)
	l.flush(t.Context())
	if n := len(l.Queue()); n != 0 {
		t.Errorf("%d items queued after the re-fetch was abandoned, want 0", n)
	}
	if got := notes(t, st); len(got) != 1 {
		t.Errorf("notes %v after the re-fetch was abandoned, want it kept", got)
	}
}

// Notes of a chat the listener does not read (a source another account
// reads now) do not fill the page it loads at start; and a note another
// account wrote for a chat it reads now is queued by it.
func TestNotesOfOtherChatsDoNotHideThisOnesAtStart(t *testing.T) {
	t.Parallel()
	l, st, _ := setup(t, 8, 10)
	var others []store.PendingEdit
	for i := range maxEdits + 10 {
		others = append(others, store.PendingEdit{Key: tg.MessageKey{Chat: chat - 1, Message: tg.MessageIDFromServer(int64(i + 1))}, Seq: int64(i + 1)})
	}
	if err := st.NoteEdits(t.Context(), "a", others); err != nil {
		t.Fatal(err)
	}
	mine := []store.PendingEdit{{Key: tg.MessageKey{Chat: chat, Message: tg.MessageIDFromServer(4)}, Seq: int64(len(others) + 1)}}
	if err := st.NoteEdits(t.Context(), "b", mine); err != nil {
		t.Fatal(err)
	}
	l.flush(t.Context())
	if it := take(t, l); !it.Refetch || it.Message.ID.ServerID() != 4 {
		t.Fatalf("queued %+v at start, want the noted re-fetch of 4", it)
	}
}
