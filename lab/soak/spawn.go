package soak

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Daemon is a milterd process started by Spawn.
type Daemon struct {
	Addr       string // milter, host:port on loopback
	MetricsURL string
	cmd        *exec.Cmd
	dataDir    string
	exited     chan struct{}
	err        error
}

// Spawn starts "bin run" on free loopback ports with its own data
// directory (the embedded store unless args say otherwise), with the
// extra arguments, and waits until /readyz answers. Its log goes to
// logOut.
func Spawn(bin string, args []string, logOut io.Writer) (*Daemon, error) {
	milterAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "milterd-soak")
	if err != nil {
		return nil, err
	}
	d := &Daemon{Addr: milterAddr, MetricsURL: "http://" + httpAddr + "/metrics", dataDir: dir, exited: make(chan struct{})}
	d.cmd = exec.Command(bin, append([]string{"run", "-listen", "inet:" + milterAddr, "-metrics-listen", httpAddr, "-data-dir", dir}, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = logOut, logOut
	if err := d.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d, nil
			}
		}
		select {
		case <-d.exited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("milterd exited before it was ready: %v", d.err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.Stop()
			return nil, errors.New("milterd not ready after 30s")
		}
	}
}

// Pid is the daemon's process id.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Stop sends SIGTERM, waits for the drain (SIGKILL after 60 s), removes
// the data directory and returns how the process ended.
func (d *Daemon) Stop() error {
	defer os.RemoveAll(d.dataDir)
	select {
	case <-d.exited:
		return d.err
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		return d.err
	case <-time.After(60 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
		return errors.New("milterd did not stop within 60s of SIGTERM")
	}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
