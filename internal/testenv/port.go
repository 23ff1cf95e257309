package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. The
// kernel picks it from the ephemeral range, so it is unlikely to be handed
// out again soon, but another process can still take it before the caller
// binds it; helpers that start servers retry on "address in use".
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freePort()
	if err != nil {
		t.Fatalf("testenv: find free port: %v", err)
	}
	return p
}

// FreeAddr returns "127.0.0.1:PORT" for a port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("listen on 127.0.0.1:0: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// portFree reports whether 127.0.0.1:port can be bound right now.
func portFree(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// freeClusterPort returns a port p such that p and p+10000 (the Redis
// cluster bus port) are both free. Ephemeral ports are often above 55535,
// which leaves no room for the bus port, so it draws from 20000-29999, below
// the Linux ephemeral range, where outgoing connections do not land.
func freeClusterPort() (int, error) {
	for range 200 {
		p := 20000 + rand.IntN(10000)
		if portFree(p) && portFree(p+10000) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port pair (p, p+10000) in 20000-29999 after 200 tries")
}
