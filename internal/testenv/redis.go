package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// RedisOptions configures StartRedis. The zero value is a plain server with
// no password, no persistence (save "", appendonly no) on a free port.
type RedisOptions struct {
	// Password sets requirepass, the password of the default user.
	Password string
	// ACLUser and ACLPassword add an ACL user with every permission
	// (~* &* +@all). When set, Client, Do and ClientOptions log in as it.
	ACLUser, ACLPassword string
	// TLS serves TLS only (port 0, tls-port PORT) with a server certificate
	// for 127.0.0.1 and localhost signed by a CA generated for this server;
	// clients get it from TLSConfig or CACertPEM.
	TLS bool
	// TLSClientAuth requires client certificates (tls-auth-clients yes);
	// TLSConfig then carries a client certificate from the same CA.
	TLSClientAuth bool
	// Config holds extra redis.conf directives, one per element, e.g.
	// "maxmemory 10mb". They come last, so they override the defaults.
	Config []string

	// clusterNode makes the server a cluster node on a port whose bus port
	// (port+10000) is also free.
	clusterNode bool
	// sentinel runs the server in Sentinel mode (--sentinel).
	sentinel bool
}

// Redis is a real redis-server process owned by one test.
type Redis struct {
	t    testing.TB
	opts RedisOptions
	bin  string
	dir  string
	port int

	ca        *CA
	tlsConfig *tls.Config // client side; nil without TLS

	mu         sync.Mutex
	proc       *process
	pauseTimer *time.Timer
	client     *redis.Client
}

// redisStartTimeout bounds how long a start waits for PING to answer.
const redisStartTimeout = 15 * time.Second

// StartRedis starts redis-server on 127.0.0.1 with its own port and its own
// t.TempDir(), waits until it answers PING, and stops it in t.Cleanup.
func StartRedis(t testing.TB, opts RedisOptions) *Redis {
	t.Helper()
	bin := Program(t, "redis-server")
	r := &Redis{t: t, opts: opts, bin: bin, dir: t.TempDir()}
	if opts.TLS {
		ca, err := newCA()
		if err != nil {
			t.Fatalf("testenv: redis: %v", err)
		}
		r.ca = ca
		if _, err := ca.WriteCert(r.dir, "server", "127.0.0.1", "localhost"); err != nil {
			t.Fatalf("testenv: redis: %v", err)
		}
		if err := os.WriteFile(filepath.Join(r.dir, "ca.crt"), ca.CertPEM, 0o644); err != nil {
			t.Fatalf("testenv: redis: write CA: %v", err)
		}
		var clientCert *tls.Certificate
		if opts.TLSClientAuth {
			certPEM, keyPEM, err := ca.Issue("testenv-client")
			if err != nil {
				t.Fatalf("testenv: redis: %v", err)
			}
			c, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatalf("testenv: redis: load client certificate: %v", err)
			}
			clientCert = &c
		}
		r.tlsConfig = ca.ClientTLSConfig("127.0.0.1", clientCert)
	}
	t.Cleanup(r.cleanup)

	startOnFreePort(t, "redis-server", func() error {
		port, err := r.pickPort()
		if err != nil {
			t.Fatalf("testenv: redis: %v", err)
		}
		r.port = port
		return r.start()
	})
	return r
}

var errAddrInUse = errors.New("address already in use")

func (r *Redis) pickPort() (int, error) {
	if r.opts.clusterNode {
		return freeClusterPort(r.t)
	}
	return freePort(r.t)
}

func (r *Redis) confPath() string { return filepath.Join(r.dir, "redis.conf") }
func (r *Redis) logPath() string  { return filepath.Join(r.dir, "redis.log") }
func (r *Redis) outPath() string  { return filepath.Join(r.dir, "redis.stdout") }

