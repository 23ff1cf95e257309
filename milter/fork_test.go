package milter

import (
	gomilter "github.com/d--j/go-milter"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/d--j/go-milter/milterutil"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/signature"
)

// TestForkFastPath: the patched go-milter (third_party/go-milter) returns
// a header value with nothing to replace as it is, without allocating,
// and replaces what upstream replaces in the others.
func TestForkFastPath(t *testing.T) {
	tests := []struct {
		in, lf, space string
	}{
		{"no, family=imatch, volume=1", "no, family=imatch, volume=1", "no, family=imatch, volume=1"},
		{"", "", ""},
		{"a\nb", "a\nb", "a b"},
		{"a\r\nb", "a\nb", "a b"},
		{"a\rb\r", "a\nb\n", "a b "},
		{"a\x00b", "a b", "a b"},
		{"a\r\n\r\nb\x00", "a\n\nb ", "a  b "},
	}
	for _, tt := range tests {
		if got := milterutil.CrLfToLf(tt.in); got != tt.lf {
			t.Errorf("CrLfToLf(%q) = %q, want %q", tt.in, got, tt.lf)
		}
		if got := milterutil.NewlineToSpace(tt.in); got != tt.space {
			t.Errorf("NewlineToSpace(%q) = %q, want %q", tt.in, got, tt.space)
		}
	}
	v := "no, family=imatch, volume=1, threshold=50"
	if n := testing.AllocsPerRun(100, func() { v = milterutil.CrLfToLf(v) }); n != 0 {
		t.Errorf("CrLfToLf allocates %.0f objects for a value with nothing to replace", n)
	}
	if n := testing.AllocsPerRun(100, func() { v = milterutil.NewlineToSpace(v) }); n != 0 {
		t.Errorf("NewlineToSpace allocates %.0f objects for a value with nothing to replace", n)
	}
}

// TestSessionAllocs: a message's allocations over the milter protocol on
// loopback, the MTA client in the same process and the verdict decided at
// once: what the session costs outside the analysis. Our go-milter fork
// reads packets in place from the guard (NextPacket), makes a session's
// modifier once per state and a header's strings from one copy: 314
// objects a message before, 249 after, mtaclient's included; 241 with the
// header built at once and the verdict header in one buffer (detect); 203
// with header fields as bytes, macros as one string a packet, the
// negotiation and modifications in one buffer and lone packets in place;
// 188 with packets written whole by the guard, the macros in reused
// buffers and the modifiers made with the session; 173 without HELO and
// the end of the header, which the milter asks not to be sent, and their
// macros; 171 with the negotiation reply made in the session.
const sessionAllocBudget = 178 // 171 measured; 203 before the ninth sitting; 240 on main af5bd66, 249 before the first q-alloc, 314 before q-e2e

func TestSessionAllocs(t *testing.T) {
	h := start(t, nil)
	env := mtaclient.Envelope{From: "news@shop.example", Rcpts: []string{"ann@example.test"}, QueueID: "Q1"}
	h.send(t, env, plain)
	n := testing.AllocsPerRun(200, func() { h.send(t, env, plain) })
	t.Logf("%.0f objects a message, client and server", n)
	if testenv.RaceEnabled {
		// The race detector's sync.Pool drops a quarter of what is put
		// back at random (the guard's packet buffers, the builders), so
		// the count is not the code's: CI's second pass, without -race,
		// holds the budget.
		return
	}
	if n > sessionAllocBudget {
		t.Errorf("a message allocates %.0f objects, client and server; budget %d", n, sessionAllocBudget)
	}
}

// TestSessionsOnPooledGoroutines: MTA connections, one after another, are
// served by the pool's long-lived goroutines (go-milter's WithSpawn, our
// patch), whose stacks have grown already, not each by a new goroutine.
func TestSessionsOnPooledGoroutines(t *testing.T) {
	h := start(t, nil)
	var mu sync.Mutex
	seen := map[string]int{}
	h.pipe.verdict = func(*detect.Message) detect.Verdict {
		// The scripted pipeline runs on the session's goroutine.
		buf := make([]byte, 64)
		id, _, _ := strings.Cut(strings.TrimPrefix(string(buf[:runtime.Stack(buf, false)]), "goroutine "), " ")
		mu.Lock()
		seen[id]++
		mu.Unlock()
		return detect.Verdict{Family: signature.FamilyIMatch, Volume: 1}
	}
	env := mtaclient.Envelope{From: "news@shop.example", Rcpts: []string{"ann@example.test"}}
	n := 2*sessionGoroutines() + 10
	for range n {
		h.send(t, env, plain)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) > sessionGoroutines() {
		t.Errorf("%d connections one after another ran on %d goroutines, want at most the pool's %d", n, len(seen), sessionGoroutines())
	}
}

// TestIgnoredEventsNotSent: the milter asks the MTA not to send the events
// it ignores (HELO, the end of the header, DATA, unknown commands) and not
// to wait for a reply before the end of the message.
func TestIgnoredEventsNotSent(t *testing.T) {
	h := start(t, nil)
	c := gomilter.NewClient("tcp", h.addr, gomilter.WithActions(actions|gomilter.OptSetMacros), gomilter.WithProtocols(gomilter.OptProtocol(0x1fffff)))
	s, err := c.Session(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, o := range []gomilter.OptProtocol{gomilter.OptNoHelo, gomilter.OptNoEOH, gomilter.OptNoData, gomilter.OptNoUnknown,
		gomilter.OptNoConnReply, gomilter.OptNoMailReply, gomilter.OptNoRcptReply, gomilter.OptNoHeaderReply, gomilter.OptNoBodyReply} {
		if !s.ProtocolOption(o) {
			t.Errorf("protocol option %#x not negotiated", o)
		}
	}
	for _, o := range []gomilter.OptProtocol{gomilter.OptNoConnect, gomilter.OptNoMailFrom, gomilter.OptNoRcptTo, gomilter.OptNoHeaders, gomilter.OptNoBody} {
		if s.ProtocolOption(o) {
			t.Errorf("protocol option %#x negotiated: the milter needs that event", o)
		}
	}
}
