package tgsim

import (
	"fmt"
	"time"
)

// Every client World.Client (or ClientIn) starts is a session of its
// account, numbered in start order (Client.Session). Two stashd instances
// must never run one account at once: once a newer session of an account has made a request,
// a request from an older session of that account still open is an
// overlap. A session that stays open but silent (a paused process, its
// connection still up) is no overlap; one that wakes and makes a request
// after its successor started working is. Only requests count (calls that
// reach the simulated server, as World.Calls counts them); updates the
// world pushes to an old session are not its doing.

// maxOverlapExamples bounds the overlaps World.SessionOverlaps keeps: the
// first ones show what went wrong, and let a harness that froze a process
// tell the request it had in flight at the freeze (SessionOverlap.At); the
// count says how often.
const maxOverlapExamples = 1000

// SessionOverlap is a request an older session of an account made after a
// newer session of the same account had made one.
type SessionOverlap struct {
	Account string `json:"account"`
	// Older is the session that made the request, Newer the newest session
	// of the account that had made a request by then.
	Older  int32  `json:"older_session"`
	Newer  int32  `json:"newer_session"`
	Method string `json:"method"`
	// At is when the world received the request (its clock), Dir the
	// older session's database directory ("" for World.Client's).
	At  time.Time `json:"at"`
	Dir string    `json:"dir,omitempty"`
}

// String describes the overlap in one line.
func (o SessionOverlap) String() string {
	return fmt.Sprintf("account %s: session %d made %s after session %d had started making requests",
		o.Account, o.Older, o.Method, o.Newer)
}

// sessionLog is the world's record of overlapping sessions.
type sessionLog struct {
	overlaps int
	examples []SessionOverlap
}

// Session returns the client's session number: clients are numbered in
// the order World.Client started them, over every account, from 1.
func (c *Client) Session() int32 { return c.session }

// SessionOverlaps returns how many overlapping requests the world has seen
// and the first ones of them (at most 1,000).
func (w *World) SessionOverlaps() (int, []SessionOverlap) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sessions.overlaps, append([]SessionOverlap(nil), w.sessions.examples...)
}

// noteRequest records that open client c made a request of method, and
// counts it as an overlap when a newer session of its account made one
// before. w.mu is held.
func (w *World) noteRequest(a *account, c *Client, method string) {
	if c.session >= a.activeSession {
		a.activeSession = c.session
		return
	}
	w.sessions.overlaps++
	if len(w.sessions.examples) < maxOverlapExamples {
		w.sessions.examples = append(w.sessions.examples,
			SessionOverlap{Account: a.name, Older: c.session, Newer: a.activeSession, Method: method,
				At: w.cfg.Now(), Dir: c.dir})
	}
}

// takeResend removes and returns the sends that closed clients on the
// database directory dir left pending: TDLib keeps them in that
// directory's binlog, so only an instance on it re-sends them. w.mu is
// held.
func (a *account) takeResend(dir string) []*pendingSend {
	var out, keep []*pendingSend
	for _, ps := range a.resend {
		if ps.c.dir == dir {
			out = append(out, ps)
		} else {
			keep = append(keep, ps)
		}
	}
	a.resend = keep
	return out
}
