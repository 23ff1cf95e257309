package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// Rspamd is the peer milter: Rspamd (3.4, Debian's package) as a milter
// (rspamd_proxy with self_scan) doing fuzzy hashing only and learning
// every message inline after its check, with its own redis-server, all on
// loopback in a temporary directory. It is the fuzzy-only peer of a
// volume-counting milter: each message is scanned against the fuzzy
// storage and then added to it, as bulkmilter counts each message.
type Rspamd struct {
	Addr     string // the milter, host:port
	Redis    *RedisServer
	dir      string
	cmd      *exec.Cmd
	done     chan error
	releases []func() // the ports' reservations
}

// rspamdConf is the whole configuration: no packaged tree is included, so
// the only module is the C module fuzzy_check plus learn.lua; no DNS.
// Placeholders: @DIR@, @MILTER@, @FUZZY@, @REDIS@, @COUNT@, @TLD@, @HSCACHE@.
const rspamdConf = `options {
  pidfile = "@DIR@/rspamd.pid";
  filters = "fuzzy_check";
  explicit_modules = [];
  dynamic_conf = "@DIR@/db/dynamic";
  history_file = "@DIR@/db/history";
  cache_file = "@DIR@/db/symbols.cache";
  stats_file = "@DIR@/db/stats.ucl";
  hs_cache_dir = "@HSCACHE@/";
  tempdir = "@DIR@/tmp";
  control_socket = "@DIR@/rspamd.sock mode=0600";
  url_tld = "@TLD@";
  task_timeout = 8s;
  dns { nameserver = ["127.0.0.1:53"]; timeout = 0.2s; retransmits = 0; }
}
logging { type = "file"; filename = "@DIR@/rspamd.log"; level = "error"; }
worker "rspamd_proxy" {
  bind_socket = "127.0.0.1:@MILTER@";
  milter = yes;
  timeout = 10s;
  count = @COUNT@;
  upstream "local" { default = yes; self_scan = yes; }
}
worker "fuzzy" {
  bind_socket = "127.0.0.1:@FUZZY@";
  count = 1;
  backend = "redis";
  servers = "127.0.0.1:@REDIS@";
  prefix = "fuzzy";
  expire = 2d;
  sync = 0.2;
  allow_update = ["127.0.0.1"];
}
fuzzy_check {
  timeout = 2s;
  retransmits = 1;
  rule "bench" {
    servers = "127.0.0.1:@FUZZY@";
    algorithm = "mumhash";
    symbol = "BENCH_FUZZY_UNKNOWN";
    read_only = false;
    skip_unknown = true;
    max_score = 100.0;
    mime_types = ["*"];
    min_bytes = 1024;
    text_multiplier = 4.0;
    min_length = 64;
    short_text_direct_hash = true;
    text_shingles = true;
    fuzzy_map = { BENCH_FUZZY { flag = 1; max_score = 100.0; } }
  }
}
group "bench" { symbols {
  "BENCH_FUZZY" { weight = 1.0; }
  "BENCH_FUZZY_UNKNOWN" { weight = 1.0; }
  "BENCH_LEARNED" { weight = 0.0; }
} }
lua = "@DIR@/learn.lua";
`

// rspamdLearn learns every message after its check (a postfilter runs
// once fuzzy_check has its replies): scan and learn in one pass.
const rspamdLearn = `rspamd_config:register_symbol({
  name = 'BENCH_LEARNED',
  type = 'postfilter',
  score = 0.0,
  group = 'bench',
  flags = 'empty,nostat',
  callback = function(task)
    local ok, res = pcall(rspamd_plugins.fuzzy_check.learn, task, 1, 1)
    task:insert_result('BENCH_LEARNED', 0.0, tostring(ok and res))
  end,
})
`

// RspamdOptions configure the peer.
type RspamdOptions struct {
	// Workers is the number of milter (scanner) processes; default 1.
	Workers int
	// TLDs is the public suffix list URL detection uses (it shapes the
	// tokens); default the packaged one, which Rspamd takes ~15 s to
	// compile at start. Tests pass a short list.
	TLDs string
	// CacheDir keeps Rspamd's compiled patterns (the public suffix list
	// among them) from one start to the next; default, with the packaged
	// list, $XDG_CACHE_HOME/bulkmilter/rspamd-hs. Rspamd removes from it
	// what its configuration does not use: one directory per list.
	CacheDir string
}

