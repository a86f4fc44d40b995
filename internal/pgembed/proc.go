package pgembed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"stashd/internal/proc"
)

// serverUserName is the system user that runs the cluster when stashd runs
// as root; the postgresql package creates it.
const serverUserName = "postgres"

// runAs is the system user the server processes run as. A nil *runAs means
// the current user, which is the case whenever stashd is not root.
type runAs struct {
	name   string
	uid    uint32
	gid    uint32
	groups []uint32
}

// serverUser returns who must run the server: nil when not root, because
// then the current user does; the postgres system user when root, because
// PostgreSQL refuses to run as root.
func serverUser() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(serverUserName)
	if err != nil {
		return nil, fmt.Errorf("find system user %q to run PostgreSQL as (it refuses to run as root; the postgresql package creates that user): %w", serverUserName, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parse uid of %q: %w", serverUserName, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parse gid of %q: %w", serverUserName, err)
	}
	r := &runAs{name: serverUserName, uid: uint32(uid), gid: uint32(gid)}
	ids, _ := u.GroupIds() // best effort: without them only the primary group counts
	for _, id := range ids {
		if g, err := strconv.ParseUint(id, 10, 32); err == nil {
			r.groups = append(r.groups, uint32(g))
		}
	}
	return r, nil
}

// credential is what the server's processes run with; nil keeps ours.
func (r *runAs) credential() *syscall.Credential {
	if r == nil {
		return nil
	}
	return &syscall.Credential{Uid: r.uid, Gid: r.gid, Groups: r.groups}
}

// chown gives path to the server user; without one it does nothing.
func (r *runAs) chown(path string) error {
	if r == nil {
		return nil
	}
	if err := os.Chown(path, int(r.uid), int(r.gid)); err != nil {
		return fmt.Errorf("give %s to user %s: %w", path, r.name, err)
	}
	return nil
}

// checkReachable fails when the server user cannot traverse one of dir's
// ancestors, which would otherwise surface as a cryptic initdb error.
func (r *runAs) checkReachable(dir string) error {
	if r == nil {
		return nil
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("check %s: %w", p, err)
		}
		if !r.canSearch(fi) {
			return fmt.Errorf("directory %s is not reachable by user %s (PostgreSQL cannot run as root): %s is not searchable by it; choose a directory it can traverse, e.g. under /tmp or /var/lib", dir, r.name, p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func (r *runAs) canSearch(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true // cannot tell; let the server report it
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == r.uid:
		return perm&0o100 != 0
	case r.inGroup(st.Gid):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

func (r *runAs) inGroup(gid uint32) bool {
	if gid == r.gid {
		return true
	}
	for _, g := range r.groups {
		if g == gid {
			return true
		}
	}
	return false
}

// PostmasterPID returns the pid of the postmaster of the cluster whose
// data directory is dataDir, as its postmaster.pid records it, and whether
// it could be read.
func PostmasterPID(dataDir string) (int, bool) {
	return readPID(filepath.Join(dataDir, "postmaster.pid"))
}

// readPID returns the postmaster pid recorded in a postmaster.pid file.
func readPID(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// serverIn reports whether pid is a live postgres process working in
// dataDir: the postmaster and every backend chdir into the data directory,
// which tells a postmaster of this cluster from an unrelated process that
// reused its pid.
func serverIn(pid int, dataDir string) bool {
	if !proc.Alive(pid) {
		return false
	}
	proc := "/proc/" + strconv.Itoa(pid)
	cwd, err := os.Readlink(proc + "/cwd")
	if err != nil || cwd != dataDir {
		return false
	}
	exe, err := os.Readlink(proc + "/exe")
	return err == nil && filepath.Base(exe) == "postgres"
}

// serverProcesses lists the live postgres processes working in dataDir.
func serverProcesses(dataDir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if serverIn(pid, dataDir) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// clearStale makes a data directory left by a killed server startable: it
// refuses when the cluster's postmaster is still alive, removes a
// postmaster.pid whose process is gone (or is now some other process that
// reused the pid, which PostgreSQL itself would take for a live server),
// and waits for the killed postmaster's backends to exit, because a new
// postmaster refuses to start while they still hold its shared memory.
func clearStale(ctx context.Context, dir, dataDir string, wait time.Duration) error {
	pidFile := filepath.Join(dataDir, "postmaster.pid")
	pid, ok := readPID(pidFile)
	if !ok {
		return nil
	}
	if serverIn(pid, dataDir) {
		own, known := owner(dir)
		if !known || own == os.Getpid() || proc.Alive(own) {
			if known {
				return fmt.Errorf("cluster %s is already running (postmaster pid %d, started by pid %d)", dataDir, pid, own)
			}
			return fmt.Errorf("cluster %s is already running (postmaster pid %d)", dataDir, pid)
		}
		// Its stashd process died: the parent-death signal has asked it for
		// a fast shutdown already; ask again, in case, and wait.
		if err := orphanShutdown(ctx, pid, dataDir, wait); err != nil {
			return err
		}
	}
	shm, hasShm := shmID(pidFile)
	if err := os.Remove(pidFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", pidFile, err)
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		left := serverProcesses(dataDir)
		// The new postmaster looks at the segment's count of attached
		// processes, not at the processes: a backend on its way out can
		// be gone from its data directory and still be counted.
		attached := hasShm && shmAttached(shm)
		if len(left) == 0 && !attached {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for old server processes to exit: %w", ctx.Err())
		case <-deadline.C:
			if len(left) == 0 {
				return fmt.Errorf("the shared memory segment %d of cluster %s's old server is still attached after %v: terminate the processes using it (ipcs -mp)", shm, dataDir, wait)
			}
			return fmt.Errorf("old server processes %v of cluster %s are still running after %v: terminate them", left, dataDir, wait)
		case <-tick.C:
		}
	}
}

// shmID returns the id of the System V shared memory segment a
// postmaster.pid records (its seventh line holds the segment's key and
// id), and whether there is one.
func shmID(pidFile string) (int, bool) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 {
		return 0, false
	}
	f := strings.Fields(lines[6])
	if len(f) != 2 {
		return 0, false
	}
	id, err := strconv.Atoi(f[1])
	return id, err == nil && id >= 0
}

// shmAttached reports whether processes are attached to the shared memory
// segment id; false when it is gone.
func shmAttached(id int) bool {
	var d unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &d); err != nil {
		return false
	}
	return d.Nattch > 0
}

// orphanShutdown asks the postmaster pid of a dead stashd process for a
// fast shutdown and waits for it to exit.
func orphanShutdown(ctx context.Context, pid int, dataDir string, wait time.Duration) error {
	_ = syscall.Kill(pid, syscall.SIGINT)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for serverIn(pid, dataDir) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the server of a dead stashd process to stop: %w", ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("the server of a dead stashd process (postmaster pid %d) has not stopped after %v: stop it", pid, wait)
		case <-tick.C:
		}
	}
	return nil
}
