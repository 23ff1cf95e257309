package milter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
)

// streamConn is the MTA's side of a connection as the guard sees it: reads
// come in pieces of random sizes from a fixed stream; writes are recorded
// one by one.
type streamConn struct {
	net.Conn // nil: only Read and Write are used
	in       []byte
	rng      *rand.Rand
	writes   [][]byte
}

func (c *streamConn) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.in), 1+c.rng.IntN(700))
	copy(p, c.in[:n])
	c.in = c.in[n:]
	return n, nil
}

func (c *streamConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, slices.Clone(p))
	return len(p), nil
}

// readPacket reads one packet through the guard as go-milter does: the
// length, then the rest.
func readPacket(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(hdr[0])<<24 | int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3])
	data := make([]byte, n)
	_, err := io.ReadFull(r, data)
	return append(hdr[:], data...), err
}

// Packets read ahead many at a time come out whole and in order, whatever
// the pieces the connection delivers them in, from a few bytes to a 1 MiB
// body chunk; the connection's end between packets is io.EOF, within one
// io.ErrUnexpectedEOF.
func TestGuardReadAhead(t *testing.T) {
	big := bytes.Repeat([]byte("body "), 200_000)
	var want [][]byte
	for i := range 300 {
		switch i % 4 {
		case 0:
			want = append(want, packet('D', cstr("i"), cstr("Q1")))
		case 1:
			want = append(want, packet('L', cstr("Subject"), cstr("hello")))
		case 2:
			want = append(want, packet('B', big[:i*3000]))
		default:
			want = append(want, packet('N'))
		}
	}
	stream := bytes.Join(want, nil)
	for seed := range 5 {
		c := &guardConn{Conn: &streamConn{in: stream, rng: rand.New(rand.NewPCG(uint64(seed), 1))}}
		for i, w := range want {
			got, err := readPacket(c)
			if err != nil || !bytes.Equal(got, w) {
				t.Fatalf("seed %d packet %d: %d bytes, err %v; want %d bytes", seed, i, len(got), err, len(w))
			}
		}
		if _, err := readPacket(c); err != io.EOF {
			t.Errorf("seed %d: after the last packet: %v, want io.EOF", seed, err)
		}
		if c.in != nil || c.pkt != nil {
			t.Errorf("seed %d: buffers held by a drained session", seed)
		}
	}
	cut := stream[:len(want[0])+7]
	c := &guardConn{Conn: &streamConn{in: cut, rng: rand.New(rand.NewPCG(9, 9))}}
	if _, err := readPacket(c); err != nil {
		t.Fatal(err)
	}
	if _, err := readPacket(c); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("connection ended within a packet: %v, want io.ErrUnexpectedEOF", err)
	}
}

// Message modifications are held until the reply the MTA waits for, and
// leave with it in one write; a reply alone is written at once. So with
// packets written whole (WritePacket, our go-milter fork) and in parts.
func TestGuardCoalescesWrites(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run(fmt.Sprintf("whole=%v", whole), func(t *testing.T) { testGuardCoalescesWrites(t, whole) })
	}
}

func testGuardCoalescesWrites(t *testing.T, whole bool) {
	sc := &streamConn{}
	c := &guardConn{Conn: sc}
	write := func(p []byte) {
		if whole {
			if err := c.WritePacket(p[4], p[5:]); err != nil {
				t.Fatalf("WritePacket: %v", err)
			}
			return
		}
		// go-milter writes the length and code, then the data.
		for _, part := range [][]byte{p[:5], p[5:]} {
			if len(part) == 0 {
				continue
			}
			if n, err := c.Write(part); n != len(part) || err != nil {
				t.Fatalf("write: %d, %v", n, err)
			}
		}
	}
	opt := packet('O', make([]byte, 12))
	write(opt)
	if len(sc.writes) != 1 || !bytes.Equal(sc.writes[0], opt) {
		t.Fatalf("negotiation: writes %q", sc.writes)
	}
	add := packet('h', cstr("X-Bulk"), cstr("yes; family=imatch; volume=12"))
	subj := packet('m', []byte{0, 0, 0, 1}, cstr("Subject"), cstr("[BULK] hi"))
	cont := packet('c')
	write(add)
	write(subj)
	if len(sc.writes) != 1 {
		t.Fatalf("modifications written before the reply: %q", sc.writes[1:])
	}
	write(cont)
	if len(sc.writes) != 2 || !bytes.Equal(sc.writes[1], bytes.Join([][]byte{add, subj, cont}, nil)) {
		t.Errorf("end of message: writes %q", sc.writes[1:])
	}
	write(packet('p'))
	if len(sc.writes) != 3 {
		t.Errorf("progress not written at once: %d writes", len(sc.writes))
	}
}

