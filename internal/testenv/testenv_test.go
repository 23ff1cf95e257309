package testenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestProgram(t *testing.T) {
	if p := Program(t, "sh"); !strings.HasPrefix(p, "/") {
		t.Fatalf("Program(sh) = %q, want an absolute path", p)
	}
	if p, ok := lookProgram("testenv-no-such-program"); ok {
		t.Fatalf("lookProgram(missing) = %q, true; want not found", p)
	}
	// Postfix daemons live outside PATH; the extra dirs must find them.
	if _, ok := lookProgram("redis-server"); !ok && InCI() {
		t.Fatalf("redis-server not found under CI=true")
	}
}

// recTB records how a helper ended the test instead of ending the real one.
type recTB struct {
	testing.TB
	skipped, failed string
}

func (r *recTB) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recTB) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func runRec(t *testing.T, f func(tb testing.TB)) *recTB {
	r := &recTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestProgramMissing(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv("CI", ci)
			r := runRec(t, func(tb testing.TB) { Program(tb, "testenv-no-such-program") })
			msg := r.skipped
			if ci == "true" {
				msg = r.failed
				if r.skipped != "" {
					t.Fatalf("skipped under CI=true: %s", r.skipped)
				}
			} else if r.failed != "" {
				t.Fatalf("failed without CI: %s", r.failed)
			}
			if !strings.Contains(msg, "testenv-no-such-program") || !strings.Contains(msg, "scripts/install-test-deps.sh") {
				t.Fatalf("message %q must name the program and scripts/install-test-deps.sh", msg)
			}
		})
	}
}

func TestFreeClusterPort(t *testing.T) {
	p, err := freeClusterPort(t)
	if err != nil {
		t.Fatal(err)
	}
	if p < 20000 || p+10000 >= ephemeralFrom || !portFree(p) || !portFree(p+10000) {
		t.Fatalf("freeClusterPort() = %d, want p and p+10000 free, the bus port below the ephemeral range", p)
	}
}

func TestQuoteConf(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"simple", `"simple"`},
		{`a "b" \c`, `"a \"b\" \\c"`},
		{"x y\n", `"x y\x0a"`},
	}
	for _, tt := range tests {
		if got := quoteConf(tt.in); got != tt.want {
			t.Errorf("quoteConf(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestRedisPlain(t *testing.T) {
	start := time.Now()
	r := StartRedis(t, RedisOptions{Config: []string{"maxmemory 64mb"}})
	t.Logf("redis start-up: %v", time.Since(start))
	ctx := ctxT(t)

	if _, err := r.Do(ctx, "SET", "k", "v"); err != nil {
		t.Fatalf("SET: %v", err)
	}
	got, err := r.Do(ctx, "GET", "k")
	if err != nil || got != "v" {
		t.Fatalf("GET k = %v, %v; want v", got, err)
	}
	mm, err := r.Client().ConfigGet(ctx, "maxmemory").Result()
	if err != nil || mm["maxmemory"] != "67108864" {
		t.Fatalf("CONFIG GET maxmemory = %v, %v; want 67108864 from RedisOptions.Config", mm, err)
	}
	save, err := r.Client().ConfigGet(ctx, "save").Result()
	if err != nil || save["save"] != "" {
		t.Fatalf("CONFIG GET save = %v, %v; want empty (no persistence)", save, err)
	}
	used, err := r.InfoMemory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if used < 100_000 {
		t.Fatalf("InfoMemory = %d, want a plausible used_memory (>100kB)", used)
	}

	// A frozen server answers nothing: a call with a short deadline
	// fails. Only that call has one: the same PING without it, before the
	// pause, succeeds however long a busy machine takes to answer (a
	// 200 ms read timeout on every call failed it when the process was
	// descheduled that long).
	c := r.Client()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING before pause: %v", err)
	}
	r.Pause(0)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = c.Ping(short).Err()
	cancel()
	if err == nil {
		t.Fatal("PING while paused succeeded, want a timeout")
	}
	r.Resume()
	waitPing(t, c)

	// Pause with a duration resumes by itself: a PING sent while paused
	// is answered.
	r.Pause(300 * time.Millisecond)
	waitPing(t, c)

	// Restart keeps the address but (no persistence) not the data.
	r.Restart()
	if r.Addr() != c.Options().Addr {
		t.Fatalf("address changed on restart: %s", r.Addr())
	}
	if _, err := r.Do(ctx, "GET", "k"); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET k after restart: err %v, want redis.Nil", err)
	}

	r.Kill()
	if r.Running() {
		t.Fatal("Running() after Kill = true")
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after Kill succeeded")
	}
	if !strings.Contains(r.Log(), "Ready to accept connections") {
		t.Fatalf("redis log lacks the ready line:\n%s", r.Log())
	}
	r.Restart()
	waitPing(t, c)
	r.Stop()
	if r.Running() {
		t.Fatal("Running() after Stop = true")
	}
}

