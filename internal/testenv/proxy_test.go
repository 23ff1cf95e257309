package testenv

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// The proxy forwards both ways, adds its delay each way, and Cut drops
// open connections while new ones still go through.
func TestProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	p := StartProxy(t, ln.Addr().String())
	roundTrip := func(c net.Conn, r *bufio.Reader) (time.Duration, error) {
		start := time.Now()
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return 0, err
		}
		line, err := r.ReadString('\n')
		if err == nil && line != "ping\n" {
			t.Fatalf("echo %q", line)
		}
		return time.Since(start), err
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := roundTrip(c, r); err != nil {
		t.Fatal(err)
	}
	p.SetDelay(100 * time.Millisecond)
	if d, err := roundTrip(c, r); err != nil || d < 200*time.Millisecond {
		t.Fatalf("round trip with 100ms each way: %s, %v", d, err)
	}
	p.SetDelay(0)
	p.Cut()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := roundTrip(c, r); err == nil {
		t.Fatal("a cut connection still echoes")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := roundTrip(c2, bufio.NewReader(c2)); err != nil {
		t.Fatalf("new connection after a cut: %v", err)
	}
}
