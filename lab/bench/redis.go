package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// RedisServer is a redis-server the benchmark started: loopback only, its
// own port and directory, no persistence, upstream Redis 7's listpack
// limit (the figures in docs/performance.md assume it).
type RedisServer struct {
	Addr    string
	dir     string
	cmd     *exec.Cmd
	done    chan error
	release func() // the port's reservation
}

// StartRedis starts redis-server (found on PATH) on a free loopback port
// with a temporary directory, and waits until it answers.
func StartRedis(ctx context.Context, extraConfig ...string) (*RedisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("start redis: %w", err)
	}
	dir, err := os.MkdirTemp("", "milterd-bench-redis-")
	if err != nil {
		return nil, fmt.Errorf("start redis: %w", err)
	}
	port, release, err := testenv.ReservePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis: %w", err)
	}
	conf := fmt.Sprintf("bind 127.0.0.1\nport %d\ndir %s\nlogfile %s\ndaemonize no\nsave \"\"\nappendonly no\nhash-max-listpack-entries 128\n",
		port, strconv.Quote(dir), strconv.Quote(filepath.Join(dir, "redis.log")))
	for _, c := range extraConfig {
		conf += c + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "redis.conf"), []byte(conf), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis: %w", err)
	}
	s := &RedisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, done: make(chan error, 1), release: release}
	s.cmd = exec.Command(bin, filepath.Join(dir, "redis.conf"))
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		release()
		return nil, fmt.Errorf("start redis: %w", err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	c := s.Client()
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return s, nil
		}
		select {
		case werr := <-s.done:
			s.done <- werr
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			s.Stop()
			return nil, fmt.Errorf("redis-server exited: %v\n%s", werr, log)
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.Stop()
			return nil, fmt.Errorf("redis-server on %s did not answer: %w", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Client returns a new client for the server; the caller closes it.
func (s *RedisServer) Client() *redis.Client {
	return NewRedisClient(s.Addr)
}

// NewRedisClient returns a client for reading INFO.
func NewRedisClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:     addr,
		PoolSize: 1,
		// Redis 7.0 does not know CLIENT MAINT_NOTIFICATIONS.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

// Stop kills the server and removes its directory.
func (s *RedisServer) Stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
		}
	}
	os.RemoveAll(s.dir)
	s.release()
}

// Pid is the server's process id.
func (s *RedisServer) Pid() int { return s.cmd.Process.Pid }