// config renders redis.conf. Values are quoted because redis.conf splits
// on spaces.
func (r *Redis) config() string {
	var b strings.Builder
	line := func(args ...string) { b.WriteString(strings.Join(args, " ") + "\n") }
	line("bind", "127.0.0.1")
	if r.opts.TLS {
		line("port", "0")
		line("tls-port", strconv.Itoa(r.port))
		line("tls-cert-file", quoteConf(filepath.Join(r.dir, "server.crt")))
		line("tls-key-file", quoteConf(filepath.Join(r.dir, "server.key")))
		line("tls-ca-cert-file", quoteConf(filepath.Join(r.dir, "ca.crt")))
		if r.opts.TLSClientAuth {
			line("tls-auth-clients", "yes")
		} else {
			line("tls-auth-clients", "no")
		}
	} else {
		line("port", strconv.Itoa(r.port))
	}
	line("dir", quoteConf(r.dir))
	line("logfile", quoteConf(r.logPath()))
	line("daemonize", "no")
	line("save", `""`)
	line("appendonly", "no")
	// DEBUG SLEEP lets tests simulate a slow server.
	line("enable-debug-command", "local")
	if r.opts.Password != "" {
		line("requirepass", quoteConf(r.opts.Password))
	}
	if r.opts.ACLUser != "" {
		line("user", quoteConf(r.opts.ACLUser), "on", quoteConf(">"+r.opts.ACLPassword), "~*", "&*", "+@all")
	}
	if r.opts.clusterNode {
		line("cluster-enabled", "yes")
		line("cluster-config-file", "nodes.conf")
		// Short: a killed node is noticed within ~1-2s, and the cluster
		// converges after start-up in ~2.2s instead of ~3s with 2000.
		line("cluster-node-timeout", "1000")
	}
	for _, c := range r.opts.Config {
		line(c)
	}
	return b.String()
}

// quoteConf quotes s the way redis.conf's sdssplitargs reads it.
func quoteConf(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\x%02x", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// start writes the config, starts the process and waits for PING.
func (r *Redis) start() error {
	if err := os.WriteFile(r.confPath(), []byte(r.config()), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", r.confPath(), err)
	}
	out, err := os.OpenFile(r.outPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", r.outPath(), err)
	}
	defer out.Close()
	args := []string{r.confPath()}
	if r.opts.sentinel {
		args = append(args, "--sentinel")
	}
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.dir
	cmd.Stdout, cmd.Stderr = out, out
	p, err := startProcess(cmd)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
	if err := r.waitReady(p, redisStartTimeout); err != nil {
		p.kill()
		log := readTail(r.logPath(), 4000) + readTail(r.outPath(), 2000)
		if strings.Contains(log, "Address already in use") {
			return fmt.Errorf("port %d: %w", r.port, errAddrInUse)
		}
		return fmt.Errorf("redis on port %d: %w\n--- redis log (%s) ---\n%s", r.port, err, r.dir, log)
	}
	return nil
}

// waitReady polls PING until it answers or p exits.
func (r *Redis) waitReady(p *process, timeout time.Duration) error {
	o := r.ClientOptions()
	o.MaxRetries = -1
	o.DialTimeout = 500 * time.Millisecond
	o.ReadTimeout = 500 * time.Millisecond
	c := redis.NewClient(o)
	defer c.Close()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("redis-server exited before answering PING: %v", p.err)
		}
		// A plain TCP probe first: go-redis retries failed dials inside its
		// pool with a backoff, which would add ~50ms to every start.
		conn, derr := net.DialTimeout("tcp", r.Addr(), 200*time.Millisecond)
		if derr != nil {
			err = derr
			time.Sleep(5 * time.Millisecond)
			continue
		}
		conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("no PING answer within %v: %v", timeout, err)
}

func (r *Redis) cleanup() {
	r.mu.Lock()
	c, p := r.client, r.proc
	r.client = nil
	if r.pauseTimer != nil {
		r.pauseTimer.Stop()
	}
	r.mu.Unlock()
	if c != nil {
		c.Close()
	}
	if p != nil && !p.stop(10*time.Second) {
		r.t.Logf("testenv: redis on port %d ignored SIGTERM for 10s and was killed", r.port)
	}
}

// Addr returns "127.0.0.1:PORT" (the TLS port when TLS is on).
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// Port returns the server's port.
func (r *Redis) Port() int { return r.port }

