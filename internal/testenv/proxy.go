package testenv

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy on loopback that forwards to a target with an
// adjustable delay, to slow a real server's network (Redis's, in the
// fault tests) without touching the server. Every chunk read from either
// side is written to the other side delay later, in order; the delay adds
// latency without limiting throughput, as a long link does.
type Proxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// StartProxy starts a proxy to target and closes it at cleanup.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay sets the one-way delay of every chunk from now on.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Cut closes every open connection through the proxy, as a network
// failure would; new connections are accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c, true)
		p.track(up, true)
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies src to dst, each chunk delay after it was read.
func (p *Proxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	q := make(chan chunk, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ch := range q {
			time.Sleep(time.Until(ch.due))
			if _, err := dst.Write(ch.b); err != nil {
				break
			}
		}
		// Either side gone: close both, so that the peer sees it.
		src.Close()
		dst.Close()
		for range q {
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(time.Duration(p.delay.Load()))}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			break
		}
	}
	close(q)
	<-done
	p.track(src, false)
	p.track(dst, false)
}
