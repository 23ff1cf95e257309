package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A client of the HTTP listener that trickles its request, or idles on a
// kept-alive connection, is cut off by the server. The verdict is whether
// the server closed the connection before the client was done, never how
// long it took: the trickle would last a minute, the timeouts are a
// fraction of a second, and the test's own deadline is two minutes.
func TestHTTPSlowClientsClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintln(w, "ok")
	}), HTTPTimeouts{ReadHeader: 200 * time.Millisecond, Read: 500 * time.Millisecond, Write: time.Minute, Idle: 300 * time.Millisecond})
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	// No case here tests Write, which starts when the header is read: at
	// a second, the 400 for a trickled body had to be written within half
	// a second of the Read timeout, and a process descheduled that long
	// (a busy machine) closed the connection without it.
	const trickle = 3000 // bytes, one every 20 ms: a minute
	tests := []struct {
		name  string
		start string // sent at once
		slow  bool   // then trickle bytes until the server closes
		want  string // in what the server answered before closing
	}{
		{"header trickled", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ", true, ""},
		{"body trickled", fmt.Sprintf("POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", trickle), true, "400 Bad Request"},
		{"idle after a request", "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", false, "200 OK"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(2 * time.Minute))
			if _, err := io.WriteString(c, tc.start); err != nil {
				t.Fatal(err)
			}
			// The reader learns when the server closes the connection.
			var answer bytes.Buffer
			closed := make(chan error, 1)
			go func() {
				_, err := io.Copy(&answer, c)
				closed <- err
			}()
			sent := 0
			var readErr error
			if tc.slow {
			trickling:
				for sent < trickle {
					select {
					case readErr = <-closed:
						break trickling
					case <-time.After(20 * time.Millisecond):
					}
					if _, err := c.Write([]byte("a")); err != nil {
						readErr = <-closed
						break
					}
					sent++
				}
				if sent == trickle {
					t.Fatalf("the server took all %d trickled bytes without closing", trickle)
				}
			} else {
				readErr = <-closed
			}
			// io.Copy returns nil at EOF; a reset is a close too.
			if readErr != nil && !errors.Is(readErr, syscall.ECONNRESET) {
				if errors.Is(readErr, os.ErrDeadlineExceeded) {
					t.Fatalf("the server never closed the connection (%d bytes trickled)", sent)
				}
				t.Fatalf("read: %v", readErr)
			}
			if got := answer.String(); !strings.Contains(got, tc.want) || (tc.want == "" && got != "") {
				t.Errorf("the server answered %q, want %q", got, tc.want)
			}
			t.Logf("closed by the server after %d trickled bytes", sent)
		})
	}
}

// A daemon's HTTP listener always has every bound.
func TestHTTPTimeoutsDefault(t *testing.T) {
	got := HTTPTimeouts{Read: time.Second}.orDefault()
	if got.Read != time.Second || got.ReadHeader != DefaultHTTPTimeouts.ReadHeader || got.Write != DefaultHTTPTimeouts.Write || got.Idle != DefaultHTTPTimeouts.Idle {
		t.Errorf("orDefault = %+v", got)
	}
	srv := newHTTPServer(http.NotFoundHandler(), HTTPTimeouts{}.orDefault())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 {
		t.Errorf("HTTP server without a bound: %+v", srv)
	}
}
