package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// These tests hold the daemon to what an operator expects of it: a config
// checker that names every problem, reloads that never drop a message,
// a drain on SIGTERM, readiness that follows the store.

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	crand.Read(b)
	return b
}

// scrape returns the daemon's /metrics page.
func (d *daemonProc) scrape(t testing.TB) string {
	t.Helper()
	resp, err := http.Get("http://" + d.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var setVersionRE = regexp.MustCompile(`(?m)^bulkmilter_signature_set_info\{version="([^"]+)"\} 1$`)

// setVersions returns the signature set versions /metrics exports.
func (d *daemonProc) setVersions(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, m := range setVersionRE.FindAllStringSubmatch(d.scrape(t), -1) {
		out = append(out, m[1])
	}
	return out
}

// waitMetric waits until a sample reaches want.
func (d *daemonProc) waitMetric(t testing.TB, sample string, want float64) {
	t.Helper()
	// A bound for a daemon that never gets there, far above a busy
	// machine's stalls.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := d.metric(t, sample)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v after 2 minutes, want %v\n%s", sample, got, want, d.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runMilterd runs the binary and returns its exit code, stdout and stderr.
func runMilterd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return testenv.Run(t, milterdBinary(t), args...)
}

// check-config reports every problem with file and line and exits
// non-zero; a good file passes with exit 0; the secret key's mode and the
// lexicon are checked as the daemon would.
func TestCheckConfigBinary(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yml")
	writeFile(t, good, "data_dir: "+dir+"\npolicy:\n  threshold: 20\nactions:\n  recipient_detail: Bulk\n")
	code, stdout, stderr := runMilterd(t, "check-config", "-config", good)
	if code != 0 || !strings.Contains(stdout, "config file "+good+": OK") {
		t.Errorf("good config: exit %d, stdout %q, stderr %q; want 0 and OK", code, stdout, stderr)
	}
	// The example config ships as the reference and must pass as is.
	code, _, stderr = runMilterd(t, "check-config", "-data-dir", dir, "-config", "../../deploy/bulkmilter.yml")
	if code != 0 {
		t.Errorf("deploy/bulkmilter.yml: exit %d: %s", code, stderr)
	}

	bad := filepath.Join(dir, "bad.yml")
	writeFile(t, bad, `data_dir: `+dir+`
policy:
  threshold: 0
  on_store_error: maybe
actions:
  recipient_detail: "Bulk mail"
  except_domains: ["bad domain"]
store:
  window: -1h
`)
	code, stdout, stderr = runMilterd(t, "check-config", "-config", bad)
	if code == 0 {
		t.Fatalf("bad config: exit 0, want non-zero; stdout %q", stdout)
	}
	for _, want := range []string{
		bad + ":3: policy.threshold: must be positive",
		bad + ":4: policy.on_store_error: invalid value \"maybe\"",
		bad + ":6: actions.recipient_detail: invalid detail \"Bulk mail\"",
		bad + ":7: actions.except_domains[0]: invalid domain \"bad domain\"",
		bad + ":9: store.window: must be positive",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("check-config output lacks %q:\n%s", want, stderr)
		}
	}

	unknown := filepath.Join(dir, "unknown.yml")
	writeFile(t, unknown, "listen: inet:127.0.0.1:7357\nmetrics:\n  listen: x\n")
	if code, _, stderr := runMilterd(t, "check-config", unknown); code == 0 || !strings.Contains(stderr, unknown+`:2: unknown key "metrics"`) {
		t.Errorf("unknown key: exit %d, stderr %q", code, stderr)
	}

	// What the daemon checks at start: the lexicon file and the key's mode.
	lex := filepath.Join(dir, "lexicon.yml")
	writeFile(t, lex, "data_dir: "+dir+"\nsignatures:\n  lexicon: "+filepath.Join(dir, "missing.bmlx")+"\n")
	if code, _, stderr := runMilterd(t, "check-config", "-config", lex); code == 0 || !strings.Contains(stderr, "missing.bmlx") {
		t.Errorf("missing lexicon: exit %d, stderr %q", code, stderr)
	}
	keyDir := t.TempDir()
	writeFile(t, filepath.Join(keyDir, "secret.key"), strings.Repeat("ab", 32)+"\n")
	if err := os.Chmod(filepath.Join(keyDir, "secret.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runMilterd(t, "check-config", "-data-dir", keyDir); code == 0 || !strings.Contains(stderr, "chmod 600") {
		t.Errorf("world-readable secret: exit %d, stderr %q", code, stderr)
	}
	if code, _, _ := runMilterd(t, "check-config", "-config", filepath.Join(dir, "nonexistent.yml")); code == 0 {
		t.Error("missing config file: exit 0")
	}
}

// loadWorker sends campaign copies over milter sessions until stopped,
// opening a new MTA connection every few messages, and records every
// failure: a message that got no reply or no verdict header.
type loadWorker struct {
	sent, tagged atomic.Int64
	mu           sync.Mutex
	errs         []error
}

func (w *loadWorker) fail(err error) {
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.mu.Unlock()
}

func (w *loadWorker) run(addr string, id int, stop <-chan struct{}, done *sync.WaitGroup) {
	defer done.Done()
	rng := rand.New(rand.NewPCG(uint64(id), 7))
	cl := mtaclient.New("tcp", addr)
	for n := 0; ; {
		select {
		case <-stop:
			return
		default:
		}
		s, err := cl.Open(mtaclient.Envelope{From: "news@garden.example"})
		if err != nil {
			w.fail(fmt.Errorf("worker %d: open: %w", id, err))
			return
		}
		for range 5 {
			n++
			i := id*100_000 + n
			rcpt := recipientAddr(i)
			res, err := s.Send("", []string{rcpt}, campaign(i, rcpt, recipientName(i), rng))
			w.sent.Add(1)
			if err != nil {
				w.fail(fmt.Errorf("worker %d message %d: %w", id, n, err))
				break
			}
			v, ok := res.Header("X-Bulk")
			if !ok {
				w.fail(fmt.Errorf("worker %d message %d: no verdict header: %v", id, n, res.Mods))
			}
			if strings.HasPrefix(v, "yes") {
				w.tagged.Add(1)
			}
		}
		s.Close()
	}
}

// SIGHUP under load: four MTA connections keep sending while the
// configuration is reloaded, replaced by invalid ones, and the secret key
// changes. No message fails; a valid reload takes effect (Subject tag) and
// keeps the counts (same store); an invalid one is refused and the running
// state stays (the tag is still applied); a new key starts a new signature
// set. The reload metrics follow.
func TestReloadUnderLoad(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "bulkmilter.yml")
	writeFile(t, cfgPath, "policy:\n  threshold: 5\n")
	d := startDaemon(t, "-config", cfgPath)
	versions := d.setVersions(t)
	if len(versions) != 1 {
		t.Fatalf("signature_set_info versions %q, want one", versions)
	}
	if got := d.metric(t, "bulkmilter_config_last_reload_successful"); got != 1 {
		t.Errorf("config_last_reload_successful = %v at start, want 1", got)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	workers := make([]*loadWorker, 4)
	for i := range workers {
		workers[i] = &loadWorker{}
		wg.Add(1)
		go workers[i].run(d.milterAddr, i+1, stop, &wg)
	}
	stopped := false
	stopLoad := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopLoad()
	waitSent := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var total int64
			for _, w := range workers {
				total += w.sent.Load()
			}
			if total >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("load: %d messages sent after 30s, want %d", total, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	rng := rand.New(rand.NewPCG(9, 9))
	probe := func(i int) string {
		t.Helper()
		rcpt := recipientAddr(900_000 + i)
		res, err := mtaclient.New("tcp", d.milterAddr).Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{rcpt}},
			campaign(900_000+i, rcpt, recipientName(i), rng))
		if err != nil {
			t.Fatalf("probe %d: %v", i, err)
		}
		v := verdictOf(t, res)
		for _, m := range res.Mods {
			if m.HeaderName == "Subject" {
				return v + " | Subject: " + m.HeaderValue
			}
		}
		return v
	}
	hup := func() {
		t.Helper()
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	waitSent(40)
	if v := probe(1); !strings.HasPrefix(v, "yes") || strings.Contains(v, "Subject") {
		t.Fatalf("before reload: %q, want bulk without a Subject tag", v)
	}

	// 1. A valid change: it applies to the next message, and the counts
	// carry over (the store is taken over, not reopened).
	writeFile(t, cfgPath, "policy:\n  threshold: 5\nactions:\n  subject_tag: \"[BULK]\"\n")
	hup()
	d.waitMetric(t, `bulkmilter_config_reloads_total{result="success"}`, 1)
	waitSent(80)
	if v := probe(2); !strings.HasPrefix(v, "yes") || !strings.Contains(v, "Subject: [BULK] ") {
		t.Errorf("after a valid reload: %q, want bulk with the Subject tag", v)
	}
	if got := d.setVersions(t); strings.Join(got, ",") != strings.Join(versions, ",") {
		t.Errorf("signature set changed on a reload that kept key and lexicon: %q → %q", versions, got)
	}

	// 2. Invalid files are refused; the running state stays.
	for i, bad := range []string{
		"policy:\n  threshold: 0\nactions:\n  subject_tag: \"[X]\"\n",
		"policy: [unclosed\n",
		"signatures:\n  lexicon: /nonexistent/lexicon.bmlx\nactions:\n  subject_tag: \"[X]\"\n",
		"socket:\n  mode: \"0600\"\n", // only a restart may change it
	} {
		writeFile(t, cfgPath, bad)
		hup()
		d.waitMetric(t, `bulkmilter_config_reloads_total{result="failure"}`, float64(i+1))
		if got := d.metric(t, "bulkmilter_config_last_reload_successful"); got != 0 {
			t.Errorf("bad config %d: config_last_reload_successful = %v, want 0", i, got)
		}
		if v := probe(10 + i); !strings.HasPrefix(v, "yes") || !strings.Contains(v, "Subject: [BULK] ") {
			t.Errorf("after bad config %d: %q, want the running state (bulk, [BULK] tag)", i, v)
		}
	}
	if !strings.Contains(d.Logs(), "reload failed; keeping the running configuration") {
		t.Errorf("no log line for the failed reloads:\n%s", d.Logs())
	}
	waitSent(160)
	stopLoad()

	// 3. A new secret key is a new signature set: the counts start afresh.
	writeFile(t, cfgPath, "policy:\n  threshold: 5\nactions:\n  subject_tag: \"[BULK]\"\n")
	keyPath := filepath.Join(d.dataDir, "secret.key")
	if err := os.WriteFile(keyPath, []byte(hex.EncodeToString(randBytes(32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hup()
	d.waitMetric(t, `bulkmilter_config_reloads_total{result="success"}`, 2)
	if got := d.metric(t, "bulkmilter_config_last_reload_successful"); got != 1 {
		t.Errorf("config_last_reload_successful = %v after a good reload, want 1", got)
	}
	if got := d.setVersions(t); len(got) != 1 || got[0] == versions[0] {
		t.Errorf("signature_set_info after a key change = %q, want one new version (was %q)", got, versions)
	}
	if !strings.Contains(d.Logs(), "signature set changed; volumes count again from zero") {
		t.Errorf("no warning about the new signature set:\n%s", d.Logs())
	}
	if v := probe(20); !strings.HasPrefix(v, "no; family=") || !strings.Contains(v, "volume=1") {
		t.Errorf("first copy after a key change: %q, want not bulk at volume 1", v)
	}

	var sent, tagged int64
	for i, w := range workers {
		sent += w.sent.Load()
		tagged += w.tagged.Load()
		for _, err := range w.errs {
			t.Errorf("worker %d: %v", i, err)
		}
	}
	t.Logf("%d messages over 4 MTA connections across 5 reloads, %d tagged", sent, tagged)
	if tagged == 0 {
		t.Error("no message under load was tagged")
	}
}

// startRedisDaemon starts Redis and a daemon using it with a config file.
func startRedisDaemon(t *testing.T, cfg string) (*testenv.Redis, *daemonProc) {
	t.Helper()
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	cfgPath := filepath.Join(t.TempDir(), "bulkmilter.yml")
	writeFile(t, cfgPath, cfg)
	d := startDaemon(t, "-config", cfgPath, "-redis", "redis://"+r.Addr()+"/0")
	return r, d
}

// SIGTERM with messages in progress: the daemon stops accepting, every
// message in progress gets its verdict, then it exits 0. The store is
// frozen so that the messages are certainly in progress when the signal
// comes.
func TestDrainOnSIGTERM(t *testing.T) {
	r, d := startRedisDaemon(t, "shutdown_timeout: 30s\npolicy:\n  store_timeout: 15s\n")
	cl := mtaclient.New("tcp", d.milterAddr)
	rng := rand.New(rand.NewPCG(5, 6))
	if _, err := cl.Send(mtaclient.Envelope{From: "a@example.org", Rcpts: []string{"warm@example.test"}}, campaign(0, "warm@example.test", "Warm", rng)); err != nil {
		t.Fatal(err)
	}

	r.Pause(0)
	defer r.Resume()
	const inFlight = 4
	type result struct {
		verdict string
		err     error
	}
	results := make(chan result, inFlight)
	for i := 1; i <= inFlight; i++ {
		rcpt := recipientAddr(i)
		msg := campaign(i, rcpt, recipientName(i), rng)
		go func() {
			// A client per goroutine: mtaclient.Client is not safe for concurrent use.
			res, err := mtaclient.New("tcp", d.milterAddr).Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{rcpt}}, msg)
			v, _ := res.Header("X-Bulk")
			results <- result{v, err}
		}()
	}
	d.waitMetric(t, "bulkmilter_messages_in_progress", inFlight)
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The listener closes at once; the messages wait for the store.
	deadline := time.Now().Add(time.Minute) // a bound for a socket never closed, not a speed
	for {
		c, err := net.DialTimeout("tcp", d.milterAddr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("milter socket still accepts connections a minute after SIGTERM")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-d.exited:
		t.Fatalf("milterd exited with %d messages in progress\n%s", inFlight, d.Logs())
	case res := <-results:
		t.Fatalf("a message finished while the store was frozen: %+v", res)
	case <-time.After(300 * time.Millisecond):
	}
	r.Resume()
	for range inFlight {
		select {
		case res := <-results:
			if res.err != nil {
				t.Errorf("message in progress at SIGTERM failed: %v\n%s", res.err, d.Logs())
			} else if !strings.HasPrefix(res.verdict, "no; family=") {
				t.Errorf("message in progress at SIGTERM: X-Bulk %q, want a store-backed verdict", res.verdict)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("message in progress got no reply 30s after the store came back\n%s", d.Logs())
		}
	}
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("milterd still running 30s after the drain\n%s", d.Logs())
	}
	if d.exitErr != nil {
		t.Errorf("milterd exited with %v after a drain", d.exitErr)
	}
	if want := fmt.Sprintf("in_progress=%d", inFlight); !strings.Contains(d.Logs(), want) {
		t.Errorf("drain log lacks %s:\n%s", want, d.Logs())
	}
}

// The drain has a deadline: messages still in progress when
// shutdown_timeout ends are cut off (the MTA applies its default action)
// and the daemon exits anyway.
func TestDrainDeadline(t *testing.T) {
	r, d := startRedisDaemon(t, "shutdown_timeout: 1s\npolicy:\n  store_timeout: 20s\n")
	r.Pause(0)
	defer r.Resume()
	errc := make(chan error, 1)
	go func() {
		_, err := mtaclient.New("tcp", d.milterAddr).Send(mtaclient.Envelope{From: "a@example.org", Rcpts: []string{"b@example.test"}},
			campaign(1, "b@example.test", "Bea", rand.New(rand.NewPCG(1, 1))))
		errc <- err
	}()
	d.waitMetric(t, "bulkmilter_messages_in_progress", 1)
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("milterd still running 2 minutes after SIGTERM with a 1s shutdown_timeout\n%s", d.Logs())
	}
	// The drain's deadline, not the store's, ended it: the log says which
	// (the exit's wall time on a busy machine would not).
	if !strings.Contains(d.Logs(), "msg=draining timeout=1s in_progress=1") {
		t.Errorf("no log of a drain of one message with a 1s deadline:\n%s", d.Logs())
	}
	if err := <-errc; err == nil {
		t.Error("the message cut off by the deadline got a reply")
	}
	if !strings.Contains(d.Logs(), "drain incomplete") {
		t.Errorf("no drain-incomplete log:\n%s", d.Logs())
	}
}

// /readyz follows the store: 503 while Redis is down, 200 again once it is
// back; /healthz answers throughout; messages meanwhile get the failure
// policy's verdict.
func TestReadyzFollowsRedis(t *testing.T) {
	r, d := startRedisDaemon(t, "policy:\n  store_timeout: 300ms\n")
	status := func(path string) int {
		resp, err := http.Get("http://" + d.httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	waitStatus := func(path string, want int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for status(path) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s = %d after 20s, want %d", path, status(path), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if got := status("/readyz"); got != http.StatusOK {
		t.Fatalf("/readyz = %d with Redis up", got)
	}
	r.Stop()
	waitStatus("/readyz", http.StatusServiceUnavailable)
	if got := status("/healthz"); got != http.StatusOK {
		t.Errorf("/healthz = %d with Redis down, want 200 (the process is fine)", got)
	}
	res, err := mtaclient.New("tcp", d.milterAddr).Send(mtaclient.Envelope{From: "a@example.org", Rcpts: []string{"b@example.test"}},
		campaign(1, "b@example.test", "Bea", rand.New(rand.NewPCG(2, 2))))
	if err != nil {
		t.Fatal(err)
	}
	if v := verdictOf(t, res); v != "no; error=store-unavailable" {
		t.Errorf("verdict with Redis down = %q, want the accept policy's", v)
	}
	if got := d.metric(t, `bulkmilter_store_errors_total{op="observe"}`); got < 1 {
		t.Errorf("store_errors_total{op=observe} = %v with Redis down", got)
	}
	r.Restart()
	waitStatus("/readyz", http.StatusOK)
}

// A real scrape of the running daemon passes promtool's linter.
func TestMetricsScrapePromtool(t *testing.T) {
	promtool := testenv.Program(t, "promtool")
	d := startDaemon(t)
	rcpt := "a@example.test"
	if _, err := mtaclient.New("tcp", d.milterAddr).Send(mtaclient.Envelope{From: "x@example.org", Rcpts: []string{rcpt}},
		campaign(1, rcpt, "Ann", rand.New(rand.NewPCG(1, 3)))); err != nil {
		t.Fatal(err)
	}
	page := d.scrape(t)
	for _, name := range []string{"bulkmilter_build_info", "bulkmilter_messages_total", "bulkmilter_processing_duration_seconds_bucket",
		"bulkmilter_signatures_total", "bulkmilter_store_request_duration_seconds_bucket", "bulkmilter_sessions_active"} {
		if !strings.Contains(page, "\n"+name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(page)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// The least-privilege ACL user shipped in deploy/redis/users.acl is
// enough for the daemon: it starts, counts, tags and answers /readyz; and
// it is least privilege: it cannot flush the database.
func TestRedisLeastPrivilegeACL(t *testing.T) {
	acl := ""
	for _, l := range strings.Split(readDeploy(t, "redis/users.acl"), "\n") {
		if strings.HasPrefix(l, "user bulkmilter ") {
			acl = l
		}
	}
	const pw = "change-me-to-a-long-random-password"
	if acl == "" || !strings.Contains(acl, ">"+pw+" ") {
		t.Fatalf("no user line with the placeholder password in deploy/redis/users.acl")
	}
	r := testenv.StartRedis(t, testenv.RedisOptions{Config: []string{acl}})
	cfgPath := filepath.Join(t.TempDir(), "bulkmilter.yml")
	// A budget no busy machine overruns: this test is about the ACL, not
	// the store's deadline.
	writeFile(t, cfgPath, "policy:\n  threshold: 3\n  store_timeout: 15s\n")
	d := startDaemon(t, "-config", cfgPath, "-redis", "redis://bulkmilter:"+pw+"@"+r.Addr()+"/0")
	cl := mtaclient.New("tcp", d.milterAddr)
	var last string
	for i := 1; i <= 3; i++ {
		rcpt := recipientAddr(i)
		res, err := cl.Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{rcpt}}, newsletter(i, rcpt, recipientName(i)))
		if err != nil {
			t.Fatal(err)
		}
		last = verdictOf(t, res)
		if strings.Contains(last, "error") {
			t.Fatalf("copy %d: %q: the ACL user lacks a permission\n%s", i, last, d.Logs())
		}
	}
	if !strings.HasPrefix(last, "yes") {
		t.Errorf("third copy with threshold 3: %q, want bulk", last)
	}
	if got := d.metric(t, `bulkmilter_store_errors_total{op="observe"}`); got != 0 {
		t.Errorf("store_errors_total{op=observe} = %v as the ACL user", got)
	}
	// The same user cannot wipe the database, nor the server's scripts and
	// functions (other applications' too).
	cl2 := redis.NewClient(&redis.Options{Addr: r.Addr(), Username: "bulkmilter", Password: pw})
	defer cl2.Close()
	ctx := context.Background()
	for name, cmd := range map[string]redis.Cmder{
		"FLUSHALL":       cl2.FlushAll(ctx),
		"SCRIPT FLUSH":   cl2.ScriptFlush(ctx),
		"FUNCTION FLUSH": cl2.FunctionFlush(ctx),
	} {
		if err := cmd.Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s as the bulkmilter user: %v, want NOPERM", name, err)
		}
	}
}
