package tdlib

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// One TDLib directory, one client: a second lock on it fails at once with
// an error naming the directory and the holder's pid; once released, it
// can be taken again.
func TestLockDirRefusesASecondClient(t *testing.T) {
	dir := t.TempDir()
	first, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockDir(dir)
	var locked *DirLockedError
	if !errors.As(err, &locked) {
		t.Fatalf("second lock = %v, want a DirLockedError", err)
	}
	host, _ := os.Hostname()
	if want := fmt.Sprintf("%s:%d", host, os.Getpid()); locked.Holder != want || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), want) {
		t.Errorf("error %q (holder %q): want the directory and holder %s", err, locked.Holder, want)
	}
	first.Unlock()
	first.Unlock()
	again, err := LockDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	again.Unlock()
}
