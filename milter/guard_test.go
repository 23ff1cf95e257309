package milter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/signature"
)

// These tests speak the milter protocol byte by byte, as a broken or
// hostile peer on the milter socket would. Before the packet guard, a
// zero-length packet or a CONNECT, MAIL or RCPT without its terminator
// crashed the whole process (go-milter panics in its own goroutine).

// packet frames one milter packet.
func packet(code byte, data ...[]byte) []byte {
	body := append([]byte{code}, bytes.Join(data, nil)...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func cstr(s string) []byte { return append([]byte(s), 0) }

// optneg offers protocol version 6, every action and every protocol flag.
func optneg() []byte {
	var d []byte
	for _, v := range []uint32{6, 0x1ff, 0x1fffff} {
		d = binary.BigEndian.AppendUint32(d, v)
	}
	return packet('O', d)
}

// rawSession dials the harness, negotiates unless told not to, and
// returns the connection.
func (h *harness) rawSession(t *testing.T, negotiate bool) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if negotiate {
		if _, err := c.Write(optneg()); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(time.Minute))
		var n uint32
		if err := binary.Read(c, binary.BigEndian, &n); err != nil {
			t.Fatalf("negotiation reply: %v", err)
		}
		reply := make([]byte, n)
		if _, err := io.ReadFull(c, reply); err != nil || reply[0] != 'O' {
			t.Fatalf("negotiation reply %q: %v", reply, err)
		}
	}
	return c
}

// waitClosed reads until the daemon closes the connection; anything it
// answers meanwhile is returned.
func waitClosed(t *testing.T, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	got, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("session still open a minute after a bad packet (got %q)", got)
	}
	return got
}

func (h *harness) counter(t *testing.T, name, label string) float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && !hasLabel(m, label) {
				continue
			}
			if m.Counter != nil {
				sum += m.Counter.GetValue()
			} else if m.Gauge != nil {
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum
}

func hasLabel(m *dto.Metric, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetValue() == value {
			return true
		}
	}
	return false
}

