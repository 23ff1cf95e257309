package milter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// The packet guard stands between the MTA connection and go-milter, which
// trusts the framing it reads: a packet of length 0 (it indexes data[0]),
// a CONNECT, MAIL or RCPT packet without its NUL terminator (it slices past
// the end) each panic in the library's connection goroutine, where nothing
// can recover them, and kill the whole daemon; a length prefix of up to
// 512 MiB is allocated before a byte of it arrives. Whoever can reach the
// milter socket could stop all tagging with four bytes. The guard reads
// each packet itself, checks it, and hands the library only packets it can
// digest; a bad one ends that session (the MTA applies its default action
// to the message) and is counted as a protocol error.

const (
	// MaxPacket bounds one milter packet. The largest an MTA sends is a
	// body chunk: 64 KiB, or 1 MiB once SMFIP_MDS_1M is negotiated.
	MaxPacket = 2 << 20
	// MaxHeaderPacket bounds a header packet. A longer header field is cut
	// (the session analyses the first 64 KiB of a value anyway) rather
	// than ending the session: an MTA configured with a large header limit
	// (Postfix header_size_limit, 100 KiB by default) may send one.
	MaxHeaderPacket = 256 << 10
)

// errBadPacket marks a packet the guard refused.
var errBadPacket = errors.New("milter: bad packet")

// guardListener wraps every accepted connection in a guardConn, and
// outlasts failed accepts: go-milter's Serve returns on the first Accept
// error, so running out of file descriptors under a burst of connections
// would stop the daemon for good. Like net/http, it waits and tries again.
type guardListener struct {
	net.Listener
	met Observer
	log *slog.Logger
}

func (l guardListener) Accept() (net.Conn, error) {
	var wait time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			return &guardConn{Conn: c, met: l.met}, nil
		}
		if errors.Is(err, net.ErrClosed) {
			return nil, err
		}
		wait = min(max(2*wait, 5*time.Millisecond), time.Second)
		l.met.Error(StageProtocol)
		l.log.Warn("accept failed; retrying", "err", err, "retry_in", wait)
		time.Sleep(wait)
	}
}

// guardConn reads whole packets from the MTA, checks them and serves them
// to the library's reads. Only the library's goroutine reads, so reads
// need no lock; buffers are pooled so that idle sessions hold none.
//
// It also saves system calls, which are most of a milter's cost once the
// MTA no longer waits for replies (SMFIP_NR_*): the MTA sends a message as
// a burst of small packets, read here many at a time instead of with two
// or three reads each as go-milter does; and the library writes every
// packet in two writes, which are held here until a reply the MTA waits
// for, so that the verdict's header changes and the final reply leave in
// one write.
type guardConn struct {
	net.Conn
	met     Observer
	pkt     *[]byte // the checked packet being served, nil when drained
	pending []byte  // the unread part of *pkt, or of the read-ahead (inPkt)
	// inPkt: pending is a packet served from the read-ahead in place,
	// which is kept until the library has read it.
	inPkt bool
	err   error // sticky: once refused, the session is over

	in       *[]byte // read-ahead from the connection, nil when drained
	inR, inW int
	rerr     error // a read error that came with data, returned next

	out  []byte  // written packets held until a reply the MTA waits for
	outp *[]byte // out's pooled buffer, nil while nothing is held
	scan int     // out[:scan] are whole packets
	hdr  [5]byte // a packet's length and code read apart (a local escaped)

	started bool // the first packet (the MTA's negotiation) was read

	// Deadlines are set on the connection only before a read or write of
	// its own (applyRead, applyWrite): go-milter sets a read deadline
	// before every packet it reads and clears it after, and does the same
	// with a write deadline around every packet it writes, four runtime
	// timer updates a packet (4 % of the milter process's CPU in the
	// profile), while most packets come from the read-ahead or wait in
	// out for the next flush without touching the connection. A deadline
	// bounds only the connection's own reads and writes, and those are
	// made with the one the library last asked for, so nothing changes
	// but the number of updates.
	rdl, wdl   time.Time // the deadlines the library asked for
	rset, wset time.Time // the deadlines the connection has
}

// negotiationTimeout is how long a new MTA connection has to send its
// first packet. go-milter allows a hard-coded second from the time the
// session starts reading; on a host whose CPUs are busy an MTA (or this
// daemon's goroutine) can take longer, and the connection was reset at
// negotiation (seen at load average 8 to 12, a few sessions in 40,000).
// Postfix's own milter_connect_timeout is 30 s.
const negotiationTimeout = 10 * time.Second

// SetReadDeadline records the deadline of the connection's next read,
// stretched to negotiationTimeout for the first packet; later deadlines
// pass unchanged. Only the library's goroutine reads and sets deadlines.
func (c *guardConn) SetReadDeadline(t time.Time) error {
	if !c.started && !t.IsZero() {
		t = later(t, time.Now().Add(negotiationTimeout))
	}
	c.rdl = t
	return nil
}

// SetWriteDeadline records the deadline of the connection's next write.
func (c *guardConn) SetWriteDeadline(t time.Time) error {
	c.wdl = t
	return nil
}