// Dir returns the server's working directory (config, log, nodes.conf).
func (r *Redis) Dir() string { return r.dir }

// Log returns the server log, for failure messages.
func (r *Redis) Log() string { return readTail(r.logPath(), 1<<20) }

// TLSConfig returns a new client TLS config trusting the server's CA (with a
// client certificate if TLSClientAuth is set), or nil without TLS.
func (r *Redis) TLSConfig() *tls.Config {
	if r.tlsConfig == nil {
		return nil
	}
	return r.tlsConfig.Clone()
}

// CACertPEM returns the PEM of the CA that signed the server certificate,
// or nil without TLS.
func (r *Redis) CACertPEM() []byte {
	if r.ca == nil {
		return nil
	}
	return append([]byte(nil), r.ca.CertPEM...)
}

// ClientOptions returns new go-redis options for this server: address,
// credentials (the ACL user if set, else the password) and TLS config.
func (r *Redis) ClientOptions() *redis.Options {
	o := &redis.Options{
		Addr:        r.Addr(),
		TLSConfig:   r.TLSConfig(),
		DialTimeout: 2 * time.Second,
		ReadTimeout: 5 * time.Second,
		// Redis 7.0 does not know CLIENT MAINT_NOTIFICATIONS.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		ContextTimeoutEnabled:    true,
	}
	if r.opts.ACLUser != "" {
		o.Username, o.Password = r.opts.ACLUser, r.opts.ACLPassword
	} else {
		o.Password = r.opts.Password
	}
	return o
}

// Client returns a go-redis client for this server, shared by the test and
// closed in t.Cleanup. It reconnects by itself after Restart.
func (r *Redis) Client() *redis.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client == nil {
		r.client = redis.NewClient(r.ClientOptions())
	}
	return r.client
}

// Do runs one command through Client and returns its reply.
func (r *Redis) Do(ctx context.Context, args ...any) (any, error) {
	return r.Client().Do(ctx, args...).Result()
}

// InfoMemory returns used_memory from INFO memory, in bytes.
func (r *Redis) InfoMemory(ctx context.Context) (int64, error) {
	info, err := r.Client().Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("info memory on %s: %w", r.Addr(), err)
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse used_memory %q: %w", v, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("info memory on %s: no used_memory field", r.Addr())
}

// Running reports whether the server process is alive (it may be paused).
func (r *Redis) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc != nil && !r.proc.exited()
}

// Stop shuts the server down with SIGTERM and waits for it to exit
// (SIGKILL after 10s). Data is lost: persistence is off by default.
func (r *Redis) Stop() {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p != nil {
		p.stop(10 * time.Second)
	}
}

// Kill SIGKILLs the server and waits for it to exit, like a crash.
func (r *Redis) Kill() {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// Restart stops the server if it runs, then starts it again on the same
// port, directory and config (a cluster node keeps its nodes.conf, so it
// rejoins), and waits for PING. It fails the test if the server does not
// come back, so call it from the test goroutine.
func (r *Redis) Restart() {
	r.t.Helper()
	r.Resume()
	r.Stop()
	if err := r.start(); err != nil {
		r.t.Fatalf("testenv: restart redis-server: %v", err)
	}
}

// Pause freezes the server with SIGSTOP: connections stay open but nothing
// is answered, as with a hung server. With d > 0 it resumes by itself after
// d; otherwise it stays frozen until Resume. (For Redis's own, protocol-level
// pause use Do(ctx, "CLIENT", "PAUSE", ms).)
func (r *Redis) Pause(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return
	}
	if r.pauseTimer != nil {
		r.pauseTimer.Stop()
		r.pauseTimer = nil
	}
	_ = r.proc.signal(syscall.SIGSTOP)
	if d > 0 {
		p := r.proc
		r.pauseTimer = time.AfterFunc(d, func() { _ = p.signal(syscall.SIGCONT) })
	}
}

// Resume continues a server frozen by Pause.
func (r *Redis) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pauseTimer != nil {
		r.pauseTimer.Stop()
		r.pauseTimer = nil
	}
	if r.proc != nil {
		_ = r.proc.signal(syscall.SIGCONT)
	}
}
