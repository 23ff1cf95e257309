package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// process is one started external program and the result of waiting for it.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when Wait returned
	err  error         // Wait's result, valid after done is closed
}

// startProcess starts cmd in its own process group (so a stuck tree can be
// killed at once) with a parent-death signal where the OS supports one (so a
// test binary killed by a timeout does not leave servers behind).
func startProcess(cmd *exec.Cmd) (*process, error) {
	return startWith(cmd, sysProcAttr())
}

func startWith(cmd *exec.Cmd, attr *syscall.SysProcAttr) (*process, error) {
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) signal(sig syscall.Signal) error {
	if p.exited() {
		return errors.New("process already exited")
	}
	return p.cmd.Process.Signal(sig)
}

// stop sends SIGCONT (a SIGSTOPped process would not act on SIGTERM) and
// SIGTERM, waits up to grace, then SIGKILLs the whole process group.
// It reports whether the process exited on SIGTERM.
func (p *process) stop(grace time.Duration) bool {
	if p.exited() {
		return true
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		p.waitGroupGone(grace)
		return true
	case <-time.After(grace):
	}
	p.kill()
	return false
}

// waitGroupGone waits until no live process of the group is left
// (Postfix's master exits on SIGTERM without waiting for its daemons, which
// hold the listening sockets), SIGKILLing the rest after timeout.
func (p *process) waitGroupGone(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for groupAlive(p.pid()) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kill SIGKILLs the process group and waits for the leader to be reaped.
func (p *process) kill() {
	if !p.exited() {
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// readTail returns the last max bytes of the file at path, for failure
// messages; a read error is returned as text instead.
func readTail(path string, max int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	if len(b) > max {
		b = append([]byte("...\n"), b[len(b)-max:]...)
	}
	return string(b)
}