// waitPing waits for a PING to be answered: after a restart the client
// reconnects on its next call. A minute bounds a server that never
// answers; it is not a speed.
func waitPing(t *testing.T, c *redis.Client) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = c.Ping(context.Background()).Err(); err == nil {
			return
		}
	}
	t.Fatalf("PING never answered: %v", err)
}

func TestRedisPassword(t *testing.T) {
	r := StartRedis(t, RedisOptions{Password: `s3cret "with" spaces`})
	ctx := ctxT(t)
	anon := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	defer anon.Close()
	if err := anon.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("PING without password: err %v, want NOAUTH", err)
	}
	if _, err := r.Do(ctx, "PING"); err != nil {
		t.Fatalf("PING with password: %v", err)
	}
}

func TestRedisACLUser(t *testing.T) {
	r := StartRedis(t, RedisOptions{ACLUser: "milter", ACLPassword: "pw1"})
	ctx := ctxT(t)
	who, err := r.Do(ctx, "ACL", "WHOAMI")
	if err != nil || who != "milter" {
		t.Fatalf("ACL WHOAMI = %v, %v; want milter", who, err)
	}
	o := r.ClientOptions()
	o.Password, o.MaxRetries = "wrong", -1
	bad := redis.NewClient(o)
	defer bad.Close()
	if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("PING with wrong password: err %v, want WRONGPASS", err)
	}
}

func TestRedisTLS(t *testing.T) {
	r := StartRedis(t, RedisOptions{TLS: true})
	ctx := ctxT(t)
	if _, err := r.Do(ctx, "SET", "k", "tls"); err != nil {
		t.Fatalf("SET over TLS: %v", err)
	}
	if len(r.CACertPEM()) == 0 || !bytes.Contains(r.CACertPEM(), []byte("BEGIN CERTIFICATE")) {
		t.Fatal("CACertPEM is empty")
	}
	// The only port speaks TLS: a plaintext client fails.
	plain := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1, ReadTimeout: time.Second,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Fatal("plaintext PING on the TLS port succeeded")
	}
	// A client that does not trust the test CA fails verification.
	o := r.ClientOptions()
	o.TLSConfig, o.MaxRetries = &tls.Config{ServerName: "127.0.0.1"}, -1
	untrusted := redis.NewClient(o)
	defer untrusted.Close()
	if err := untrusted.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("PING with system roots: err %v, want a certificate error", err)
	}
}

func TestRedisTLSClientAuth(t *testing.T) {
	r := StartRedis(t, RedisOptions{TLS: true, TLSClientAuth: true})
	ctx := ctxT(t)
	if _, err := r.Do(ctx, "PING"); err != nil {
		t.Fatalf("PING with client certificate: %v", err)
	}
	o := r.ClientOptions()
	o.TLSConfig.Certificates, o.MaxRetries = nil, -1
	nocert := redis.NewClient(o)
	defer nocert.Close()
	if err := nocert.Ping(ctx).Err(); err == nil {
		t.Fatal("PING without client certificate succeeded, want a TLS failure")
	}
}

