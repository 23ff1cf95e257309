package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Message is one message delivered to a Sink.
type Message struct {
	From string   // envelope sender (MAIL FROM), without angle brackets
	To   []string // envelope recipients (RCPT TO), without angle brackets
	Data []byte   // the message as received, CRLF line ends, dot-unstuffed
	LMTP bool     // delivered over LMTP (LHLO) rather than SMTP
	Helo string   // the client's HELO/EHLO/LHLO name
}

// Sink is a tiny loopback SMTP and LMTP server that accepts every message
// and records it. It speaks just enough of RFC 5321/2033 for Postfix's
// smtp and lmtp clients (PIPELINING, 8BITMIME, SMTPUTF8, ENHANCEDSTATUSCODES;
// no TLS, no AUTH, no CHUNKING). It is safe for concurrent use.
type Sink struct {
	ln net.Listener

	mu      sync.Mutex
	msgs    []Message
	changed chan struct{} // closed and replaced whenever msgs grows
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// sinkHostname is what the sink greets with; it must differ from Postfix's
// myhostname or Postfix reports a mail loop.
const sinkHostname = "sink.testenv.invalid"

// StartSink starts a Sink on a free 127.0.0.1 port and closes it in
// t.Cleanup.
func StartSink(t testing.TB) *Sink {
	t.Helper()
	return StartSinkOn(t, "127.0.0.1:0")
}

// StartSinkOn starts a Sink listening on addr, e.g. an address handed to
// Postfix as Transport earlier, to end a simulated delivery outage.
func StartSinkOn(t testing.TB, addr string) *Sink {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("testenv: sink listen on %s: %v", addr, err)
	}
	s := &Sink{ln: ln, changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.Close)
	return s
}

// Addr returns the sink's "127.0.0.1:PORT".
func (s *Sink) Addr() string { return s.ln.Addr().String() }

// Close stops accepting, closes open sessions and waits for them to end.
func (s *Sink) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Messages returns a copy of the messages received so far, in order.
func (s *Sink) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneMessages(s.msgs)
}

func cloneMessages(in []Message) []Message {
	out := make([]Message, len(in))
	for i, m := range in {
		m.To = append([]string(nil), m.To...)
		m.Data = append([]byte(nil), m.Data...)
		out[i] = m
	}
	return out
}

// WaitFor waits until at least n messages have arrived and returns all of
// them, or returns what arrived so far with an error after timeout.
func (s *Sink) WaitFor(n int, timeout time.Duration) ([]Message, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if len(s.msgs) >= n {
			defer s.mu.Unlock()
			return cloneMessages(s.msgs), nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			got := s.Messages()
			return got, fmt.Errorf("sink %s: got %d messages within %v, want %d", s.Addr(), len(got), timeout, n)
		}
	}
}

func (s *Sink) add(m Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, m)
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Sink) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.session(c)
		}()
	}
}

// maxSinkMessage bounds one message so a runaway client cannot exhaust
// memory in a test.
const maxSinkMessage = 64 << 20

