// Package load drives a milter with many concurrent MTA sessions, as a
// busy Postfix does, and reports what it saw: messages sent and answered,
// failures, throughput and the latency each message added. The benchmark
// command, the soak command and the fault tests share it, so their figures
// mean the same thing.
//
// It may import internal/mtaclient.
package load

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/d--j/go-milter"
)

// Message is one message of the load.
type Message struct {
	From  string
	Rcpts []string
	Raw   []byte
}

// Options describe a run.
type Options struct {
	Network, Addr string // the milter: "tcp", "127.0.0.1:7357" or "unix", path
	// Sessions is the number of concurrent MTA connections.
	Sessions int
	// PerSession is how many messages a connection carries before it is
	// closed and a new one opened (Postfix reuses a milter connection for
	// every message of an SMTP session). Default 20.
	PerSession int
	// Messages stops the run after that many messages (0: no limit).
	Messages int64
	// Duration stops the run after that long (0: no limit). One of
	// Messages, Duration or the context must end the run.
	Duration time.Duration
	// Next returns message i (0, 1, ...); it is called concurrently.
	Next func(i int64) Message
	// Check, when set, judges each answer; an error counts the message as
	// failed. It is called concurrently.
	Check func(i int64, res mtaclient.Result) error
	// Timeout bounds each read and write on the connection. Default
	// mtaclient.ReplyTimeout, as long as Postfix waits at end of message.
	Timeout time.Duration
	// Excused, when set, is asked at each failure whether the run
	// expected it (the milter was killed on purpose: an MTA applies its
	// milter_default_action to such a message and delivers or retries it);
	// such failures count in Report.Excused instead of Failed. opened is
	// when the failing message's connection was opened (or tried): a
	// connection opened before a kill breaks at its next message, which
	// may come after the milter is back.
	Excused func(opened time.Time) bool
}

// Report is what a run saw.
type Report struct {
	Sent     int64 // messages started
	Answered int64 // messages with an end-of-message reply that passed Check
	Failed   int64 // messages without a reply, or whose reply failed Check
	// Excused counts the messages without a reply while Options.Excused
	// said the failure was expected; Sent = Answered + Failed + Excused.
	Excused int64
	// NoReply counts the failed messages that were sent whole and got no
	// end-of-message reply (mtaclient.ErrNoReply); the others were cut
	// before (refused connection, closed session) or failed Check.
	NoReply int64
	Errors  []string
	Elapsed time.Duration
	// Latency is the time from MAIL to the end-of-message reply: all the
	// time the milter added to each answered message's transaction.
	Latency *Histogram
}

// PerSecond is the answered messages per second of the run.
func (r *Report) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Answered) / r.Elapsed.Seconds()
}

func (r *Report) String() string {
	excused := ""
	if r.Excused > 0 {
		excused = fmt.Sprintf(" excused %d", r.Excused)
	}
	return fmt.Sprintf("sent %d answered %d failed %d (no reply %d)%s in %s: %.0f msgs/s, latency p50 %s p99 %s p99.9 %s max %s",
		r.Sent, r.Answered, r.Failed, r.NoReply, excused, r.Elapsed.Round(time.Millisecond), r.PerSecond(),
		r.Latency.Quantile(0.5), r.Latency.Quantile(0.99), r.Latency.Quantile(0.999), r.Latency.Max())
}

// maxErrors bounds the error texts a report keeps.
const maxErrors = 20

