package chaos

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// proc is a child process the harness started.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited
	err    error         // its exit status; read after exited
}

// start starts name with args and env (added to the harness's own), its
// output appended to logPath. The child gets SIGKILL if the harness dies:
// the parent-death signal fires when the forking thread exits, so the
// goroutine that starts and waits for the child holds its thread.
func start(name string, args, env []string, logPath string, stdout io.Writer) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logf
	cmd.Stdout = logf
	if stdout != nil {
		cmd.Stdout = stdout
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logf.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }
