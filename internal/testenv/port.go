package testenv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
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

// startOnFreePort calls start, which draws its ports and starts a server,
// up to three times while it fails with its port taken: a port that was
// free can be taken before the server binds it (other test binaries run on
// this machine too). Any other failure, or the third, fails the test.
func startOnFreePort(t testing.TB, name string, start func() error) {
	t.Helper()
	var err error
	for range 3 {
		if err = start(); err == nil {
			return
		}
		if !errors.Is(err, errAddrInUse) && !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	t.Fatalf("testenv: start %s: %v", name, err)
}

func freePort(t testing.TB) (int, error) {
	p, release, err := ReservePort()
	if err != nil {
		return 0, err
	}
	t.Cleanup(release)
	return p, nil
}

// ReservePort is FreePort for a program without a testing.TB (the lab's
// benchmark servers): the port stays reserved until release is called, or
// until the process ends.
func ReservePort() (port int, release func(), err error) {
	for range 200 {
		p := 10000 + rand.IntN(10000)
		if release, err := reserveFree(p); release != nil || err != nil {
			return p, release, err
		}
	}
	return 0, nil, fmt.Errorf("no free port in 10000-19999 after 200 tries")
}

// freeClusterPort returns a port p such that p and p+10000 (the Redis
// cluster bus port) are both free, both reserved as by FreePort. p is drawn
// from 20000-22767, so that the bus port, 30000-32767, stays below the
// ephemeral range too: there an outgoing connection (a cluster node's own,
// or the load tests') could take it before the node binds it.
func freeClusterPort(t testing.TB) (int, error) {
	for range 200 {
		p := 20000 + rand.IntN(ephemeralFrom-30000)
		release, err := reserveFree(p, p+10000)
		if err != nil {
			return 0, err
		}
		if release != nil {
			t.Cleanup(release)
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port pair (p, p+10000) in 20000-%d after 200 tries", ephemeralFrom-10001)
}

// ephemeralFrom is the start of Linux's default ephemeral port range
// (net.ipv4.ip_local_port_range 32768-60999).
const ephemeralFrom = 32768

// reserveFree reserves ports and returns their release when they are all
// free now; nil when one is not, or another caller holds one (nothing is
// kept then).
func reserveFree(ports ...int) (release func(), err error) {
	release, err = reservePorts(ports)
	if errors.Is(err, errPortReserved) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, p := range ports {
		if !portFree(p) {
			release()
			return nil, nil
		}
	}
	return release, nil
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
