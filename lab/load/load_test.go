package load

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/d--j/go-milter"
)

// counting is a do-nothing milter that counts the messages it finished.
type counting struct {
	milter.NoOpMilter
	n *atomic.Int64
}

func (c counting) EndOfMessage(m milter.Modifier) (*milter.Response, error) {
	c.n.Add(1)
	return milter.RespAccept, nil
}

func serve(t *testing.T, n *atomic.Int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := milter.NewServer(milter.WithMilter(func() milter.Milter { return counting{n: n} }))
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func msg(i int64) Message {
	return Message{
		From:  "news@sender.example",
		Rcpts: []string{fmt.Sprintf("u%d@example.test", i%7)},
		Raw:   fmt.Appendf(nil, "Subject: test %d\r\nFrom: news@sender.example\r\n\r\nHello number %d.\r\n", i, i),
	}
}

func TestRunCountsEveryMessage(t *testing.T) {
	var seen atomic.Int64
	addr := serve(t, &seen)
	r, err := Run(context.Background(), Options{
		Network: "tcp", Addr: addr, Sessions: 8, PerSession: 7, Messages: 500, Next: msg,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent != 500 || r.Answered != 500 || r.Failed != 0 || seen.Load() != 500 {
		t.Fatalf("sent %d answered %d failed %d, milter saw %d; want 500/500/0/500; errors %v", r.Sent, r.Answered, r.Failed, seen.Load(), r.Errors)
	}
	if r.Latency.Count() != 500 || r.Latency.Quantile(0.5) <= 0 || r.Latency.Quantile(0.99) > r.Latency.Max() {
		t.Fatalf("latency: %s", r)
	}
}

func TestRunCheckAndUnreachable(t *testing.T) {
	var seen atomic.Int64
	addr := serve(t, &seen)
	r, err := Run(context.Background(), Options{
		Network: "tcp", Addr: addr, Sessions: 2, Messages: 10, Next: msg,
		Check: func(i int64, res mtaclient.Result) error {
			if i%2 == 1 {
				return errors.New("odd")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Answered != 5 || r.Failed != 5 || len(r.Errors) != 5 {
		t.Fatalf("answered %d failed %d errors %v; want 5 and 5", r.Answered, r.Failed, r.Errors)
	}

	// Nothing listens: every message fails, none hangs.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	r, err = Run(context.Background(), Options{Network: "tcp", Addr: dead, Sessions: 2, Messages: 4, Next: msg, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Answered != 0 || r.Failed != 4 || r.NoReply != 0 {
		t.Fatalf("unreachable milter: %s", r)
	}
}

// hangUp is a milter that drops the connection instead of answering
// every other end of message.
type hangUp struct {
	milter.NoOpMilter
	n *atomic.Int64
}

func (h hangUp) EndOfMessage(m milter.Modifier) (*milter.Response, error) {
	if h.n.Add(1)%2 == 0 {
		return nil, errors.New("hang up")
	}
	return milter.RespAccept, nil
}

// A message sent whole without a reply is told apart from one refused
// before its end.
func TestRunCountsNoReply(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	srv := milter.NewServer(milter.WithMilter(func() milter.Milter { return hangUp{n: &n} }))
	go srv.Serve(ln)
	defer srv.Close()
	r, err := Run(context.Background(), Options{Network: "tcp", Addr: ln.Addr().String(), Sessions: 1, PerSession: 3, Messages: 10, Next: msg, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Answered != 5 || r.Failed != 5 || r.NoReply != 5 {
		t.Fatalf("%s; want 5 answered, 5 without reply", r)
	}
}

func TestRunDuration(t *testing.T) {
	var seen atomic.Int64
	addr := serve(t, &seen)
	r, err := Run(context.Background(), Options{Network: "tcp", Addr: addr, Sessions: 4, Duration: 300 * time.Millisecond, Next: msg})
	if err != nil {
		t.Fatal(err)
	}
	// The duration is a lower bound only: how many messages fit in it
	// depends on the machine.
	if r.Elapsed < 300*time.Millisecond || r.Answered != r.Sent || r.Answered != seen.Load() || r.Failed != 0 {
		t.Fatalf("%s; milter saw %d", r, seen.Load())
	}
	if _, err := Run(context.Background(), Options{Sessions: 1, Next: msg}); err == nil {
		t.Fatal("a run without an end was accepted")
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Add(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {1, 1000 * time.Millisecond}} {
		got := h.Quantile(c.q)
		if got < c.want || float64(got) > float64(c.want)*1.011 {
			t.Errorf("q%.2f = %s, want within 1%% above %s", c.q, got, c.want)
		}
	}
	var o Histogram
	o.Add(5 * time.Second)
	h.Merge(&o)
	if h.Count() != 1001 || h.Max() != 5*time.Second || h.Quantile(1) != 5*time.Second {
		t.Fatalf("after merge: n %d max %s q1 %s", h.Count(), h.Max(), h.Quantile(1))
	}
}

func TestPaced(t *testing.T) {
	var seen atomic.Int64
	addr := serve(t, &seen)
	start := time.Now()
	r, err := Run(context.Background(), Options{Network: "tcp", Addr: addr, Sessions: 4, Messages: 20, Next: Paced(100, msg)})
	if err != nil {
		t.Fatal(err)
	}
	// Message 19 is due 190 ms after the first: the run cannot be faster.
	if el := time.Since(start); el < 190*time.Millisecond || r.Answered != 20 {
		t.Fatalf("20 messages at 100/s: %s in %s", r, el)
	}
	if got := Paced(0, msg); got(3).Raw == nil {
		t.Fatal("rate 0 must return next unchanged")
	}
}

// Failures while the milter is down on purpose are excused, not failed;
// every message is still accounted for.
func TestRunExcusesExpectedFailures(t *testing.T) {
	var seen atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := milter.NewServer(milter.WithMilter(func() milter.Milter { return counting{n: &seen} }))
	go srv.Serve(ln)
	defer srv.Close()
	var answered atomic.Int64
	var down atomic.Bool
	r, err := Run(context.Background(), Options{
		Network: "tcp", Addr: ln.Addr().String(), Sessions: 4, PerSession: 5, Messages: 400, Next: msg,
		Check: func(i int64, res mtaclient.Result) error {
			if answered.Add(1) == 100 {
				down.Store(true)
				srv.Close()
			}
			return nil
		},
		Excused: func(time.Time) bool { return down.Load() },
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed != 0 || r.Excused == 0 || r.Answered+r.Excused != r.Sent || r.Sent != 400 || r.Answered < 100 {
		t.Fatalf("%s; errors %q", r, r.Errors)
	}
}
