package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// Hostile input through the real milter protocol, against the milterd
// binary run as its own process: each message gets a verdict within the
// daemon's budget, the daemon's peak resident memory stays bounded
// whatever the size of the input, and other MTA connections are served
// throughout.

// hostileMessage is one hostile input.
type hostileMessage struct {
	name string
	make func() []byte
	// heavy inputs (tens of megabytes) are skipped under -short: under
	// the race detector the client side alone takes most of a minute.
	heavy bool
}

const hostileHead = "From: attacker@hostile.example\nTo: victim@example.test\nSubject: hostile\nMessage-ID: <h@hostile.example>\nMIME-Version: 1.0\n"

func hostileMessages() []hostileMessage {
	rng := rand.New(rand.NewPCG(10, 10))
	words := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(randomWord(rng))
			if i%12 == 11 {
				b.WriteByte('\n')
			} else {
				b.WriteByte(' ')
			}
		}
		return b.String()
	}
	return []hostileMessage{
		{name: "50MB text body", heavy: true, make: func() []byte {
			var b bytes.Buffer
			b.WriteString(hostileHead + "Content-Type: text/plain; charset=utf-8\n\n")
			line := words(200)
			for b.Len() < 50<<20 {
				b.WriteString(line)
			}
			return b.Bytes()
		}},
		{name: "50MB base64 attachment", heavy: true, make: func() []byte {
			var b bytes.Buffer
			b.WriteString(hostileHead + "Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nsee attached\n--b\nContent-Type: application/octet-stream\nContent-Transfer-Encoding: base64\n\n")
			line := strings.Repeat("QUJD", 19) + "\n"
			for b.Len() < 50<<20 {
				b.WriteString(line)
			}
			b.WriteString("--b--\n")
			return b.Bytes()
		}},
		{name: "10,000 header fields", make: func() []byte {
			var b bytes.Buffer
			for i := range 10_000 {
				fmt.Fprintf(&b, "X-Filler-%d: %s\n", i, strings.Repeat("v", 40))
			}
			b.WriteString(hostileHead + "\n" + words(100))
			return b.Bytes()
		}},
		{name: "1MB header line", make: func() []byte {
			return []byte("X-Huge: " + strings.Repeat("a", 1<<20) + "\n" + hostileHead + "\n" + words(100))
		}},
		{name: "1MB folded Subject", make: func() []byte {
			var b bytes.Buffer
			b.WriteString("Subject: start")
			for b.Len() < 1<<20 {
				b.WriteString("\n " + words(10)[:40])
			}
			b.WriteString("\nFrom: a@hostile.example\n\n" + words(100))
			return b.Bytes()
		}},
		{name: "10,000 encoded words in a header", make: func() []byte {
			return []byte("X-Words: " + strings.Repeat("=?x-unknown?B?////?= =?utf-8?Q?=FF=FE?= ", 5000) + "\n" + hostileHead + "\n" + words(50))
		}},
		{name: "100-level MIME nesting", make: func() []byte {
			var b bytes.Buffer
			b.WriteString(hostileHead)
			for i := range 100 {
				fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"n%d\"\n\n--n%d\n", i, i)
			}
			b.WriteString("Content-Type: text/plain\n\n" + words(50) + "\n")
			for i := 99; i >= 0; i-- {
				fmt.Fprintf(&b, "--n%d--\n", i)
			}
			return b.Bytes()
		}},
		{name: "100 nested message/rfc822", make: func() []byte {
			var b bytes.Buffer
			b.WriteString(hostileHead)
			for range 100 {
				b.WriteString("Content-Type: message/rfc822\n\nFrom: inner@hostile.example\nSubject: inner\nMIME-Version: 1.0\n")
			}
			b.WriteString("Content-Type: text/plain\n\n" + words(50))
			return b.Bytes()
		}},
		{name: "10,000 MIME parts", make: func() []byte {
			var b bytes.Buffer
			b.WriteString(hostileHead + "Content-Type: multipart/mixed; boundary=p\n\n")
			for i := range 10_000 {
				fmt.Fprintf(&b, "--p\nContent-Type: text/plain; charset=utf-8\n\npart %d %s\n", i, words(5))
			}
			b.WriteString("--p--\n")
			return b.Bytes()
		}},
		{name: "unterminated multipart, 1MB boundary", make: func() []byte {
			bd := strings.Repeat("B", 1<<20)
			return []byte(hostileHead + "Content-Type: multipart/mixed; boundary=\"" + bd + "\"\n\n--" + bd + "\nContent-Type: text/plain\n\n" + words(100))
		}},
		{name: "invalid charsets", make: func() []byte {
			var b bytes.Buffer
			b.WriteString(hostileHead + "Content-Type: multipart/mixed; boundary=c\n\n")
			for _, cs := range []string{"x-unknown", "utf-7", "utf-16", "utf-32", "iso-2022-jp", "shift_jis", "gb18030", "big5", "koi8-r", "\"\"", "utf-8\x00evil", strings.Repeat("z", 4096)} {
				fmt.Fprintf(&b, "--c\nContent-Type: text/plain; charset=%s\n\n", cs)
				g := make([]byte, 2048)
				for i := range g {
					g[i] = byte(rng.IntN(256))
				}
				b.Write(g)
				b.WriteString("\n" + words(30) + "\n")
				fmt.Fprintf(&b, "--c\nContent-Type: text/html; charset=%s\nContent-Transfer-Encoding: quoted-printable\n\n=ZZ=\n=F=\n=%s\n", cs, strings.Repeat("=C3=", 500))
				fmt.Fprintf(&b, "--c\nContent-Type: text/plain; charset=%s\nContent-Transfer-Encoding: base64\n\n!!!!not base64 at all @@@@\n%s\n", cs, strings.Repeat("A", 4097))
			}
			b.WriteString("--c--\n")
			return b.Bytes()
		}},
		{name: "binary garbage body", make: func() []byte {
			g := make([]byte, 3<<20)
			for i := range g {
				g[i] = byte(rng.IntN(256))
			}
			return append([]byte(hostileHead+"Content-Type: text/plain; charset=utf-8\n\n"), g...)
		}},
		{name: "binary garbage headers and body", make: func() []byte {
			g := make([]byte, 1<<20)
			for i := range g {
				g[i] = byte(rng.IntN(256))
			}
			return g
		}},
		{name: "HTML bomb: 200,000 nested elements", make: func() []byte {
			var b bytes.Buffer
			b.WriteString(hostileHead + "Content-Type: text/html; charset=utf-8\n\n<html><body>")
			for range 100_000 {
				b.WriteString("<div><b>")
			}
			b.WriteString(words(100))
			return b.Bytes()
		}},
		{name: "HTML bomb: 3MB attribute value", make: func() []byte {
			return []byte(hostileHead + "Content-Type: text/html; charset=utf-8\n\n<html><body><a href=\"" +
				strings.Repeat("x", 3<<20) + "\" style=\"" + strings.Repeat("color:red;", 1000) + "\">click</a>" + words(100) + "</body></html>")
		}},
		{name: "HTML bomb: tables, styles, entities", make: func() []byte {
			var b bytes.Buffer
			b.WriteString(hostileHead + "Content-Type: text/html; charset=utf-8\n\n<html><head><style>")
			for i := range 20_000 {
				fmt.Fprintf(&b, ".c%d, div > p.c%d { color: #%06x; font-size: %dpx }\n", i, i, i, i%40)
			}
			b.WriteString("</style></head><body>")
			for range 20_000 {
				b.WriteString("<table><tr><td style=\"display:none;font-size:0;color:rgba(0,0,0,0)\">&#99999999;&amp;&lt;&#x110000;&nbsp")
			}
			b.WriteString(words(100))
			return b.Bytes()
		}},
		{name: "4MB single line, no newline", make: func() []byte {
			return []byte(hostileHead + "Content-Type: text/plain\n\n" + strings.Repeat("word", 1<<20))
		}},
	}
}

