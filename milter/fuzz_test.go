package milter

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/signature"
)

// chanListener hands connections made with net.Pipe to the server.
type chanListener struct {
	conns   chan net.Conn
	closed  chan struct{}
	once    sync.Once
	accepts atomic.Int64 // Accept calls so far
}

func (l *chanListener) Accept() (net.Conn, error) {
	l.accepts.Add(1)
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "unix"} }

// notifyConn reports when the server closed its end: the session is over,
// its Cleanup has run.
type notifyConn struct {
	net.Conn
	once sync.Once
	done chan struct{}
}

func (c *notifyConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

// sessionStream is a complete, valid session as Postfix sends it after
// negotiation: two messages, macros at every stage, then QUIT.
func sessionStream() []byte {
	var b []byte
	add := func(p []byte) { b = append(b, p...) }
	add(packet('D', []byte{'C'}, cstr("{client_addr}"), cstr("192.0.2.1"), cstr("j"), cstr("mx.example")))
	add(packet('C', cstr("client.example"), []byte{'4'}, binary.BigEndian.AppendUint16(nil, 25), cstr("192.0.2.1")))
	add(packet('H', cstr("client.example")))
	for i := range 2 {
		add(packet('D', []byte{'M'}, cstr("{auth_authen}"), cstr("anna"), cstr("i"), cstr("QID1")))
		add(packet('M', cstr("<a@example.com>"), cstr("SIZE=100")))
		add(packet('R', cstr("<b@example.test>")))
		add(packet('L', cstr("Subject"), cstr(" hello")))
		add(packet('L', cstr("X-Bulk"), cstr(" forged")))
		if i == 1 {
			add(packet('L', cstr("X-Bulk-Feedback"), cstr(" not-bulk")))
		}
		add(packet('N'))
		add(packet('B', []byte("body text\r\nmore\r\n")))
		add(packet('E'))
		add(packet('A'))
	}
	add(packet('Q'))
	return b
}

// FuzzSession drives the milter server with arbitrary bytes after a valid
// negotiation (or, when the first byte is odd, from the first byte on):
// whatever the peer sends, no panic escapes or is recovered, the session
// ends once the peer leaves, and it leaves no message counted in progress.
func FuzzSession(f *testing.F) {
	f.Add(append([]byte{0}, sessionStream()...))
	f.Add(append([]byte{1}, append(optneg(), sessionStream()...)...))
	f.Add([]byte{0, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 5, 'C', 'h', 'o', 's', 't'})
	f.Add([]byte{0, 0x80, 0, 0, 0, 'B'})
	// What the guard refuses or reads apart: CONNECT and MAIL without
	// their terminating NUL, and a body chunk larger than the read-ahead,
	// read past it.
	f.Add(append([]byte{0}, packet('C', []byte("client.example"))...))
	f.Add(append([]byte{0}, packet('M', []byte("<a@example.com>"))...))
	f.Add(append(append([]byte{0}, packet('M', cstr("<a@example.com>"))...),
		packet('B', make([]byte, readAhead+1))...))

	reg := prometheus.NewRegistry()
	met := metrics.New(reg)
	pipe := &scripted{verdict: func(*detect.Message) detect.Verdict {
		return detect.Verdict{Bulk: true, Base: true, Family: signature.FamilyIMatch, Volume: 12}
	}}
	state := defaultState()
	state.Pipeline, state.Feedback = pipe, &fbRecorder{}
	srv := NewServer(Options{
		State:    func() *State { return state },
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observer: met,
	})
	ln := &chanListener{conns: make(chan net.Conn), closed: make(chan struct{})}
	go srv.Serve(ln)
	f.Cleanup(func() { srv.Close() })

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		stream := data[1:]
		if data[0]&1 == 0 {
			stream = append(optneg(), stream...)
		}
		// Everything an input starts is over before the next one runs, so
		// that coverage belongs to the input that caused it.
		client, server := net.Pipe()
		nc := &notifyConn{Conn: server, done: make(chan struct{})}
		accepts := ln.accepts.Load()
		select {
		case ln.conns <- nc:
		case <-time.After(10 * time.Second):
			t.Fatal("server accepts no connection")
		}
		replies := make(chan struct{})
		go func() {
			io.Copy(io.Discard, client)
			close(replies)
		}()
		client.SetWriteDeadline(time.Now().Add(5 * time.Second))
		client.Write(stream)
		client.Close()
		<-replies
		select {
		case <-nc.done:
		case <-time.After(10 * time.Second):
			t.Fatal("session still open 10s after the peer left")
		}
		for ln.accepts.Load() == accepts {
			time.Sleep(10 * time.Microsecond) // the server is back in Accept
		}
		pipe.mu.Lock()
		pipe.seen, pipe.bodies = nil, nil // keep memory flat over a long run
		pipe.mu.Unlock()
		if n := srv.InProgress(); n != 0 {
			t.Fatalf("%d messages still in progress after the session ended", n)
		}
		if p := testutilCount(t, reg, "bulkmilter_panics_recovered_total"); p != 0 {
			t.Fatalf("a callback panicked (%v recovered)", p)
		}
	})
}

func testutilCount(t *testing.T, reg *prometheus.Registry, name string) float64 {
	h := &harness{reg: reg}
	return h.counter(t, name, "")
}
