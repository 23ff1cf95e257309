package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// It is drawn from 10000-19999, below the kernel's ephemeral range
// (32768-60999 on Linux), because a port handed out there can be taken
// by any outgoing connection before the caller binds it: the load and
// bench tests open thousands a second (a milterd test once found its
// ephemeral port taken). Another test can still draw the same port;
// helpers that start servers retry on "address in use".
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
	for range 200 {
		if p := 10000 + rand.IntN(10000); portFree(p) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port in 10000-19999 after 200 tries")
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
