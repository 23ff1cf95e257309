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

	"github.com/bulkmilter/bulkmilter/metrics"
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
	met *metrics.Metrics
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
		l.met.Error(metrics.StageProtocol)
		l.log.Warn("accept failed; retrying", "err", err, "retry_in", wait)
		time.Sleep(wait)
	}
}

// guardConn reads whole packets from the MTA, checks them and serves them
// to the library's reads. Only the library's goroutine reads, so reads
// need no lock; buffers are pooled so that idle sessions hold none.
type guardConn struct {
	net.Conn
	met     *metrics.Metrics
	buf     *bytes.Buffer // the checked packet being served, nil when drained
	pending []byte        // the unread part of buf
	err     error         // sticky: once refused, the session is over
	started bool          // the first packet (the MTA's negotiation) was read
}

// negotiationTimeout is how long a new MTA connection has to send its
// first packet. go-milter allows a hard-coded second from the time the
// session starts reading; on a host whose CPUs are busy an MTA (or this
// daemon's goroutine) can take longer, and the connection was reset at
// negotiation (seen at load average 8 to 12, a few sessions in 40,000).
// Postfix's own milter_connect_timeout is 30 s.
const negotiationTimeout = 10 * time.Second

// SetReadDeadline stretches the library's deadline for the first packet
// to negotiationTimeout; later deadlines pass unchanged.
func (c *guardConn) SetReadDeadline(t time.Time) error {
	if !c.started && !t.IsZero() {
		t = later(t, time.Now().Add(negotiationTimeout))
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline is SetReadDeadline's counterpart for both directions.
func (c *guardConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

var packetBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (c *guardConn) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if len(c.pending) == 0 {
		c.release()
		if err := c.fill(); err != nil {
			c.release()
			if errors.Is(err, errBadPacket) {
				c.met.Error(metrics.StageProtocol)
				c.err = err
			}
			return 0, err
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

func (c *guardConn) release() {
	if c.buf != nil {
		if c.buf.Cap() <= 256<<10 {
			c.buf.Reset()
			packetBufs.Put(c.buf)
		}
		c.buf, c.pending = nil, nil
	}
}

// fill reads the next packet into c.pending, checked.
func (c *guardConn) fill() error {
	var hdr [4]byte
	if _, err := io.ReadFull(c.Conn, hdr[:]); err != nil {
		return err
	}
	length := binary.BigEndian.Uint32(hdr[:])
	if length == 0 {
		return fmt.Errorf("%w: length 0", errBadPacket)
	}
	var code [1]byte
	if _, err := io.ReadFull(c.Conn, code[:]); err != nil {
		return err
	}
	keep := length
	if length > MaxPacket && code[0] != 'L' {
		return fmt.Errorf("%w: %d bytes for command %q, more than %d", errBadPacket, length, code[0], MaxPacket)
	}
	if code[0] == 'L' && length > MaxHeaderPacket {
		keep = MaxHeaderPacket
	}
	c.buf = packetBufs.Get().(*bytes.Buffer)
	c.buf.Grow(4 + int(keep))
	var out [5]byte
	binary.BigEndian.PutUint32(out[:4], keep)
	out[4] = code[0]
	c.buf.Write(out[:])
	if _, err := io.CopyN(c.buf, c.Conn, int64(keep-1)); err != nil {
		return err
	}
	if keep < length {
		// A header field cut short: drop the rest from the wire and end
		// the value where it was cut.
		if _, err := io.CopyN(io.Discard, c.Conn, int64(length-keep)); err != nil {
			return err
		}
		b := c.buf.Bytes()
		b[len(b)-1] = 0
	}
	c.pending = c.buf.Bytes()
	c.started = true
	return checkPacket(code[0], c.pending[5:])
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