// session runs one SMTP/LMTP conversation. Errors just end it: the client
// (Postfix) reports them in its own log.
func (s *Sink) session(c net.Conn) {
	r := bufio.NewReader(c)
	w := bufio.NewWriter(c)
	reply := func(lines ...string) bool {
		for _, l := range lines {
			w.WriteString(l + "\r\n")
		}
		return w.Flush() == nil
	}
	if !reply("220 " + sinkHostname + " testenv sink ready") {
		return
	}
	var (
		helo string
		lmtp bool
		from string
		to   []string
		mail bool
	)
	for {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Minute))
		line, err := readLine(r, 4096)
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO", "LHLO":
			helo, lmtp = arg, strings.EqualFold(verb, "LHLO")
			from, to, mail = "", nil, false
			reply("250-"+sinkHostname, "250-PIPELINING", "250-8BITMIME", "250-SMTPUTF8",
				"250-ENHANCEDSTATUSCODES", fmt.Sprintf("250 SIZE %d", maxSinkMessage))
		case "HELO":
			helo, lmtp = arg, false
			from, to, mail = "", nil, false
			reply("250 " + sinkHostname)
		case "MAIL":
			addr, ok := pathArg(arg, "FROM:")
			if !ok {
				reply("501 5.5.4 syntax: MAIL FROM:<address>")
				continue
			}
			from, to, mail = addr, nil, true
			reply("250 2.1.0 ok")
		case "RCPT":
			addr, ok := pathArg(arg, "TO:")
			switch {
			case !mail:
				reply("503 5.5.1 MAIL first")
			case !ok || addr == "":
				reply("501 5.5.4 syntax: RCPT TO:<address>")
			default:
				to = append(to, addr)
				reply("250 2.1.5 ok")
			}
		case "DATA":
			if len(to) == 0 {
				reply("503 5.5.1 RCPT first")
				continue
			}
			if !reply("354 end data with <CR><LF>.<CR><LF>") {
				return
			}
			data, err := readData(r, maxSinkMessage)
			if err != nil {
				if errors.Is(err, errTooBig) {
					reply("552 5.3.4 message too big")
					from, to, mail = "", nil, false
					continue
				}
				return
			}
			s.add(Message{From: from, To: to, Data: data, LMTP: lmtp, Helo: helo})
			if lmtp {
				// RFC 2033: one reply per accepted recipient.
				rs := make([]string, len(to))
				for i, rcpt := range to {
					rs[i] = "250 2.0.0 <" + rcpt + "> delivered"
				}
				reply(rs...)
			} else {
				reply("250 2.0.0 delivered")
			}
			from, to, mail = "", nil, false
		case "RSET":
			from, to, mail = "", nil, false
			reply("250 2.0.0 ok")
		case "NOOP":
			reply("250 2.0.0 ok")
		case "QUIT":
			reply("221 2.0.0 bye")
			return
		default:
			reply("502 5.5.2 command not implemented")
		}
	}
}

// pathArg parses "FROM:<addr> PARAMS" (prefix "FROM:" or "TO:"), returning
// addr without brackets; ESMTP parameters are ignored.
func pathArg(arg, prefix string) (string, bool) {
	if len(arg) < len(prefix) || !strings.EqualFold(arg[:len(prefix)], prefix) {
		return "", false
	}
	rest := strings.TrimSpace(arg[len(prefix):])
	if !strings.HasPrefix(rest, "<") {
		return "", false
	}
	end := strings.IndexByte(rest, '>')
	if end < 0 {
		return "", false
	}
	return rest[1:end], true
}

var errTooBig = errors.New("too big")

// readLine reads one CRLF- or LF-terminated line of at most max bytes.
func readLine(r *bufio.Reader, max int) (string, error) {
	var b []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return "", err
		}
		b = append(b, chunk...)
		if len(b) > max {
			return "", fmt.Errorf("line longer than %d bytes", max)
		}
		if !isPrefix {
			return string(b), nil
		}
	}
}

// readData reads a DATA payload up to the lone "." line, removing dot
// stuffing and keeping CRLF line ends. Past max it keeps reading to the end
// (so the session stays in sync) and returns errTooBig.
func readData(r *bufio.Reader, max int) ([]byte, error) {
	var buf bytes.Buffer
	tooBig := false
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			if err == io.EOF {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if bytes.Equal(line, []byte(".\r\n")) || bytes.Equal(line, []byte(".\n")) {
			break
		}
		if bytes.HasPrefix(line, []byte("..")) {
			line = line[1:]
		}
		if !tooBig {
			if buf.Len()+len(line) > max {
				tooBig = true
				buf.Reset()
				continue
			}
			buf.Write(line)
		}
	}
	if tooBig {
		return nil, errTooBig
	}
	return buf.Bytes(), nil
}
