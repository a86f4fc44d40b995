package fifo

import "testing"

// Push never waits and reports the length; Take returns everything in
// order and empties the queue; Ready holds a token after a Push.
func TestQueue(t *testing.T) {
	q := New[int]()
	if !q.Empty() {
		t.Fatal("a new queue is not empty")
	}
	for i := range 3 {
		if n := q.Push(i); n != i+1 {
			t.Fatalf("Push = %d, want %d", n, i+1)
		}
	}
	select {
	case <-q.Ready():
	default:
		t.Fatal("no token after pushes")
	}
	got := q.Take()
	if len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 2 {
		t.Fatalf("Take = %v, want [0 1 2]", got)
	}
	if !q.Empty() || len(q.Take()) != 0 {
		t.Fatal("the queue is not empty after Take")
	}
}
