package chaos

import (
	"path/filepath"
	"strings"
	"time"

	"stashd/harness/audit"
)

// A paused daemon may stop between its lease gate's last look and the
// write of the request that look let through: the gate is asked just
// before each request, but nothing a process does can fence a request
// it is already writing when SIGSTOP lands. That request reaches the world
// right after the SIGCONT, once another instance runs the account, and
// the world counts it as a session overlap. The harness knows its
// freezes, so it tells that request apart: an overlap made by a session
// of the paused instance between the freeze and freezeGrace after the
// continue is a request in flight at the freeze, counted apart
// (Report.InFlightAtFreeze); any later request of the old session is
// an overlap and fails the run. The gate itself is proved by the
// daemon's and tg's tests, which make requests after a lease's deadline
// and see every one refused.

// freezeGrace is how long after the SIGCONT a request the paused process
// had in flight may take to reach the world: the process writes it at
// once, the world's reader takes it in a scheduler's quantum or two.
const freezeGrace = 250 * time.Millisecond

// freeze is one pause of an instance's process.
type freeze struct {
	dataDir  string
	from, to time.Time
}

// excuseFrozen moves out of t the overlaps that are requests in flight
// at one of the harness's freezes, and returns how many it moved. An
// overlap the world counted but did not keep (past its examples) stays.
func excuseFrozen(t *audit.Truth, freezes []freeze) int {
	kept := t.OverlapExamples[:0:0]
	excused := 0
	for _, o := range t.OverlapExamples {
		if inFreeze(o.Dir, o.At, freezes) {
			excused++
			continue
		}
		kept = append(kept, o)
	}
	t.OverlapExamples = kept
	t.SessionOverlaps -= excused
	return excused
}

// inFreeze reports whether a request of the session on database
// directory dir, received at, came from a frozen instance in flight.
func inFreeze(dir string, at time.Time, freezes []freeze) bool {
	for _, f := range freezes {
		// The instance's accounts' directories are <data dir>/accounts/<name>/database;
		// the world may see them relative to another working directory.
		mark := string(filepath.Separator) + filepath.Base(f.dataDir) + string(filepath.Separator) + "accounts" + string(filepath.Separator)
		if dir == "" || !strings.Contains(string(filepath.Separator)+dir, mark) {
			continue
		}
		if !at.Before(f.from) && !at.After(f.to.Add(freezeGrace)) {
			return true
		}
	}
	return false
}