// waitGauge waits until a gauge is back at want (sessions end
// asynchronously after the connection closes).
func (h *harness) waitGauge(t *testing.T, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a bound for a gauge that never comes back, not a speed
	for {
		got := h.counter(t, name, "")
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v after a minute, want %v", name, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Every malformed input ends its own session and nothing else: a normal
// message still gets its verdict afterwards, no panic is recovered or
// escapes, and no session or message stays counted as open.
func TestMalformedPackets(t *testing.T) {
	conn := packet('C', cstr("mx.example"), []byte{'4'}, binary.BigEndian.AppendUint16(nil, 25), cstr("192.0.2.1"))
	mail := packet('M', cstr("<a@example.com>"))
	cases := []struct {
		name      string
		negotiate bool
		send      [][]byte
		protoErr  bool // refused by the guard (counted), not by the library
	}{
		{"zero length before negotiation", false, [][]byte{{0, 0, 0, 0}}, true},
		{"zero length after negotiation", true, [][]byte{{0, 0, 0, 0}}, true},
		{"2 GiB length prefix", true, [][]byte{{0x80, 0, 0, 0, 'B'}}, true},
		{"512 MiB length prefix (the library's own cap)", true, [][]byte{{0x1f, 0xff, 0xff, 0xff, 'B'}}, true},
		{"4 GiB length prefix before negotiation", false, [][]byte{{0xff, 0xff, 0xff, 0xff, 'O'}}, true},
		{"truncated length prefix", true, [][]byte{{0, 0}}, false},
		{"truncated packet", true, [][]byte{{0, 0, 0, 100, 'B', 'x', 'y'}}, false},
		{"unknown command", true, [][]byte{packet('Z', []byte("what"))}, false},
		{"garbage after negotiation", true, [][]byte{[]byte("\x00\x00\x00\x09GARBAGE!\x00\xde\xad\xbe\xef")}, false},
		{"command before negotiation", false, [][]byte{conn}, false},
		{"second negotiation", true, [][]byte{optneg()}, false},
		{"CONNECT without terminator", true, [][]byte{packet('C', []byte("host"))}, true},
		{"CONNECT without family", true, [][]byte{packet('C', cstr("host"))}, true},
		{"CONNECT with a bad address", true, [][]byte{packet('C', cstr("host"), []byte{'4', 0, 25}, cstr("not-an-ip"))}, false},
		{"MAIL without terminator", true, [][]byte{conn, packet('M', []byte("<a@example.com>"))}, true},
		{"RCPT without terminator", true, [][]byte{conn, mail, packet('R', []byte("<b@example.test>"))}, true},
		{"empty MAIL", true, [][]byte{conn, packet('M')}, true},
		{"header with one string", true, [][]byte{conn, mail, packet('L', []byte("Subject"))}, false},
		{"macro packet of 3 MiB", true, [][]byte{packet('D', []byte{'C'}, bytes.Repeat([]byte("j\x00x\x00"), 3<<18))}, true},
		{"body chunk of 3 MiB", true, [][]byte{conn, mail, packet('B', make([]byte, 3<<20))}, true},
	}
	h := start(t, nil)
	var wantProto float64
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := h.rawSession(t, tc.negotiate)
			for _, b := range tc.send {
				if _, err := c.Write(b); err != nil {
					break // the daemon may close before all is written
				}
			}
			if strings.HasPrefix(tc.name, "truncated") {
				// The peer goes away mid-packet.
				c.(*net.TCPConn).CloseWrite()
			}
			waitClosed(t, c)
			if tc.protoErr {
				wantProto++
			}
			if got := h.counter(t, "bulkmilter_errors_total", "protocol"); got != wantProto {
				t.Errorf("errors_total{stage=protocol} = %v, want %v", got, wantProto)
			}
			res := h.send(t, mtaclient.Envelope{From: "a@example.com", Rcpts: []string{"b@example.test"}}, plain)
			if v, _ := res.Header("X-Bulk"); v != "no; family=imatch; volume=1; level=0; kind=undeclared" {
				t.Errorf("normal message after the bad session: X-Bulk %q", v)
			}
		})
	}
	h.waitGauge(t, "bulkmilter_sessions_active", 0)
	h.waitGauge(t, "bulkmilter_messages_in_progress", 0)
	if got := h.counter(t, "bulkmilter_panics_recovered_total", ""); got != 0 {
		t.Errorf("panics_recovered_total = %v", got)
	}
}

