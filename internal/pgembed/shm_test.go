package pgembed

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A killed server's shared memory segment still attached (a backend on its
// way out, counted by the kernel though no longer seen working in the data
// directory) holds the start: the new postmaster would refuse it ("pre-
// existing shared memory block is still in use"). Once it is detached the
// directory is startable.
func TestClearStaleWaitsForTheOldSegmentToBeDetached(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600)
	if err != nil {
		t.Skipf("no System V shared memory here: %v", err)
	}
	t.Cleanup(func() { _, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil) })
	mem, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// postmaster.pid as PostgreSQL writes it: the seventh line holds the
	// segment's key and id. Pid 0x7fffffff runs nothing.
	pidFile := filepath.Join(dataDir, "postmaster.pid")
	content := fmt.Sprintf("2147483647\n%s\n1764290000\n5432\n/tmp\n\n  9989266 %9d\nready   \n", dataDir, id)
	if err := os.WriteFile(pidFile, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, ok := shmID(pidFile); !ok || got != id {
		t.Fatalf("shmID = %d, %v; want %d", got, ok, id)
	}

	err = clearStale(t.Context(), dir, dataDir, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "still attached") {
		t.Fatalf("clearStale with the old segment attached = %v; want it to wait, then say the segment is still attached", err)
	}

	if err := os.WriteFile(pidFile, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = unix.SysvShmDetach(mem)
	}()
	if err := clearStale(t.Context(), dir, dataDir, 10*time.Second); err != nil {
		t.Fatalf("clearStale once the segment is detached: %v", err)
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("postmaster.pid left: %v", err)
	}
}