// vmHWM returns the peak resident set of a process in bytes, from
// /proc/PID/status.
func vmHWM(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read /proc/%d/status: %v", pid, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// cpuTime returns the user and system CPU time a process has used
// (10 ms resolution; the daemon waits for no children).
func cpuTime(t testing.TB, pid int) time.Duration {
	t.Helper()
	cpu, err := testenv.ProcessCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	return cpu
}

// Every hostile input gets a verdict header within the daemon's budget,
// the daemon's peak RSS grows by a bounded amount, and a steady stream of
// ordinary messages on other connections is answered throughout.
//
// The bound: measured, the peak is about 60 MiB over the baseline
// whether the body is 10, 50 or 100 MB (the first 4 MiB are analysed,
// the rest dropped as it arrives). By design the daemon keeps at most
// limits.max_message_bytes (4 MiB) of body, limits.max_headers (1000)
// fields of at most 64 KiB, a 256 KiB header packet and
// limits.max_text_bytes (1 MiB) of decoded text per message, and the
// guard reads packets of at most 2 MiB. Parsing holds a few copies of
// that (raw, decoded, text, tokens), so one message's working set is
// tens of MiB at most whatever its size; 96 MiB over the baseline (192
// MiB with the race detector's shadow memory) leaves room for the
// garbage collector's slack and still fails when any input is held
// whole: the two 50 MB inputs alone would take 100 MB (50 MB in the
// guard's buffer and 50 in the session's).
func TestHostileInput(t *testing.T) {
	d := startDaemon(t)
	pid := d.cmd.Process.Pid
	cl := mtaclient.New("tcp", d.milterAddr)
	rng := rand.New(rand.NewPCG(3, 4))
	// Warm up: the first message loads the lexicon's tables and sizes
	// the runtime's heap.
	for i := range 20 {
		rcpt := recipientAddr(i)
		if _, err := cl.Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{rcpt}}, campaign(i, rcpt, recipientName(i), rng)); err != nil {
			t.Fatal(err)
		}
	}
	base := vmHWM(t, pid)
	bound := int64(96 << 20)
	if testenv.RaceEnabled {
		bound *= 2
	}
	// The daemon's budget: 1.5 s of CPU for a message, far above what
	// the limits let any message cost (the worst measured, binary
	// garbage, 0.3 s). It is held against the CPU time the daemon spent
	// while the message was sent and judged, not the wall time: on two
	// shared cores a reply can wait seconds for a CPU, while an input that
	// made the daemon work too hard shows in its CPU time whatever the
	// machine does. (The wall time is reported.)
	budget := 1500 * time.Millisecond
	if testenv.RaceEnabled {
		// The race detector slows this CPU-bound work 5 to 10 times
		// (binary garbage: 0.32 s → 1.4 s); the run without it, in CI's
		// second pass, holds the real budget.
		budget *= 5
	}

	// Ordinary traffic on other connections throughout.
	stop := make(chan struct{})
	var (
		wg               sync.WaitGroup
		served, failures atomic.Int64
		firstErr         atomic.Value
	)
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(7, 8))
		cl := mtaclient.New("tcp", d.milterAddr)
		for i := 1000; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			rcpt := recipientAddr(i)
			res, err := cl.Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{rcpt}}, campaign(i, rcpt, recipientName(i), rng))
			if _, ok := res.Header("X-Bulk"); err != nil || !ok {
				failures.Add(1)
				firstErr.CompareAndSwap(nil, fmt.Sprintf("ordinary message %d: err %v, mods %v", i, err, res.Mods))
				continue
			}
			served.Add(1)
		}
	})
	defer func() { close(stop); wg.Wait() }()

	var tried int
	for i, h := range hostileMessages() {
		if h.heavy && testing.Short() {
			t.Logf("%s: skipped under -short", h.name)
			continue
		}
		tried++
		msg := h.make()
		start, cpu0 := time.Now(), cpuTime(t, pid)
		res, err := cl.Send(mtaclient.Envelope{From: "attacker@hostile.example", Rcpts: []string{fmt.Sprintf("victim%d@example.test", i)}}, msg)
		took, cpu := time.Since(start), cpuTime(t, pid)-cpu0
		if err != nil {
			t.Errorf("%s: no reply: %v\n%s", h.name, err, d.Logs())
			continue
		}
		v, ok := res.Header("X-Bulk")
		if !ok || !strings.HasPrefix(v, "no") && !strings.HasPrefix(v, "yes") {
			t.Errorf("%s: no verdict header: %q (%v)", h.name, v, res.Mods)
		}
		if cpu > budget {
			t.Errorf("%s: the daemon spent %s of CPU on it, budget %s", h.name, cpu, budget)
		}
		peak := vmHWM(t, pid)
		t.Logf("%-40s %6.1f MB in %6s, daemon CPU %6s, verdict after %8s: %q; peak RSS %.1f MiB (+%.1f)", h.name, float64(len(msg))/1e6,
			took.Round(time.Millisecond), cpu, res.Wait.Round(time.Microsecond), v, float64(peak)/(1<<20), float64(peak-base)/(1<<20))
	}
	// Malformed milter packets on raw connections: the daemon ends each
	// such session (the guard's cases are in milter/guard_test.go; these
	// show the binary survives them).
	for _, raw := range []struct {
		name string
		b    []byte
	}{
		{"4 GiB length prefix", []byte{0xff, 0xff, 0xff, 0xff, 'O'}},
		{"2 GiB body packet", []byte{0x80, 0, 0, 0, 'B'}},
		{"zero length", []byte{0, 0, 0, 0}},
		{"HTTP request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"truncated packet", []byte{0, 0, 0, 100, 'O', 0, 0}},
	} {
		c, err := net.Dial("tcp", d.milterAddr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(raw.b)
		if raw.name == "truncated packet" {
			c.(*net.TCPConn).CloseWrite()
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		// EOF or a reset (closed with our bytes unread) ends it; a
		// timeout means the daemon still holds the session.
		if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("raw %s: the daemon did not end the session: %v", raw.name, err)
		}
		c.Close()
	}

	peak := vmHWM(t, pid)
	t.Logf("%d hostile inputs; daemon peak RSS %.1f MiB, %.1f MiB over the %.1f MiB baseline (bound %d MiB); %d ordinary messages served meanwhile",
		tried, float64(peak)/(1<<20), float64(peak-base)/(1<<20), float64(base)/(1<<20), bound>>20, served.Load())
	if peak-base > bound {
		t.Errorf("peak RSS grew by %.1f MiB, more than the %d MiB bound", float64(peak-base)/(1<<20), bound>>20)
	}
	// The daemon still serves: ordinary messages were answered meanwhile
	// and one more is answered now.
	time.Sleep(100 * time.Millisecond)
	if f := failures.Load(); f > 0 {
		t.Errorf("%d ordinary messages failed during the hostile inputs; first: %v", f, firstErr.Load())
	}
	if served.Load() == 0 {
		t.Error("no ordinary message was served during the hostile inputs")
	}
	res, err := cl.Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{"after@example.test"}}, campaign(1, "after@example.test", "After", rng))
	if err != nil {
		t.Fatalf("after the hostile inputs: %v\n%s", err, d.Logs())
	}
	verdictOf(t, res)
}