// SetDeadline is SetReadDeadline's counterpart for both directions.
func (c *guardConn) SetDeadline(t time.Time) error {
	c.wdl = t
	return c.SetReadDeadline(t)
}

// applyRead gives the connection the read deadline last asked for, before
// a read of its own.
func (c *guardConn) applyRead() error {
	if c.rdl.Equal(c.rset) {
		return nil
	}
	if err := c.Conn.SetReadDeadline(c.rdl); err != nil {
		return err
	}
	c.rset = c.rdl
	return nil
}

// applyWrite is applyRead for writes.
func (c *guardConn) applyWrite() error {
	if c.wdl.Equal(c.wset) {
		return nil
	}
	if err := c.Conn.SetWriteDeadline(c.wdl); err != nil {
		return err
	}
	c.wset = c.wdl
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

const (
	// readAhead is the read buffer: a whole message's envelope and header
	// packets usually fit.
	readAhead = 16 << 10
	// keepPacket bounds a pooled packet buffer.
	keepPacket = 256 << 10
)

var (
	packetBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}
	readBufs   = sync.Pool{New: func() any { b := make([]byte, readAhead); return &b }}
)

func (c *guardConn) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if len(c.pending) == 0 {
		if err := c.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// NextPacket serves the next checked packet whole, in place: its code and
// data, valid until the next NextPacket or Read. Our go-milter fork reads
// packets with it when the connection has it (third_party/go-milter), so
// that a packet is neither copied nor given a new buffer of its own.
func (c *guardConn) NextPacket() (code byte, data []byte, err error) {
	if c.err != nil {
		return 0, nil, c.err
	}
	if len(c.pending) != 0 { // never: the library reads whole packets
		return 0, nil, fmt.Errorf("milter: packet read within a packet")
	}
	if err := c.next(); err != nil {
		return 0, nil, err
	}
	p := c.pending
	c.pending = p[len(p):] // drained; released at the next call
	return p[4], p[5:], nil
}

// next releases the packet served last and reads the next one into
// c.pending; a refused packet ends the session.
func (c *guardConn) next() error {
	c.release()
	err := c.fill()
	if err != nil {
		c.release()
		if errors.Is(err, errBadPacket) {
			c.met.Error(StageProtocol)
			c.err = err
		}
	}
	return err
}

func (c *guardConn) release() {
	if c.inPkt {
		c.inPkt, c.pending = false, nil
		c.drained()
	}
	if c.pkt != nil {
		if cap(*c.pkt) <= keepPacket {
			*c.pkt = (*c.pkt)[:0]
			packetBufs.Put(c.pkt)
		}
		c.pkt, c.pending = nil, nil
	}
}

// readFull fills p from the read-ahead, reading the connection when it
// runs dry (what remains of a large body chunk goes straight into p). Like
// io.ReadFull it returns io.EOF when nothing was read, io.ErrUnexpectedEOF
// when the connection ended within p.
func (c *guardConn) readFull(p []byte) error {
	got := 0
	for got < len(p) {
		if c.inR < c.inW {
			n := copy(p[got:], (*c.in)[c.inR:c.inW])
			c.inR += n
			got += n
			continue
		}
		var n int
		var err error
		switch {
		case c.rerr != nil: // came with the last bytes read
			err, c.rerr = c.rerr, nil
		case len(p)-got >= readAhead:
			if err = c.applyRead(); err == nil {
				n, err = c.Conn.Read(p[got:])
				got += n
			}
		default:
			n, err = c.readAhead()
		}
		if err != nil {
			if n > 0 {
				c.rerr = err
				continue
			}
			if got > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// readAhead reads what the connection has into the read-ahead, which is
// empty.
func (c *guardConn) readAhead() (int, error) {
	if err := c.applyRead(); err != nil {
		return 0, err
	}
	if c.in == nil {
		c.in = readBufs.Get().(*[]byte)
	}
	n, err := c.Conn.Read(*c.in)
	c.inR, c.inW = 0, n
	return n, err
}

// skip drops n bytes of input.
func (c *guardConn) skip(n int) error {
	var scratch [4096]byte
	for n > 0 {
		k := min(n, len(scratch))
		if err := c.readFull(scratch[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// drained returns the read-ahead buffer to the pool once it is empty (and
// no packet is served from it), so that an idle session holds none.
func (c *guardConn) drained() {
	if c.in != nil && c.inR == c.inW && !c.inPkt {
		readBufs.Put(c.in)
		c.in, c.inR, c.inW = nil, 0, 0
	}
}

// fill reads the next packet into c.pending, checked.
func (c *guardConn) fill() error {
	defer c.drained()
	// A packet wholly in the read-ahead, as most are, is served from it in
	// place: no copy, and no packet buffer taken from the pool (where
	// buffers of every size mix, and a body chunk often found one too
	// small and made its own). With nothing read ahead, read first: the
	// packet that comes (the next command after a reply) is then served
	// in place too, where it took a pooled buffer.
	if c.inR == c.inW && c.rerr == nil {
		if n, err := c.readAhead(); err != nil {
			if n == 0 {
				return err
			}
			c.rerr = err
		}
	}
	if avail := c.inW - c.inR; avail >= 5 {
		b := (*c.in)[c.inR:c.inW]
		if length := binary.BigEndian.Uint32(b); length != 0 && length <= MaxHeaderPacket && uint64(length) <= uint64(avail-4) {
			b = b[:4+length]
			c.inR += len(b)
			c.started = true
			if length == 1 {
				// A command alone (end of header or message, abort,
				// QUIT) is served from the connection's own bytes, so
				// that the read-ahead goes back to the pool when it holds
				// nothing more: after a connection's QUIT nothing reads
				// again to release it.
				c.pending = append(c.hdr[:0], b...)
				return checkPacket(b[4], nil)
			}
			c.pending, c.inPkt = b, true
			return checkPacket(b[4], b[5:])
		}
	}
	hdr := c.hdr[:]
	if err := c.readFull(hdr[:4]); err != nil {
		return err
	}
	length := binary.BigEndian.Uint32(hdr[:4])
	if length == 0 {
		return fmt.Errorf("%w: length 0", errBadPacket)
	}
	if err := c.readFull(hdr[4:]); err != nil {
		return unexpected(err)
	}
	code := hdr[4]
	keep := length
	if length > MaxPacket && code != 'L' {
		return fmt.Errorf("%w: %d bytes for command %q, more than %d", errBadPacket, length, code, MaxPacket)
	}
	if code == 'L' && length > MaxHeaderPacket {
		keep = MaxHeaderPacket
	}
	c.pkt = packetBufs.Get().(*[]byte)
	if cap(*c.pkt) < 4+int(keep) {
		*c.pkt = make([]byte, 0, 4+int(keep))
	}
	b := (*c.pkt)[:4+int(keep)]
	binary.BigEndian.PutUint32(b[:4], keep)
	b[4] = code
	if err := c.readFull(b[5:]); err != nil {
		return unexpected(err)
	}
	if keep < length {
		// A header field cut short: drop the rest from the wire and end
		// the value where it was cut.
		if err := c.skip(int(length - keep)); err != nil {
			return unexpected(err)
		}
		b[len(b)-1] = 0
	}
	*c.pkt = b
	c.pending = b
	c.started = true
	return checkPacket(code, b[5:])
}

// unexpected turns io.EOF within a packet into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Write holds the library's packets until one the MTA waits for: a reply
// (continue, accept, reject, ...) or a negotiation, never one of the
// message modifications that precede the reply at end of message. A
// write error is returned by the write that flushes.
func (c *guardConn) Write(p []byte) (int, error) {
	c.hold()
	c.out = append(c.out, p...)
	if err := c.flush(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WritePacket is Write of a packet's code and data, framed here: our
// go-milter fork writes packets with it when the connection has it
// (third_party/go-milter patch 8), where wire.WritePacket made its 5-byte
// header an object of its own.
func (c *guardConn) WritePacket(code byte, data []byte) error {
	c.hold()
	c.out = binary.BigEndian.AppendUint32(c.out, uint32(len(data)+1))
	c.out = append(append(c.out, code), data...)
	return c.flush()
}

// hold makes sure out has a buffer.
func (c *guardConn) hold() {
	if c.outp == nil {
		c.outp = packetBufs.Get().(*[]byte)
		c.out = (*c.outp)[:0]
	}
}

// flush writes the whole packets held when one of them is one the MTA
// waits for.
func (c *guardConn) flush() error {
	flush := false
	for len(c.out)-c.scan >= 5 {
		n := int(binary.BigEndian.Uint32(c.out[c.scan:]))
		if len(c.out)-c.scan < 4+n {
			break
		}
		code := c.out[c.scan+4]
		c.scan += 4 + n
		if !modification(code) {
			flush = true
		}
	}
	if !flush {
		return nil
	}
	err := c.applyWrite()
	if err == nil {
		_, err = c.Conn.Write(c.out[:c.scan])
	}
	rest := copy(c.out, c.out[c.scan:])
	c.out, c.scan = c.out[:rest], 0
	switch {
	case cap(c.out) > keepPacket:
		c.out, c.outp = nil, nil
	case rest == 0: // all sent: an idle session holds no buffer
		*c.outp = c.out
		packetBufs.Put(c.outp)
		c.out, c.outp = nil, nil
	}
	return err
}

// modification reports whether a milter-to-MTA packet modifies the message
// (the MTA does not answer it; a reply follows).
func modification(code byte) bool {
	switch code {
	case '+', '-', '2', 'b', 'e', 'h', 'i', 'm', 'q':
		return true
	}
	return false
}

// checkPacket refuses what go-milter would panic on: a CONNECT without a
// terminated host name and a family byte, a MAIL or RCPT without a
// terminated address.
func checkPacket(code byte, data []byte) error {
	switch code {
	case 'C':
		if i := bytes.IndexByte(data, 0); i < 0 || i+1 >= len(data) {
			return fmt.Errorf("%w: malformed CONNECT", errBadPacket)
		}
	case 'M', 'R':
		if bytes.IndexByte(data, 0) < 0 {
			return fmt.Errorf("%w: malformed %c command", errBadPacket, code)
		}
	}
	return nil
}