// discardConn takes every write.
type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }

// TestGuardWritePacketAllocs: a packet written whole allocates nothing
// (wire.WritePacket's 5-byte header was an object of its own).
func TestGuardWritePacketAllocs(t *testing.T) {
	c := &guardConn{Conn: discardConn{}}
	data := append(cstr("X-Bulk"), cstr("yes; family=imatch; volume=12")...)
	if n := testing.AllocsPerRun(1000, func() {
		if err := c.WritePacket('h', data); err != nil {
			t.Fatal(err)
		}
		if err := c.WritePacket('c', nil); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a modification and a reply allocate %.1f objects", n)
	}
}

// A packet that arrived whole in the read-ahead is served from it in
// place, without a packet buffer; one cut by the end of a read is copied
// into one, and the read-ahead goes back to the pool once drained.
func TestGuardServesWholePacketsInPlace(t *testing.T) {
	var want [][]byte
	for i := range 20 {
		want = append(want, packet('L', cstr("X-Field"), cstr(string(bytes.Repeat([]byte("v"), i*50)))))
	}
	stream := bytes.Join(want, nil)
	// Pieces of up to 700 bytes: most packets whole in one, some cut.
	c := &guardConn{Conn: &streamConn{in: stream, rng: rand.New(rand.NewPCG(3, 4))}}
	inPlace, copied := 0, 0
	for i, w := range want {
		got, err := readPacket(c)
		if err != nil || !bytes.Equal(got, w) {
			t.Fatalf("packet %d: %q, err %v; want %q", i, got, err, w)
		}
		switch {
		case c.inPkt && c.pkt == nil:
			inPlace++
		case !c.inPkt && c.pkt != nil:
			copied++
		default:
			t.Fatalf("packet %d: served in place %v, from a packet buffer %v", i, c.inPkt, c.pkt != nil)
		}
	}
	if inPlace == 0 || copied == 0 {
		t.Errorf("%d packets served in place, %d copied; want some of each", inPlace, copied)
	}
	if _, err := readPacket(c); err != io.EOF {
		t.Errorf("after the last packet: %v, want io.EOF", err)
	}
	if c.in != nil || c.pkt != nil || c.inPkt {
		t.Errorf("buffers held by a drained session")
	}
}

// NextPacket, which our go-milter fork reads packets with, serves the same
// packets as Read, whole and in order, in place where the read-ahead holds
// them and from a packet buffer where it does not, refuses what Read
// refuses, and allocates nothing for a packet once its buffers are pooled.
func TestGuardNextPacket(t *testing.T) {
	big := bytes.Repeat([]byte("body "), 200_000)
	var want [][]byte
	for i := range 200 {
		switch i % 4 {
		case 0:
			want = append(want, packet('D', cstr("i"), cstr("Q1")))
		case 1:
			want = append(want, packet('L', cstr("Subject"), cstr(string(bytes.Repeat([]byte("v"), i*10)))))
		case 2:
			want = append(want, packet('B', big[:i*3000]))
		default:
			want = append(want, packet('N'))
		}
	}
	stream := bytes.Join(want, nil)
	c := &guardConn{Conn: &streamConn{in: stream, rng: rand.New(rand.NewPCG(5, 6))}}
	inPlace, copied := 0, 0
	for i, w := range want {
		code, data, err := c.NextPacket()
		if err != nil || code != w[4] || !bytes.Equal(data, w[5:]) {
			t.Fatalf("packet %d: %q, %d bytes, err %v; want %q, %d bytes", i, code, len(data), err, w[4], len(w)-5)
		}
		if c.inPkt {
			inPlace++
		} else {
			copied++
		}
	}
	if inPlace == 0 || copied == 0 {
		t.Errorf("%d packets served in place, %d copied; want some of each", inPlace, copied)
	}
	if _, _, err := c.NextPacket(); err != io.EOF {
		t.Errorf("after the last packet: %v, want io.EOF", err)
	}
	if c.in != nil || c.pkt != nil || c.inPkt {
		t.Errorf("buffers held by a drained session")
	}

	bad := &guardConn{Conn: &streamConn{in: append(packet('N'), 0, 0, 0, 0), rng: rand.New(rand.NewPCG(1, 1))}, met: nop{}}
	if _, _, err := bad.NextPacket(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, err := bad.NextPacket(); !errors.Is(err, errBadPacket) {
			t.Errorf("a packet of length 0: %v, want errBadPacket, every time", err)
		}
	}

	hdr := packet('L', cstr("Subject"), cstr("weekly offers"))
	loop := &loopConn{pkt: hdr}
	g := &guardConn{Conn: loop}
	if n := testing.AllocsPerRun(1000, func() {
		if _, data, err := g.NextPacket(); err != nil || !bytes.Equal(data, hdr[5:]) {
			t.Fatalf("NextPacket: %q, %v", data, err)
		}
	}); n != 0 {
		t.Errorf("NextPacket allocates %.0f objects a packet", n)
	}
}

// loopConn sends the same packet for ever, a few at a time.
type loopConn struct {
	net.Conn
	pkt []byte
}

func (c *loopConn) Read(p []byte) (int, error) {
	n := 0
	for range 3 {
		if len(p)-n < len(c.pkt) {
			break
		}
		n += copy(p[n:], c.pkt)
	}
	return n, nil
}

// onePerRead delivers its one packet in a Read, as an MTA that waits for
// a reply before its next command does.
type onePerRead struct {
	net.Conn
	pkt []byte
}

func (c *onePerRead) Read(p []byte) (int, error) {
	if len(c.pkt) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.pkt)
	c.pkt = c.pkt[n:]
	return n, nil
}

