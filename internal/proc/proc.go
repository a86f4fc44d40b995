// Package proc answers questions about local processes from /proc.
package proc

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// Alive reports whether pid is a running process; a zombie is dead
// (it answers kill(pid, 0) but holds nothing any more).
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false
		}
		err := syscall.Kill(pid, 0)
		return err == nil || errors.Is(err, syscall.EPERM)
	}
	// The state follows the command name, which is in parentheses and may
	// itself contain ") ".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	state := b[i+2]
	return state != 'Z' && state != 'X'
}
