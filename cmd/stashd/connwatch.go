package main

import (
	"sync"

	"stashd/tg"
)

// connWatch follows a client's connection state while draining its
// updates (an adapter's receiver blocks on a full update channel).
type connWatch struct {
	ready chan struct{}
	mu    sync.Mutex
	state tg.ConnectionState
}

func watchConnection(c tg.Client) *connWatch {
	w := &connWatch{ready: make(chan struct{}), state: "unknown"}
	go func() {
		once := sync.Once{}
		for u := range c.Updates() {
			if s, ok := u.(tg.ConnectionStateChanged); ok {
				w.mu.Lock()
				w.state = s.State
				w.mu.Unlock()
				if s.State == tg.ConnReady {
					once.Do(func() { close(w.ready) })
				}
			}
		}
	}()
	return w
}

func (w *connWatch) last() tg.ConnectionState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}