// TestGuardServesLonePacketsInPlace: a packet that arrives alone, after the
// read-ahead ran dry (the command after a reply, a connection's QUIT), is
// read into the read-ahead and served from it in place, with nothing
// allocated; it took a pooled packet buffer, and the length read apart
// escaped to the heap. A packet of a command alone is copied out, so that
// the read-ahead goes back to the pool at once.
func TestGuardServesLonePacketsInPlace(t *testing.T) {
	hdr := packet('L', cstr("Subject"), cstr("weekly offers"))
	c := &onePerRead{}
	g := &guardConn{Conn: c}
	if n := testing.AllocsPerRun(1000, func() {
		c.pkt = hdr
		code, data, err := g.NextPacket()
		if err != nil || code != 'L' || !bytes.Equal(data, hdr[5:]) {
			t.Fatalf("NextPacket: %c %q, %v", code, data, err)
		}
		if !g.inPkt || g.pkt != nil {
			t.Fatalf("a lone packet served from a packet buffer, not in place")
		}
	}); n != 0 {
		t.Errorf("a lone packet allocates %.0f objects", n)
	}
	// A connection's last packet, QUIT, leaves no buffer held: nothing
	// reads after it to release one.
	c.pkt = packet('Q')
	if code, _, err := g.NextPacket(); err != nil || code != 'Q' {
		t.Fatalf("QUIT: %c, %v", code, err)
	}
	if g.in != nil || g.pkt != nil || g.inPkt {
		t.Errorf("buffers held after QUIT")
	}
	if _, _, err := g.NextPacket(); err != io.EOF {
		t.Errorf("after the last packet: %v, want io.EOF", err)
	}
	bad := &guardConn{Conn: &onePerRead{pkt: packet('C')}, met: nop{}}
	if _, _, err := bad.NextPacket(); !errors.Is(err, errBadPacket) {
		t.Errorf("a CONNECT without data: %v, want errBadPacket", err)
	}
}