// Run runs the load and returns its report. It returns an error only for
// invalid options; failures of messages are in the report.
func Run(ctx context.Context, opt Options) (*Report, error) {
	if opt.Sessions <= 0 || opt.Next == nil {
		return nil, errors.New("load: sessions and next are required")
	}
	if opt.Messages <= 0 && opt.Duration <= 0 && ctx.Done() == nil {
		return nil, errors.New("load: nothing ends the run: set messages, duration or a context")
	}
	if opt.PerSession <= 0 {
		opt.PerSession = 20
	}
	if opt.Timeout <= 0 {
		opt.Timeout = mtaclient.ReplyTimeout
	}
	if opt.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opt.Duration)
		defer cancel()
	}
	r := &Report{Latency: new(Histogram)}
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
	)
	fail := func(opened time.Time, err error) {
		mu.Lock()
		defer mu.Unlock()
		if opt.Excused != nil && !opened.IsZero() && opt.Excused(opened) {
			r.Excused++
			return
		}
		if errors.Is(err, mtaclient.ErrNoReply) {
			r.NoReply++
		}
		r.Failed++
		if len(r.Errors) < maxErrors {
			r.Errors = append(r.Errors, err.Error())
		}
	}
	// take returns the next message index, or false when the run is over.
	take := func() (int64, bool) {
		if ctx.Err() != nil {
			return 0, false
		}
		i := next.Add(1) - 1
		if opt.Messages > 0 && i >= opt.Messages {
			return 0, false
		}
		return i, true
	}
	start := time.Now()
	for range opt.Sessions {
		wg.Go(func() {
			cl := mtaclient.New(opt.Network, opt.Addr, milter.WithReadTimeout(opt.Timeout), milter.WithWriteTimeout(opt.Timeout))
			hist := new(Histogram)
			defer func() {
				mu.Lock()
				r.Latency.Merge(hist)
				mu.Unlock()
			}()
			for {
				i, ok := take()
				if !ok {
					return
				}
				m := opt.Next(i)
				opened := time.Now()
				s, err := cl.Open(mtaclient.Envelope{From: m.From, Rcpts: m.Rcpts})
				if err != nil {
					atomic.AddInt64(&r.Sent, 1)
					fail(opened, fmt.Errorf("message %d: %w", i, err))
					continue
				}
				for n := 0; ; n++ {
					atomic.AddInt64(&r.Sent, 1)
					t0 := time.Now()
					res, err := s.Send(m.From, m.Rcpts, m.Raw)
					if err != nil {
						fail(opened, fmt.Errorf("message %d: %w", i, err))
						break // the connection's state is unknown: open another
					}
					if opt.Check != nil {
						if err := opt.Check(i, res); err != nil {
							fail(time.Time{}, fmt.Errorf("message %d: %w", i, err)) // a wrong answer is never excused
							break
						}
					}
					hist.Add(time.Since(t0))
					atomic.AddInt64(&r.Answered, 1)
					if n+1 >= opt.PerSession {
						break
					}
					if i, ok = take(); !ok {
						break
					}
					m = opt.Next(i)
				}
				s.Close()
			}
		})
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	return r, nil
}

// Paced returns next slowed to rate messages per second in all, counted
// from the first call: message i is returned at start + i/rate. Run calls
// Next before it times a message, so pacing adds no latency. A rate of 0
// returns next as it is.
func Paced(rate float64, next func(int64) Message) func(int64) Message {
	if rate <= 0 {
		return next
	}
	var once sync.Once
	var t0 time.Time
	return func(i int64) Message {
		once.Do(func() { t0 = time.Now() })
		time.Sleep(time.Until(t0.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		return next(i)
	}
}

// Histogram records durations in logarithmic buckets 1 % wide, so that
// a run of any length keeps a fixed, small amount of memory and quantiles
// are within 1 %.
type Histogram struct {
	counts map[int]int64
	n      int64
	max    time.Duration
}

const histBase = 1.01

func bucket(d time.Duration) int {
	if d < time.Microsecond {
		return 0
	}
	return int(math.Log(float64(d)/float64(time.Microsecond)) / math.Log(histBase))
}

// Add records one duration.
func (h *Histogram) Add(d time.Duration) {
	if h.counts == nil {
		h.counts = map[int]int64{}
	}
	h.counts[bucket(d)]++
	h.n++
	h.max = max(h.max, d)
}

// Merge adds o's durations to h.
func (h *Histogram) Merge(o *Histogram) {
	if h.counts == nil {
		h.counts = map[int]int64{}
	}
	for b, c := range o.counts {
		h.counts[b] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Count is the number of durations recorded.
func (h *Histogram) Count() int64 { return h.n }

// Max is the longest duration recorded.
func (h *Histogram) Max() time.Duration { return h.max }

// Quantile returns the q-quantile (0 < q ≤ 1), rounded up to its bucket's
// upper bound; 0 when nothing was recorded.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	keys := make([]int, 0, len(h.counts))
	for b := range h.counts {
		keys = append(keys, b)
	}
	slices.Sort(keys)
	var seen int64
	for _, b := range keys {
		seen += h.counts[b]
		if seen >= rank {
			d := time.Duration(float64(time.Microsecond) * math.Pow(histBase, float64(b+1)))
			return min(d, h.max).Round(time.Microsecond)
		}
	}
	return h.max
}
