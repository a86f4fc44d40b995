package tdlib

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// LockFile is the lock file stashd keeps in an account's TDLib database
// directory while a TDLib client runs on it. It holds the holder's
// "host:pid".
const LockFile = "stashd.lock"

// DirLockedError is returned when another TDLib client of stashd holds an
// account's TDLib directory: TDLib's database must never be opened by two
// clients at once (two instances on one shared state directory, or a login
// while the daemon runs).
type DirLockedError struct {
	Dir string
	// Holder is the holder's "host:pid" as it wrote it ("" if unreadable).
	Holder string
}

func (e *DirLockedError) Error() string {
	return fmt.Sprintf("TDLib directory %s is in use by process %s: one TDLib client per directory (stop it, or give this instance its own state directory)",
		e.Dir, cmp.Or(e.Holder, "(unknown)"))
}

// DirLock is an exclusive flock on an account's TDLib database directory.
type DirLock struct{ f *os.File }

// LockDir takes the exclusive lock of dir (created if missing), without
// waiting: when another process (or another client of this one) holds it,
// it fails with a *DirLockedError naming the holder. The lock is released
// by Unlock or when the process ends, however it ends.
func LockDir(dir string) (*DirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lock TDLib directory: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock TDLib directory: %w", err)
	}
	// flock locks belong to the open file: a second open in this process
	// conflicts as another process's would.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			return nil, &DirLockedError{Dir: dir, Holder: strings.TrimSpace(string(b))}
		}
		return nil, fmt.Errorf("lock TDLib directory %s: %w", dir, err)
	}
	host, _ := os.Hostname()
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(fmt.Sprintf("%s:%d\n", host, os.Getpid())), 0)
	}
	return &DirLock{f: f}, nil
}

// Unlock releases the lock; unlocking twice does nothing.
func (l *DirLock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Close()
	l.f = nil
}
