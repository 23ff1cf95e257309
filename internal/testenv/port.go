package testenv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 that is free and reserved for
// t until its cleanup. It is drawn from 10000-19999, below the kernel's
// ephemeral range (32768-60999 on Linux), because a port handed out there
// can be taken by any outgoing connection before the caller binds it: the
// load and bench tests open thousands a second (a milterd test once found
// its ephemeral port taken).
//
// The reservation (reservePorts) keeps every other caller of FreePort, in
// this process and in every test binary on the machine, off the port
// between the draw and the bind, and while the test stops and restarts its
// server there (Redis.Restart, Dovecot.Restart): `go test ./...` runs
// packages side by side, and two draws of 10,000 ports meet often enough
// over a whole run.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freePort(t)
	if err != nil {
		t.Fatalf("testenv: find free port: %v", err)
	}
	return p
}

// FreeAddr returns "127.0.0.1:PORT" for a port from FreePort.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}

func freePort(t testing.TB) (int, error) {
	for range 200 {
		p := 10000 + rand.IntN(10000)
		if ok, err := reserveFree(t, p); ok || err != nil {
			return p, err
		}
	}
	return 0, fmt.Errorf("no free port in 10000-19999 after 200 tries")
}

// freeClusterPort returns a port p such that p and p+10000 (the Redis
// cluster bus port) are both free, both reserved as by FreePort. p is drawn
// from 20000-22767, so that the bus port, 30000-32767, stays below the
// ephemeral range too: there an outgoing connection (a cluster node's own,
// or the load tests') could take it before the node binds it.
func freeClusterPort(t testing.TB) (int, error) {
	for range 200 {
		p := 20000 + rand.IntN(ephemeralFrom-30000)
		if ok, err := reserveFree(t, p, p+10000); ok || err != nil {
			return p, err
		}
	}
	return 0, fmt.Errorf("no free port pair (p, p+10000) in 20000-%d after 200 tries", ephemeralFrom-10001)
}

// ephemeralFrom is the start of Linux's default ephemeral port range
// (net.ipv4.ip_local_port_range 32768-60999).
const ephemeralFrom = 32768

// reserveFree reserves ports for t and reports whether they are all free
// now; when one is not, or another caller holds one, nothing is kept.
func reserveFree(t testing.TB, ports ...int) (bool, error) {
	release, err := reservePorts(ports)
	if errors.Is(err, errPortReserved) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, p := range ports {
		if !portFree(p) {
			release()
			return false, nil
		}
	}
	t.Cleanup(release)
	return true, nil
}

// errPortReserved: another caller holds the port's reservation.
var errPortReserved = errors.New("port reserved by another test")

// portFree reports whether 127.0.0.1:port can be bound right now.
func portFree(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