func TestRedisCluster(t *testing.T) {
	start := time.Now()
	c := StartRedisCluster(t, 3)
	t.Logf("3-master cluster start-up (nodes + redis-cli --cluster create + cluster_state:ok): %v", time.Since(start))
	ctx := ctxT(t)
	cc := c.Client()

	// Write keys until every master owns at least one, then read them back
	// through the cluster client and check each node holds its share.
	owner := map[string]int{} // addr -> keys
	var keys []string
	for i := 0; len(owner) < 3 || i < 30; i++ {
		if i > 1000 {
			t.Fatalf("keys never covered every master: %v", owner)
		}
		k := fmt.Sprintf("key-%d", i)
		if err := cc.Set(ctx, k, "v-"+k, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		keys = append(keys, k)
		slot, err := cc.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		owner[nodeForSlot(t, c, slot)]++
	}
	for _, k := range keys {
		if got, err := cc.Get(ctx, k).Result(); err != nil || got != "v-"+k {
			t.Fatalf("GET %s = %q, %v; want %q", k, got, err, "v-"+k)
		}
	}
	for _, n := range c.Nodes() {
		size, err := n.Client().DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if int(size) != owner[n.Addr()] || size == 0 {
			t.Fatalf("node %s DBSIZE = %d, want %d (>0)", n.Addr(), size, owner[n.Addr()])
		}
	}

	// A killed node takes its slots down; a restart rejoins from nodes.conf.
	n0 := c.Node(0)
	n0.Kill()
	if err := c.WaitOK(100 * time.Millisecond); err == nil {
		t.Fatal("WaitOK succeeded with a node down")
	}
	restart := time.Now()
	n0.Restart()
	if err := c.WaitOK(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("node restart until cluster_state:ok: %v", time.Since(restart))
	if err := cc.Set(ctx, "after-restart", "1", 0).Err(); err != nil {
		t.Fatalf("SET after restart: %v", err)
	}
}

// nodeForSlot returns the address of the master serving slot.
func nodeForSlot(t *testing.T, c *RedisCluster, slot int64) string {
	t.Helper()
	shards, err := c.Node(0).Client().ClusterShards(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start <= slot && slot <= r.End {
				for _, n := range sh.Nodes {
					if n.Role == "master" {
						return fmt.Sprintf("%s:%d", n.IP, n.Port)
					}
				}
			}
		}
	}
	t.Fatalf("slot %d not served", slot)
	return ""
}

func TestSink(t *testing.T) {
	s := StartSink(t)
	msg := "Subject: hi\r\n\r\n.leading dot\r\nbody\r\n"
	if err := smtp.SendMail(s.Addr(), nil, "a@example.test", []string{"b@example.test", "c@example.test"}, []byte(msg)); err != nil {
		t.Fatalf("SendMail to sink: %v", err)
	}
	got, err := s.WaitFor(1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m := got[0]
	if m.From != "a@example.test" || strings.Join(m.To, ",") != "b@example.test,c@example.test" || m.LMTP {
		t.Fatalf("envelope = %q %q lmtp=%v", m.From, m.To, m.LMTP)
	}
	if string(m.Data) != msg {
		t.Fatalf("data = %q, want %q (dot-unstuffed)", m.Data, msg)
	}

	// LMTP answers once per recipient after DATA.
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tc := textproto.NewConn(conn)
	expect := func(code int) string {
		t.Helper()
		_, line, err := tc.ReadResponse(code)
		if err != nil {
			t.Fatalf("want %d: %v", code, err)
		}
		return line
	}
	expect(220)
	for _, cmd := range []string{"LHLO x", "MAIL FROM:<>", "RCPT TO:<r1@example.test>", "RCPT TO:<r2@example.test>"} {
		tc.PrintfLine("%s", cmd)
		expect(250)
	}
	tc.PrintfLine("DATA")
	expect(354)
	tc.PrintfLine("Subject: lmtp\r\n\r\nx\r\n.")
	if l := expect(250); !strings.Contains(l, "r1@example.test") {
		t.Fatalf("first LMTP reply %q, want it to name r1", l)
	}
	if l := expect(250); !strings.Contains(l, "r2@example.test") {
		t.Fatalf("second LMTP reply %q, want it to name r2", l)
	}
	got, err = s.WaitFor(2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !got[1].LMTP || got[1].From != "" || len(got[1].To) != 2 {
		t.Fatalf("LMTP message = %+v", got[1])
	}
	if _, err := s.WaitFor(3, 50*time.Millisecond); err == nil {
		t.Fatal("WaitFor(3) succeeded with 2 messages")
	}
}

func testMessage(subject string) []byte {
	return []byte("From: sender@example.org\r\nTo: rcpt@example.test\r\nSubject: " + subject +
		"\r\nMessage-ID: <" + subject + "@example.org>\r\n\r\nHello from testenv.\r\n")
}

func TestPostfixDelivers(t *testing.T) {
	start := time.Now()
	p := StartPostfix(t, PostfixOptions{})
	t.Logf("postfix start-up (dirs + master + first 220 banner): %v", time.Since(start))

	send := time.Now()
	to := []string{"alice@example.test", "bob@elsewhere.test"}
	if err := p.Send("sender@example.org", to, testMessage("delivery-test")); err != nil {
		t.Fatalf("Send: %v\n%s", err, p.Log())
	}
	msgs, err := p.Sink().WaitFor(1, 20*time.Second)
	if err != nil {
		t.Fatalf("%v\n%s", err, p.Log())
	}
	t.Logf("SMTP submission to sink delivery: %v", time.Since(send))
	if err := p.WaitQueueEmpty(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Postfix may split recipients into one delivery per destination.
	var rcpts []string
	for _, m := range p.Sink().Messages() {
		if m.From != "sender@example.org" || !m.LMTP {
			t.Errorf("delivered envelope from %q lmtp=%v, want sender@example.org over LMTP", m.From, m.LMTP)
		}
		if !bytes.Contains(m.Data, []byte("Subject: delivery-test")) || !bytes.Contains(m.Data, []byte("Received: from client.example.test")) {
			t.Errorf("delivered data lacks the subject or Postfix's Received header:\n%s", m.Data)
		}
		rcpts = append(rcpts, m.To...)
	}
	if len(msgs) == 0 || len(rcpts) != 2 {
		t.Fatalf("recipients delivered = %v, want %v", rcpts, to)
	}
	if l, err := p.WaitLog("status=sent", 5*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, l)
	}

	// Stop leaves no daemon holding the SMTP port.
	p.Stop()
	if p.Running() || !portFree(p.port) {
		t.Fatalf("after Stop: Running() = %v, port %d free = %v; want false, true", p.Running(), p.port, portFree(p.port))
	}
}

func TestPostfixMilterUnreachable(t *testing.T) {
	p := StartPostfix(t, PostfixOptions{MilterAddr: FreeAddr(t)})
	err := p.Send("sender@example.org", []string{"alice@example.test"}, testMessage("milter-down"))
	var te *textproto.Error
	if !errors.As(err, &te) || te.Code/100 != 4 {
		t.Fatalf("Send with unreachable milter: err %v, want a 4xx SMTP reply (milter_default_action=tempfail)", err)
	}
	t.Logf("reply with milter down: %v", err)
	if l, err := p.WaitLog("milter", 5*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, l)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(p.Sink().Messages()); n != 0 {
		t.Fatalf("sink got %d messages with the milter down, want 0", n)
	}
}

func TestPostfixMilterAcceptAction(t *testing.T) {
	// With milter_default_action=accept the same outage lets mail through:
	// the harness option really reaches main.cf.
	p := StartPostfix(t, PostfixOptions{MilterAddr: FreeAddr(t), MilterDefaultAction: "accept"})
	if err := p.Send("sender@example.org", []string{"alice@example.test"}, testMessage("milter-accept")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if _, err := p.Sink().WaitFor(1, 20*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, p.Log())
	}
}

func TestPostfixDeferAndFlush(t *testing.T) {
	// Deliver to an address where nothing listens yet: the message is
	// deferred, then delivered once a sink appears and the queue is flushed.
	addr := FreeAddr(t)
	p := StartPostfix(t, PostfixOptions{Transport: "lmtp:inet:" + addr, Main: map[string]string{
		// Keep Postfix from retrying by itself, so Flush is what delivers.
		"queue_run_delay": "300s", "minimal_backoff_time": "300s", "maximal_backoff_time": "300s",
	}})
	if p.Sink() != nil {
		t.Fatal("Sink() != nil with a Transport set")
	}
	if err := p.Send("sender@example.org", []string{"alice@example.test"}, testMessage("deferred")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if l, err := p.WaitLog("status=deferred", 20*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, l)
	}
	if n, err := p.QueueLen(); err != nil || n != 1 {
		t.Fatalf("QueueLen = %d, %v; want 1 deferred message", n, err)
	}
	sink := StartSinkOn(t, addr)
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.WaitFor(1, 20*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, p.Log())
	}
	if err := p.WaitQueueEmpty(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestPostfixParallelInstances(t *testing.T) {
	// Two instances in one binary must not share ports, queues or logs.
	var ps [2]*Postfix
	for i := range ps {
		ps[i] = StartPostfix(t, PostfixOptions{})
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ps))
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Send("s@example.org", []string{fmt.Sprintf("r%d@example.test", i)}, testMessage(fmt.Sprintf("parallel-%d", i)))
		}()
	}
	wg.Wait()
	for i, p := range ps {
		if errs[i] != nil {
			t.Fatalf("instance %d Send: %v", i, errs[i])
		}
		msgs, err := p.Sink().WaitFor(1, 20*time.Second)
		if err != nil {
			t.Fatalf("instance %d: %v\n%s", i, err, p.Log())
		}
		if want := fmt.Sprintf("r%d@example.test", i); len(msgs) != 1 || msgs[0].To[0] != want {
			t.Fatalf("instance %d delivered %+v, want one message to %s", i, msgs, want)
		}
	}
	if ps[0].SMTPAddr() == ps[1].SMTPAddr() || ps[0].QueueDir() == ps[1].QueueDir() {
		t.Fatal("instances share an address or queue directory")
	}
}

func BenchmarkStartRedis(b *testing.B) {
	for b.Loop() {
		r := StartRedis(b, RedisOptions{})
		r.Stop()
	}
}

func BenchmarkStartPostfix(b *testing.B) {
	for b.Loop() {
		p := StartPostfix(b, PostfixOptions{})
		p.Stop()
	}
}

func FuzzSinkParsers(f *testing.F) {
	f.Add("FROM:<a@b> BODY=8BITMIME", "x\r\n..y\r\n.\r\n")
	f.Add("to:<>", ".\n")
	f.Add("FROM:<unterminated", "no end")
	f.Fuzz(func(t *testing.T, arg, data string) {
		// Only the first <...> is taken, so the address never holds '>'.
		if addr, ok := pathArg(arg, "FROM:"); ok && strings.Contains(addr, ">") {
			t.Fatalf("pathArg(%q) = %q contains '>'", arg, addr)
		}
		got, err := readData(bufio.NewReader(strings.NewReader(data)), 1<<10)
		// What readData must return: the lines before the first
		// terminator line, each un-stuffed. (A stuffed ".." line is a
		// "." line of the message, so the output may well contain
		// "\r\n.\r\n"; an earlier version of this check refused it.)
		var want []byte
		ended := false
		for _, line := range bytes.SplitAfter([]byte(data), []byte("\n")) {
			if string(line) == ".\r\n" || string(line) == ".\n" {
				ended = true
				break
			}
			if !bytes.HasSuffix(line, []byte("\n")) {
				break // the last, unterminated line
			}
			if bytes.HasPrefix(line, []byte("..")) {
				line = line[1:]
			}
			want = append(want, line...)
		}
		switch {
		case !ended && err == nil:
			t.Fatalf("readData(%q) = %q without a terminator", data, got)
		case ended && len(want) <= 1<<10 && (err != nil || !bytes.Equal(got, want)):
			t.Fatalf("readData(%q) = %q, %v; want %q", data, got, err, want)
		}
	})
}
