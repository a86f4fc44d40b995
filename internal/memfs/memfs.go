// Package memfs finds the memory file system (tmpfs) most Linux systems
// mount at /dev/shm, for scratch files whose disk cost would be noise:
// a disk file system's journal makes creating and unlinking many small
// files cost several times what it costs in memory, and on some machines
// that cost swings from one moment to the next.
package memfs

import (
	"golang.org/x/sys/unix"
)

// Path is where Linux systems mount a tmpfs for shared memory.
const Path = "/dev/shm"

// Dir returns Path when it is a tmpfs this process may write with at
// least room bytes free (a container's /dev/shm is often 64 MB), and
// false otherwise.
func Dir(room uint64) (string, bool) {
	var fs unix.Statfs_t
	if err := unix.Statfs(Path, &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		return "", false
	}
	if fs.Bavail*uint64(fs.Bsize) < room || unix.Access(Path, unix.W_OK) != nil {
		return "", false
	}
	return Path, true
}
