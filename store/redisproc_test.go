package store_test

// A stand-in for internal/testenv until it lands on main: real
// redis-server processes on free ports in temporary directories.

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// program finds an external program, failing under CI=true and skipping
// loudly otherwise.
func program(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (required under CI=true): %v", name, err)
		}
		t.Skipf("SKIP: %s not found, test needs a real %s: %v", name, name, err)
	}
	return p
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// redisProc is one redis-server started by a test.
type redisProc struct {
	t    testing.TB
	bin  string
	Addr string
	Port int
	Dir  string
	args []string
	cmd  *exec.Cmd
	tls  *tls.Config // readiness probe over TLS when set
}

// startRedis starts redis-server with extra config args ("--key value").
func startRedis(t testing.TB, extra ...string) *redisProc {
	t.Helper()
	r := &redisProc{t: t, bin: program(t, "redis-server"), Port: freePort(t), Dir: t.TempDir()}
	r.Addr = "127.0.0.1:" + strconv.Itoa(r.Port)
	r.args = append([]string{
		"--port", strconv.Itoa(r.Port), "--bind", "127.0.0.1", "--dir", r.Dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--logfile", filepath.Join(r.Dir, "redis.log"),
	}, extra...)
	t.Cleanup(r.Stop) // first: a failed start must not leak the process
	r.Start()
	return r
}

// startRedisTLS starts redis-server serving TLS only, with the given
// certificate files; probe is the client TLS configuration for the
// readiness check.
func startRedisTLS(t testing.TB, probe *tls.Config, extra ...string) *redisProc {
	t.Helper()
	r := &redisProc{t: t, bin: program(t, "redis-server"), Port: freePort(t), Dir: t.TempDir(), tls: probe}
	r.Addr = "127.0.0.1:" + strconv.Itoa(r.Port)
	r.args = append([]string{
		"--port", "0", "--tls-port", strconv.Itoa(r.Port), "--bind", "127.0.0.1", "--dir", r.Dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--logfile", filepath.Join(r.Dir, "redis.log"),
	}, extra...)
	t.Cleanup(r.Stop)
	r.Start()
	return r
}

// Start (re)starts the server with the same port, dir and args.
func (r *redisProc) Start() {
	r.t.Helper()
	r.cmd = exec.Command(r.bin, r.args...)
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var c net.Conn
		var err error
		if r.tls != nil {
			c, err = tls.DialWithDialer(&net.Dialer{Timeout: 100 * time.Millisecond}, "tcp", r.Addr, r.tls)
		} else {
			c, err = net.DialTimeout("tcp", r.Addr, 100*time.Millisecond)
		}
		if err == nil {
			fmt.Fprintf(c, "PING\r\n")
			buf := make([]byte, 64)
			c.SetReadDeadline(time.Now().Add(time.Second))
			n, _ := c.Read(buf)
			c.Close()
			if reply := string(buf[:n]); strings.HasPrefix(reply, "+PONG") || strings.HasPrefix(reply, "-NOAUTH") {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(r.Dir, "redis.log"))
	r.Stop()
	r.t.Fatalf("redis-server on %s did not answer; log:\n%s", r.Addr, log)
}

// Stop kills the server (SIGTERM, which saves when persistence is on) and
// waits for it.
func (r *redisProc) Stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	r.cmd.Process.Signal(syscall.SIGCONT) // in case a test left it stopped
	r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		r.cmd.Process.Kill()
		<-done
	}
	r.cmd = nil
}

// Signal sends sig to the server (SIGSTOP/SIGCONT to freeze it).
func (r *redisProc) Signal(sig syscall.Signal) {
	r.t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("signal redis-server: %v", err)
	}
}

// CLI runs redis-cli against the server.
func (r *redisProc) CLI(args ...string) string {
	r.t.Helper()
	bin := program(r.t, "redis-cli")
	out, err := exec.Command(bin, append([]string{"-p", strconv.Itoa(r.Port)}, args...)...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// redisCluster is a 3-master Redis Cluster started by a test.
type redisCluster struct {
	Nodes []*redisProc
	Addrs []string
}

func startRedisCluster(t testing.TB) *redisCluster {
	t.Helper()
	cli := program(t, "redis-cli")
	c := &redisCluster{}
	for range 3 {
		n := startRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000")
		c.Nodes = append(c.Nodes, n)
		c.Addrs = append(c.Addrs, n.Addr)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Wait until every node reports the cluster as ok.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		for {
			if strings.Contains(n.CLI("cluster", "info"), "cluster_state:ok") {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("cluster on %v not ok in time", c.Addrs)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return c
}