// StartRspamd starts redis-server and Rspamd (found on PATH) and waits
// until the milter port accepts connections.
func StartRspamd(ctx context.Context, o RspamdOptions) (*Rspamd, error) {
	if o.TLDs == "" {
		o.TLDs = "${SHAREDIR}/effective_tld_names.dat"
		if c, err := os.UserCacheDir(); err == nil && o.CacheDir == "" {
			o.CacheDir = filepath.Join(c, "bulkmilter", "rspamd-hs")
		}
	}
	bin, err := exec.LookPath("rspamd")
	if err != nil {
		return nil, fmt.Errorf("start rspamd: %w (scripts/install-test-deps.sh installs it)", err)
	}
	dir, err := os.MkdirTemp("", "bulklab-bench-rspamd-")
	if err != nil {
		return nil, fmt.Errorf("start rspamd: %w", err)
	}
	r := &Rspamd{dir: dir, done: make(chan error, 1)}
	fail := func(err error) (*Rspamd, error) {
		r.Stop()
		return nil, fmt.Errorf("start rspamd: %w", err)
	}
	if r.Redis, err = StartRedis(ctx); err != nil {
		return fail(err)
	}
	milterPort, release, err := testenv.ReservePort()
	if err != nil {
		return fail(err)
	}
	r.releases = append(r.releases, release)
	fuzzyPort, release, err := freeUDPAndTCPPort()
	if err != nil {
		return fail(err)
	}
	r.releases = append(r.releases, release)
	if o.CacheDir == "" {
		o.CacheDir = filepath.Join(dir, "db")
	} else if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
		return fail(err)
	}
	_, redisPort, _ := net.SplitHostPort(r.Redis.Addr)
	conf := strings.NewReplacer("@DIR@", dir, "@MILTER@", strconv.Itoa(milterPort), "@FUZZY@", strconv.Itoa(fuzzyPort),
		"@REDIS@", redisPort, "@COUNT@", strconv.Itoa(max(1, o.Workers)), "@TLD@", o.TLDs, "@HSCACHE@", o.CacheDir).Replace(rspamdConf)
	for _, d := range []string{"db", "tmp"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return fail(err)
		}
	}
	for name, text := range map[string]string{"rspamd.conf": conf, "learn.lua": rspamdLearn} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return fail(err)
		}
	}
	args := []string{"-f", "-c", filepath.Join(dir, "rspamd.conf")}
	if os.Geteuid() == 0 {
		// Rspamd refuses to run its workers as root: the package's user,
		// else insecure mode.
		if _, err := exec.LookPath("id"); err == nil && exec.Command("id", "_rspamd").Run() == nil {
			args = append(args, "-u", "_rspamd", "-g", "_rspamd")
			if err := chownTree(dir, "_rspamd"); err != nil {
				return fail(err)
			}
		} else {
			args = append(args, "-i")
		}
	}
	r.cmd = exec.Command(bin, args...)
	// Its own process group: the workers are stopped with it.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := os.Create(filepath.Join(dir, "rspamd.out"))
	if err != nil {
		return fail(err)
	}
	defer out.Close()
	r.cmd.Stdout, r.cmd.Stderr = out, out
	if err := r.cmd.Start(); err != nil {
		return fail(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(milterPort))
	// Compiling the public suffix list takes ~15 s of CPU; minutes on a
	// busy machine.
	deadline := time.Now().Add(10 * time.Minute)
	for {
		c, err := net.DialTimeout("tcp", r.Addr, time.Second)
		if err == nil {
			c.Close()
			return r, nil
		}
		select {
		case werr := <-r.done:
			r.done <- werr
			return fail(fmt.Errorf("rspamd exited: %v\n%s", werr, r.logs()))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fail(fmt.Errorf("rspamd's milter on %s did not answer: %w\n%s", r.Addr, err, r.logs()))
		}
	}
}

// logs returns the end of Rspamd's output and log.
func (r *Rspamd) logs() string {
	var b strings.Builder
	for _, f := range []string{"rspamd.out", "rspamd.log"} {
		data, _ := os.ReadFile(filepath.Join(r.dir, f))
		if len(data) > 4096 {
			data = data[len(data)-4096:]
		}
		b.Write(data)
	}
	return b.String()
}

// Pids returns Rspamd's main process and its workers, for CPU accounting.
func (r *Rspamd) Pids() []int {
	if r.cmd == nil || r.cmd.Process == nil {
		return nil
	}
	return processTree(r.cmd.Process.Pid)
}

// Learned returns the number of fuzzy digests stored in Rspamd's Redis.
func (r *Rspamd) Learned(ctx context.Context) (int64, error) {
	c := r.Redis.Client()
	defer c.Close()
	var n int64
	iter := c.Scan(ctx, 0, "fuzzy*", 1000).Iterator()
	for iter.Next(ctx) {
		// Digests are "fuzzy<64-byte digest>"; shingles "fuzzy_<i>_<value>".
		if !strings.HasPrefix(iter.Val(), "fuzzy_") {
			n++
		}
	}
	return n, iter.Err()
}

// Stop stops Rspamd (its whole process group) and its Redis, and removes
// the directory.
func (r *Rspamd) Stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			<-r.done
		}
	}
	if r.Redis != nil {
		r.Redis.Stop()
	}
	os.RemoveAll(r.dir)
	for _, release := range r.releases {
		release()
	}
}

// chownTree gives the directory tree to the user (and its group).
func chownTree(dir, user string) error {
	out, err := exec.Command("chown", "-R", user+":"+user, dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chown %s: %v: %s", dir, err, out)
	}
	return nil
}

// freeUDPAndTCPPort returns a reserved loopback port (testenv.ReservePort)
// free for both UDP and TCP (the fuzzy storage listens on both).
func freeUDPAndTCPPort() (int, func(), error) {
	for range 20 {
		p, release, err := testenv.ReservePort()
		if err != nil {
			return 0, nil, err
		}
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err == nil {
			u.Close()
			return p, release, nil
		}
		release()
	}
	return 0, nil, errors.New("no port free for both UDP and TCP")
}

// WaitLearned waits for the fuzzy storage's flushes (every 0.2 to 0.3 s,
// later on a busy machine) to end: the digests stored once their number
// has not changed for a second.
func (r *Rspamd) WaitLearned(ctx context.Context) (int64, error) {
	var last int64 = -1
	same := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		n, err := r.Learned(ctx)
		if err != nil {
			return 0, err
		}
		if n == last {
			same++
		} else {
			same = 0
		}
		if n > 0 && same >= 5 {
			break
		}
		last = n
		time.Sleep(200 * time.Millisecond)
	}
	return last, nil
}
