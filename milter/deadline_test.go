package milter

import (
	"bytes"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// countingConn is a real TCP connection that counts the deadlines set on
// it and the reads and writes made on it.
type countingConn struct {
	net.Conn
	readDeadlines, writeDeadlines, reads, writes int
}

func (c *countingConn) SetReadDeadline(t time.Time) error {
	c.readDeadlines++
	return c.Conn.SetReadDeadline(t)
}

func (c *countingConn) SetWriteDeadline(t time.Time) error {
	c.writeDeadlines++
	return c.Conn.SetWriteDeadline(t)
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads++
	return c.Conn.Read(p)
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes++
	return c.Conn.Write(p)
}

// tcpPair returns both ends of a loopback TCP connection: the MTA's and
// the milter's.
func tcpPair(t *testing.T) (mta, milter net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		ch <- accepted{c, err}
	}()
	mta, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a := <-ch
	if a.err != nil {
		t.Fatal(a.err)
	}
	t.Cleanup(func() { mta.Close(); a.c.Close() })
	return mta, a.c
}

// readAsLibrary reads one packet as go-milter's wire.ReadPacket does: a
// read deadline before, cleared after.
func readAsLibrary(c net.Conn, timeout time.Duration) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	return readPacket(c)
}

// writeAsLibrary writes one packet as wire.WritePacket does: a write
// deadline around two writes.
func writeAsLibrary(t *testing.T, c net.Conn, p []byte) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(time.Minute))
	defer c.SetWriteDeadline(time.Time{})
	for _, part := range [][]byte{p[:5], p[5:]} {
		if len(part) == 0 {
			continue
		}
		if _, err := c.Write(part); err != nil {
			t.Fatal(err)
		}
	}
}

// The library's deadlines reach the connection only before a read or a
// write of its own: a message's packets read ahead in one read take one
// read deadline, not two a packet, and its held modifications and reply
// one write deadline, not two a packet. Every packet still arrives whole.
func TestGuardDeadlinesOnlyBeforeConnectionIO(t *testing.T) {
	mta, raw := tcpPair(t)
	cc := &countingConn{Conn: raw}
	c := &guardConn{Conn: cc}
	var want [][]byte
	for i := range 40 {
		want = append(want, packet('L', cstr("X-Header"), cstr(string(rune('a'+i%26)))))
	}
	want = append(want, packet('E'))
	if _, err := mta.Write(bytes.Join(want, nil)); err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		got, err := readAsLibrary(c, time.Minute)
		if err != nil || !bytes.Equal(got, w) {
			t.Fatalf("packet %d: %q, %v; want %q", i, got, err, w)
		}
	}
	if cc.readDeadlines > cc.reads || cc.readDeadlines == 0 {
		t.Errorf("%d read deadlines set for %d reads of %d packets; want one at most a read, and at least one",
			cc.readDeadlines, cc.reads, len(want))
	}
	for _, p := range [][]byte{packet('h', cstr("X-Bulk"), cstr("yes")), packet('m', []byte{0, 0, 0, 1}, cstr("Subject"), cstr("[BULK] hi")), packet('c')} {
		writeAsLibrary(t, c, p)
	}
	if cc.writes != 1 || cc.writeDeadlines != 1 {
		t.Errorf("end of message: %d writes, %d write deadlines; want 1 and 1", cc.writes, cc.writeDeadlines)
	}
	mta.SetReadDeadline(time.Now().Add(time.Minute))
	if got, err := readPacket(mta); err != nil || got[4] != 'h' {
		t.Errorf("the MTA read %q, %v; want the held modification first", got, err)
	}
}

// A deadline still bounds a read that waits on the connection: an MTA that
// stops within a packet gets the library's timeout, after packets served
// from the read-ahead under earlier deadlines and a cleared one.
func TestGuardDeadlineCutsStalledRead(t *testing.T) {
	mta, raw := tcpPair(t)
	c := &guardConn{Conn: raw}
	first := packet('L', cstr("Subject"), cstr("hi"))
	if _, err := mta.Write(first); err != nil {
		t.Fatal(err)
	}
	if got, err := readAsLibrary(c, time.Minute); err != nil || !bytes.Equal(got, first) {
		t.Fatalf("first packet: %q, %v", got, err)
	}
	// A cleared deadline is in effect for a read that waits: the earlier
	// deadline passes while nothing is read, and the next packet, sent
	// after it, is still read.
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	c.SetReadDeadline(time.Time{})
	time.Sleep(100 * time.Millisecond)
	second := packet('N')
	if _, err := mta.Write(second); err != nil {
		t.Fatal(err)
	}
	if got, err := readPacket(c); err != nil || !bytes.Equal(got, second) {
		t.Fatalf("after a cleared deadline: %q, %v", got, err)
	}
	// Half a packet, then nothing.
	third := packet('B', bytes.Repeat([]byte("x"), 100))
	if _, err := mta.Write(third[:20]); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := readAsLibrary(c, 200*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("stalled read: %v, want the deadline exceeded", err)
	}
	if took := time.Since(start); took > 2*time.Minute {
		t.Errorf("stalled read cut after %s", took)
	}
}
