package bench

import (
	"crypto/sha256"
	"os"
	"testing"
	"time"
)

// procTimes reads a process's parent and CPU time from /proc: this test's
// own, after burning a few ticks of CPU.
func TestProcTimesReadsThisProcess(t *testing.T) {
	sum := sha256.Sum256(nil)
	for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); {
		sum = sha256.Sum256(sum[:])
	}
	st, err := procTimes(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != os.Getppid() {
		t.Errorf("parent %d, want %d", st.ppid, os.Getppid())
	}
	if st.own < clockTick {
		t.Errorf("CPU time %v after 50 ms of hashing, want at least a tick", st.own)
	}
	if _, err := procTimes(-1); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