// A length prefix is not trusted with memory: a claimed 512 MiB packet
// allocates nothing before its bytes arrive (go-milter alone allocates
// the whole length at once).
func TestHugeLengthPrefixAllocatesNothing(t *testing.T) {
	h := start(t, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 8 {
		c := h.rawSession(t, true)
		c.Write([]byte{0x1f, 0xff, 0xff, 0xfe, 'B'})
		waitClosed(t, c)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("8 sessions claiming 512 MiB packets allocated %d MiB", grew>>20)
	}
}

// A header field longer than MaxHeaderPacket is cut, not fatal: the
// message gets its verdict, analysed with the first part of the value and
// marked truncated, and the next header field arrives intact.
func TestHugeHeaderFieldIsCut(t *testing.T) {
	h := start(t, nil)
	huge := "Subject: " + strings.Repeat("spam ", 1<<20) + "\nX-After: intact\nFrom: a@example.com\n\nbody\n"
	res := h.send(t, mtaclient.Envelope{From: "a@example.com", Rcpts: []string{"b@example.test"}}, huge)
	if v, _ := res.Header("X-Bulk"); v != "no; family=imatch; volume=1; level=0; kind=undeclared" {
		t.Errorf("X-Bulk %q after a 5 MiB header field", v)
	}
	h.pipe.mu.Lock()
	defer h.pipe.mu.Unlock()
	if len(h.pipe.seen) != 1 {
		t.Fatalf("pipeline saw %d messages, want 1", len(h.pipe.seen))
	}
	m := h.pipe.seen[0]
	if got := m.Header.Get("X-After"); got != "intact" {
		t.Errorf("header after the cut one = %q, want intact", got)
	}
	if s := m.Header.Get("Subject"); len(s) == 0 || len(s) > detect.DefaultLimits.FieldBytes || !strings.HasPrefix(s, "spam spam") {
		t.Errorf("cut Subject: %d bytes, prefix %.20q", len(s), s)
	}
	if !m.Truncated {
		t.Error("message with a cut header field not marked truncated")
	}
}

// The guard passes legitimate traffic through unchanged, including body
// chunks of the largest negotiable size and several messages per session.
func TestGuardPassesNormalTraffic(t *testing.T) {
	h := start(t, nil)
	body := strings.Repeat("line of body text\n", 200_000) // 3.6 MB, many chunks
	cl := mtaclient.New("tcp", h.addr)
	s, err := cl.Open(mtaclient.Envelope{From: "a@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		res, err := s.Send("", []string{"b@example.test"}, []byte("From: a@example.com\nSubject: x\n\n"+body))
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if v, _ := res.Header("X-Bulk"); v != "no; family=imatch; volume=1; level=0; kind=undeclared" {
			t.Errorf("message %d: X-Bulk %q", i, v)
		}
	}
	h.pipe.mu.Lock()
	defer h.pipe.mu.Unlock()
	for i, b := range h.pipe.bodies {
		if want := strings.ReplaceAll(body, "\n", "\r\n"); b != want[:min(len(want), h.state.Limits.BodyBytes)] {
			t.Errorf("message %d: body of %d bytes differs from the %d sent", i, len(b), len(want))
		}
	}
	if got := h.counter(t, "bulkmilter_errors_total", "protocol"); got != 0 {
		t.Errorf("errors_total{stage=protocol} = %v on normal traffic", got)
	}
}

// flakyListener fails its first Accept calls as a process out of file
// descriptors does.
type flakyListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// A failed Accept (EMFILE) does not stop the server: go-milter alone
// returns from Serve, which ended the daemon.
func TestAcceptErrorsAreOutlasted(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := &harness{state: defaultState(), pipe: &scripted{}, reg: reg, met: metrics.New(reg)}
	h.pipe.verdict = func(*detect.Message) detect.Verdict {
		return detect.Verdict{Family: signature.FamilyIMatch, Volume: 1}
	}
	h.state.Pipeline = h.pipe
	h.srv = NewServer(Options{State: func() *State { return h.state }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Observer: h.met})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &flakyListener{Listener: inner}
	ln.fails.Store(3)
	h.addr = inner.Addr().String()
	served := make(chan error, 1)
	go func() { served <- h.srv.Serve(ln) }()
	res := h.send(t, mtaclient.Envelope{From: "a@example.com", Rcpts: []string{"b@example.test"}}, plain)
	if v, _ := res.Header("X-Bulk"); v != "no; family=imatch; volume=1; level=0; kind=undeclared" {
		t.Errorf("X-Bulk %q after failed accepts", v)
	}
	if got := h.counter(t, "bulkmilter_errors_total", "protocol"); got != 3 {
		t.Errorf("errors_total{stage=protocol} = %v, want 3 failed accepts", got)
	}
	h.srv.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after Close: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return a minute after Close")
	}
}

// An MTA that takes more than go-milter's hard-coded second to send its
// negotiation (a busy host) is still served.
func TestSlowNegotiationIsWaitedFor(t *testing.T) {
	h := start(t, nil)
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(1500 * time.Millisecond)
	if _, err := c.Write(optneg()); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(time.Minute))
	var n uint32
	if err := binary.Read(c, binary.BigEndian, &n); err != nil {
		t.Fatalf("negotiation 1.5 s after connecting: %v", err)
	}
}

// A connection that never negotiates is still dropped, after
// negotiationTimeout.
func TestSilentConnectionIsDropped(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 10 s negotiation timeout")
	}
	h := start(t, nil)
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	// Two minutes bound a connection never closed: the next timeout, the
	// server's ReadTimeout, is 15 minutes, so a close before it is the
	// negotiation's, and a busy machine only makes it later.
	c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("silent connection: %v (want the daemon to close it)", err)
	}
	if took := time.Since(start); took < negotiationTimeout-time.Second {
		t.Errorf("silent connection closed after %s, want no sooner than %s", took, negotiationTimeout)
	}
}
