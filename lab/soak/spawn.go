package soak

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Daemon is a milterd process started by Spawn.
type Daemon struct {
	Addr       string // milter, host:port on loopback
	MetricsURL string
	bin        string
	args       []string
	logOut     io.Writer
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
	d := &Daemon{Addr: milterAddr, MetricsURL: "http://" + httpAddr + "/metrics", dataDir: dir, bin: bin, logOut: logOut,
		args: append([]string{"run", "-listen", "inet:" + milterAddr, "-metrics-listen", httpAddr, "-data-dir", dir}, args...)}
	if err := d.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return d, nil
}

// start runs the process and waits until it is ready.
func (d *Daemon) start() error {
	d.exited = make(chan struct{})
	d.cmd = exec.Command(d.bin, d.args...)
	d.cmd.Stdout, d.cmd.Stderr = d.logOut, d.logOut
	if err := d.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", d.bin, err)
	}
	exited := d.exited
	go func() {
		d.err = d.cmd.Wait()
		close(exited)
	}()
	ready := strings.TrimSuffix(d.MetricsURL, "/metrics") + "/readyz"
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(ready)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("milterd exited before it was ready: %v", d.err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.cmd.Process.Kill()
			<-exited
			return errors.New("milterd not ready after 60s")
		}
	}
}

// Kill ends the process with SIGKILL, as the OOM killer or a crash
// would, and waits for it to be gone; its data directory stays.
func (d *Daemon) Kill() error {
	if err := d.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("kill milterd: %w", err)
	}
	<-d.exited
	return nil
}

// Restart starts the daemon again with the same arguments, ports and
// data directory (after Kill, or after it ended) and waits until it is
// ready.
func (d *Daemon) Restart() error {
	select {
	case <-d.exited:
	default:
		return errors.New("restart: milterd is still running")
	}
	return d.start()
}

// Signal sends sig to the process (SIGHUP reloads).
func (d *Daemon) Signal(sig os.Signal) error { return d.cmd.Process.Signal(sig) }

// DataDir is the daemon's data directory (the embedded store's file).
func (d *Daemon) DataDir() string { return d.dataDir }

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
