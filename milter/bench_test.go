package milter

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"

	gomilter "github.com/d--j/go-milter"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/lab/load"
	"github.com/bulkmilter/bulkmilter/lab/sample"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/signature"
)

// BenchmarkSession: one message over the milter protocol on loopback,
// with the MTA client in the same process, 8 concurrent sessions of 20
// messages each. "adapter" is bulkmilter's server with a pipeline that
// returns a verdict at once (the adapter's own cost: guard, session
// state, buffering, the verdict header); "do-nothing" is go-milter's
// NoOpMilter negotiating the same options. ns/op is wall time per message
// for all sessions together; cpu-ns/msg counts client and server.
//
//	go test ./milter -run '^$' -bench Session -benchtime 20000x
func BenchmarkSession(b *testing.B) {
	var h = []byte("From: sender@example.org\r\nTo: rcpt@example.test\r\nSubject: weekly offers\r\n" +
		"Date: Sun, 22 Nov 2026 10:00:00 +0000\r\nMessage-ID: <1@example.org>\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n\r\n")
	msg := append(h, []byte(fmt.Sprintf("%0400d\r\n", 0))...)
	for range 10 {
		msg = append(msg, "Our weekly offers include garden tools and kitchen knives for the whole family.\r\n"...)
	}
	serve := func(b *testing.B, wrap bool) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		if wrap {
			cfg := config.Default()
			state := &State{Pipeline: instant{}, Config: &cfg}
			srv := NewServer(Options{State: func() *State { return state },
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.New(prometheus.NewRegistry())})
			go srv.Serve(ln) //nolint:errcheck // ends with Close
			b.Cleanup(func() { srv.Close() })
		} else {
			o := append(ProtocolOptions(), gomilter.WithMilter(func() gomilter.Milter { return gomilter.NoOpMilter{} }))
			srv := gomilter.NewServer(o...)
			go srv.Serve(ln) //nolint:errcheck // ends with Close
			b.Cleanup(func() { srv.Close() })
		}
		return ln.Addr().String()
	}
	for _, c := range []struct {
		name string
		wrap bool
	}{{"adapter", true}, {"do-nothing", false}} {
		b.Run(c.name, func(b *testing.B) {
			addr := serve(b, c.wrap)
			next := func(i int64) load.Message {
				return load.Message{From: "sender@example.org", Rcpts: []string{"rcpt@example.test"}, Raw: msg}
			}
			if _, err := load.Run(context.Background(), load.Options{Network: "tcp", Addr: addr, Sessions: 8, Messages: 200, Next: next}); err != nil {
				b.Fatal(err)
			}
			cpu0 := sample.CPUTime()
			b.ResetTimer()
			rep, err := load.Run(context.Background(), load.Options{Network: "tcp", Addr: addr, Sessions: 8, Messages: int64(b.N), Next: next})
			b.StopTimer()
			if err != nil || rep.Answered != int64(b.N) {
				b.Fatalf("answered %d of %d: %v %v", rep.Answered, b.N, err, rep.Errors)
			}
			b.ReportMetric(float64((sample.CPUTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/msg")
			b.ReportMetric(rep.PerSecond(), "msgs/s")
			b.ReportMetric(float64(rep.Latency.Quantile(0.99).Microseconds()), "p99-µs")
		})
	}
}

// instant is a pipeline that decides at once.
type instant struct{}

func (instant) Check(context.Context, *detect.Message) detect.Verdict {
	return detect.Verdict{Family: signature.FamilyIMatch, Volume: 1}
}
