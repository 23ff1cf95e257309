package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/lab/load"
)

// The mixed-fault soak: several daemons (one per store topology) carry a
// paced load in rounds, and in each round one fault of a list is injected
// while the load runs: Redis restarted, a Sentinel or Cluster failover, a
// daemon killed and restarted, reloads, MTA connections dropped
// mid-message. Everything is counted, nothing timed: a round is a number
// of messages per daemon, a fault starts once a third of its daemon's
// round was answered, and the round's counts are read once every daemon
// is idle again.

// Target is one daemon of a mixed soak, named by its store.
type Target struct {
	Name   string
	Daemon *Daemon
	// down is set while a fault has killed the daemon on purpose; back
	// is when it was last ready again (UnixNano).
	down atomic.Bool
	back atomic.Int64
	// phase is where a round stands with a kill: 0 before it, 1 from the
	// kill to the restart, 2 after.
	phase atomic.Int32
}

// excused says whether a failure on a connection opened then is the
// kill's: the daemon is down, or the connection was opened before it came
// back (it breaks at its next message, which may come after).
func (t *Target) excused(opened time.Time) bool {
	return t.down.Load() || opened.UnixNano() < t.back.Load()
}

// Fault is one fault of the mix.
type Fault struct {
	Name string
	// Target is the index of the daemon it hits, -1 for all.
	Target int
	// Kills: the fault ends the daemon process; messages that fail while
	// it runs are excused (an MTA applies milter_default_action to them),
	// and the daemon's message count restarts.
	Kills bool
	// Extra is how many messages Do itself sends to the restarted
	// daemon (counted by it beside the load's).
	Extra int64
	// Do injects the fault and returns once it is over (Redis back, the
	// failover done, the daemon ready again). A fault that kills sets
	// its target's down flag around the kill.
	Do func(ctx context.Context) error
}

// MixedOptions describe a mixed-fault soak.
type MixedOptions struct {
	Targets  []*Target
	Faults   []Fault
	Sessions int     // concurrent MTA connections per daemon
	Rate     float64 // messages per second per daemon
	PerRound int64   // messages per daemon per round
	// Rounds ends the run after that many rounds; else Duration does
	// (the round in progress is finished).
	Rounds   int
	Duration time.Duration
	// Warmup is how many rounds are left out of the flatness check
	// (default 2).
	Warmup int
	// Settle bounds the wait for every daemon to be idle after a round
	// (default 60 s).
	Settle   time.Duration
	Pool     int // distinct messages (default 2000)
	Progress io.Writer
	// Flat checks that each daemon's RSS and goroutines, sampled idle at
	// the end of each round past the warm-up, stay within 10 % (the long
	// run; a few rounds are too few to tell).
	Flat bool
}

// TargetStats are one daemon's counts over the whole run.
type TargetStats struct {
	Name                           string
	Sent, Answered, Failed         int64
	NoReply, Excused               int64
	Uncounted                      int64 // answered but not in bulkmilter_messages_total (rounds without a kill)
	PolicyVerdicts                 int64 // answered by the failure policy (error= in the verdict)
	StoreErrors                    float64
	Kills, Reloads                 int
	Samples                        []Sample // at the end of each round, idle
	Cycles                         []Sample // each full cycle past the warm-up: mean RSS and live heap, least goroutines
	RSSMin, RSSMax, GorMin, GorMax float64  // over the warm samples
}

// MixedReport is what a mixed soak saw.
type MixedReport struct {
	Rounds   int
	Elapsed  time.Duration
	Targets  []*TargetStats
	Faults   map[string]int // injections by fault name
	Flat     bool           // RSS and goroutines were checked
	Problems []string
}

// OK reports whether every check held.
func (r *MixedReport) OK() bool { return len(r.Problems) == 0 }

func (r *MixedReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d rounds in %s; faults injected:", r.Rounds, r.Elapsed.Round(time.Second))
	for name, n := range r.Faults {
		fmt.Fprintf(&b, " %s ×%d;", name, n)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "%-9s %8s %8s %5s %8s %8s %9s %11s %8s %15s %11s\n", "daemon", "sent", "answered", "lost", "excused", "uncount", "policy", "store errs", "kills", "RSS MiB/cycle", "gor./cycle")
	for _, t := range r.Targets {
		flat := fmt.Sprintf("%6.1f–%-6.1f %5.1f–%-5.1f", t.RSSMin/(1<<20), t.RSSMax/(1<<20), t.GorMin, t.GorMax)
		if len(t.Cycles) == 0 {
			flat = "(no full cycle past the warm-up)"
		}
		fmt.Fprintf(&b, "%-9s %8d %8d %5d %8d %8d %9d %11.0f %8d %s\n", t.Name, t.Sent, t.Answered, t.Failed, t.Excused,
			t.Uncounted, t.PolicyVerdicts, t.StoreErrors, t.Kills, flat)
	}
	if len(r.Targets) > 0 && len(r.Targets[0].Cycles) > 0 {
		b.WriteString("per cycle of faults, past the warm-up: mean RSS MiB / least goroutines / mean live heap MiB\n")
		for _, t := range r.Targets {
			fmt.Fprintf(&b, "%-9s", t.Name)
			for _, c := range t.Cycles {
				fmt.Fprintf(&b, " %.1f/%.1f/%.1f", c.RSS/(1<<20), c.Goroutines, c.LiveHeap/(1<<20))
			}
			b.WriteString("\n")
		}
	}
	if r.OK() {
		b.WriteString("mixed soak held: nothing lost, everything counted")
		if r.Flat {
			b.WriteString(", RSS and goroutines flat")
		}
		b.WriteString("\n")
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "FAILED: %s\n", p)
	}
	return b.String()
}

// Mixed runs the mixed-fault soak. It returns an error only when the run
// could not go on (bad options, metrics unreachable); failed checks, and
// faults that could not be injected or undone, are in the report.
func Mixed(ctx context.Context, o MixedOptions) (*MixedReport, error) {
	if len(o.Targets) == 0 || o.Sessions <= 0 || o.PerRound <= 0 || (o.Rounds <= 0 && o.Duration <= 0) {
		return nil, errors.New("soak: targets, sessions, messages per round and rounds or duration are required")
	}
	if o.Warmup <= 0 {
		o.Warmup = 2
	}
	if o.Settle <= 0 {
		o.Settle = 60 * time.Second
	}
	if o.Pool <= 0 {
		o.Pool = 2000
	}
	pool := Pool(o.Pool)
	rep := &MixedReport{Faults: map[string]int{}, Flat: o.Flat}
	for _, t := range o.Targets {
		rep.Targets = append(rep.Targets, &TargetStats{Name: t.Name})
	}
	start := time.Now()
	for round := 0; ; round++ {
		if o.Rounds > 0 && round >= o.Rounds || o.Rounds <= 0 && time.Since(start) >= o.Duration {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var f *Fault
		if len(o.Faults) > 0 {
			f = &o.Faults[round%len(o.Faults)]
			rep.Faults[f.Name]++
		}
		if err := mixedRound(ctx, o, pool, round, f, rep); err != nil {
			return nil, fmt.Errorf("round %d (%s): %w", round, faultName(f), err)
		}
		rep.Rounds = round + 1
	}
	rep.Elapsed = time.Since(start)
	rep.Problems = mixedCheck(rep, o.Warmup, len(o.Faults), o.Flat)
	return rep, nil
}

func faultName(f *Fault) string {
	if f == nil {
		return "no fault"
	}
	return f.Name
}

// mixedRound runs one round: the load on every daemon, the fault once its
// daemon answered a third of the round, then the counts once all are idle.
func mixedRound(ctx context.Context, o MixedOptions, pool []load.Message, round int, f *Fault, rep *MixedReport) error {
	n := len(o.Targets)
	before := make([]Sample, n)
	for i, t := range o.Targets {
		s, err := Scrape(ctx, t.Daemon.MetricsURL)
		if err != nil {
			return err
		}
		before[i] = s
	}
	answered := make([]atomic.Int64, n)
	policy := make([]atomic.Int64, n)
	// What the killed daemon answered before the kill (its old process)
	// and after the restart (its new one).
	var afterFault, beforeFault atomic.Int64
	for _, t := range o.Targets {
		t.phase.Store(0)
	}
	reports := make([]*load.Report, n)
	var wg sync.WaitGroup
	for i, t := range o.Targets {
		offset := int64(round)*o.PerRound + int64(i)*7919 // each daemon its own walk through the pool
		wg.Go(func() {
			reports[i], _ = load.Run(ctx, load.Options{
				Network: "tcp", Addr: t.Daemon.Addr, Sessions: o.Sessions, Messages: o.PerRound,
				Next: load.Paced(o.Rate, func(k int64) load.Message { return pool[(offset+k)%int64(len(pool))] }),
				Check: func(k int64, res mtaclient.Result) error {
					if err := hasVerdict(k, res); err != nil {
						return err
					}
					if v, _ := res.Header("X-Bulk"); strings.Contains(v, "error=") {
						policy[i].Add(1)
					}
					answered[i].Add(1)
					if f != nil && f.Kills && f.Target == i {
						switch t.phase.Load() {
						case 0:
							beforeFault.Add(1)
						case 2:
							afterFault.Add(1)
						}
					}
					return nil
				},
				Excused: t.excused,
			})
		})
	}
	var faultErr error
	if f != nil {
		// Count-based trigger: a third of the hit daemon's round answered
		// (of the first daemon's when the fault hits them all).
		ti := max(f.Target, 0)
		for answered[ti].Load() < o.PerRound/3 {
			if ctx.Err() != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		faultErr = f.Do(ctx)
	}
	wg.Wait()
	if faultErr != nil {
		// Reported, and the run goes on: the next rounds show what the
		// fault left behind.
		rep.Problems = append(rep.Problems, fmt.Sprintf("round %d: %s: %v", round, f.Name, faultErr))
	}
	line := fmt.Sprintf("round %3d  %-28s", round, faultName(f))
	for i, t := range o.Targets {
		after, err := idle(ctx, t.Daemon.MetricsURL, o.Settle)
		if err != nil {
			return err
		}
		st, lr := rep.Targets[i], reports[i]
		st.Sent += lr.Sent
		st.Answered += lr.Answered
		st.Failed += lr.Failed
		st.NoReply += lr.NoReply
		st.Excused += lr.Excused
		st.PolicyVerdicts += policy[i].Load()
		killed := t.phase.Load() > 0 // the fault got as far as the kill
		if killed {
			// The new process counts from zero: it must have counted what
			// it answered after the restart, and no more than the round's
			// answers that the old process did not already give.
			st.Kills++
			st.StoreErrors += after.StoreErrs
			got := after.Messages - float64(f.Extra)
			lo, hi := float64(afterFault.Load()), float64(lr.Answered-beforeFault.Load())
			if got < lo || got > hi {
				rep.Problems = append(rep.Problems, fmt.Sprintf("round %d, %s: the restarted daemon counted %.0f messages, answered after its restart %.0f, at most %.0f", round, t.Name, got, lo, hi))
			}
			st.Samples = append(st.Samples, after)
		} else {
			st.StoreErrors += after.StoreErrs - before[i].StoreErrs
			if d := int64(after.Messages-before[i].Messages) - lr.Answered; d != 0 {
				st.Uncounted += max(-d, 0)
				rep.Problems = append(rep.Problems, fmt.Sprintf("round %d, %s: the daemon counted %.0f messages, %d were answered", round, t.Name, after.Messages-before[i].Messages, lr.Answered))
			}
			st.Samples = append(st.Samples, after)
		}
		if f != nil && f.Name == "reloads" {
			st.Reloads++
		}
		line += fmt.Sprintf(" | %s %d/%d", t.Name, lr.Answered, lr.Sent)
		if lr.Excused > 0 {
			line += fmt.Sprintf(" (excused %d)", lr.Excused)
		}
		if e := policy[i].Load(); e > 0 {
			line += fmt.Sprintf(" (policy %d)", e)
		}
		line += fmt.Sprintf(" rss %.1f gor %.0f", after.RSS/(1<<20), after.Goroutines)
	}
	if o.Progress != nil {
		fmt.Fprintln(o.Progress, line)
	}
	return nil
}

// idle waits until the daemon has no session and no message in progress
// (bounded by d) and returns that sample.
func idle(ctx context.Context, url string, d time.Duration) (Sample, error) {
	deadline := time.Now().Add(d)
	for {
		m, err := scrapeMetrics(ctx, url)
		if err != nil {
			return Sample{}, err
		}
		s := sampleOf(m)
		if m.Get("bulkmilter_sessions_active") == 0 && m.Get("bulkmilter_messages_in_progress") == 0 {
			return s, nil
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("%s: %v sessions and %v messages still open %s after the round", url,
				m.Get("bulkmilter_sessions_active"), m.Get("bulkmilter_messages_in_progress"), d)
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// mixedCheck lists what failed over the run: lost or uncounted messages,
// and RSS or goroutines that grew past 10 % of their warm minimum.
func mixedCheck(r *MixedReport, warmup, cycle int, flat bool) []string {
	cycle = max(cycle, 1)
	p := r.Problems
	for _, t := range r.Targets {
		if t.Sent == 0 {
			p = append(p, fmt.Sprintf("%s: no message was sent", t.Name))
		}
		if t.Failed != 0 {
			p = append(p, fmt.Sprintf("%s: %d messages lost (no reply or no verdict outside a kill), %d of them sent whole", t.Name, t.Failed, t.NoReply))
		}
		if t.Sent != t.Answered+t.Failed+t.Excused {
			p = append(p, fmt.Sprintf("%s: sent %d ≠ answered %d + failed %d + excused %d", t.Name, t.Sent, t.Answered, t.Failed, t.Excused))
		}
		// Over time, a cycle of faults at a time: each full cycle past
		// the warm-up rounds gives its mean RSS (a reload leaves more
		// memory mapped than a failover, and single samples swing by
		// about 10 % with the collector's timing) and its least
		// goroutines (a leak raises the floor; the goroutines of
		// connections just closed, still ending when the daemon reports
		// itself idle, raise single samples), and these must stay within
		// 10 % of each other: growth, not swing. The embedded daemon's
		// processes (one per cycle, as it is killed once a cycle) are
		// compared the same way.
		t.Cycles = nil
		for from := warmup; from+cycle <= len(t.Samples); from += cycle {
			m := Sample{Goroutines: t.Samples[from].Goroutines}
			for _, s := range t.Samples[from : from+cycle] {
				m.RSS += s.RSS / float64(cycle)
				m.Goroutines = min(m.Goroutines, s.Goroutines)
				m.LiveHeap += s.LiveHeap / float64(cycle)
			}
			t.Cycles = append(t.Cycles, m)
		}
		for i, m := range t.Cycles {
			if i == 0 {
				t.RSSMin, t.RSSMax, t.GorMin, t.GorMax = m.RSS, m.RSS, m.Goroutines, m.Goroutines
			}
			t.RSSMin, t.RSSMax = min(t.RSSMin, m.RSS), max(t.RSSMax, m.RSS)
			t.GorMin, t.GorMax = min(t.GorMin, m.Goroutines), max(t.GorMax, m.Goroutines)
		}
		if !flat || len(t.Cycles) < 2 {
			continue
		}
		if t.RSSMax > 1.10*t.RSSMin {
			p = append(p, fmt.Sprintf("%s: mean RSS per cycle %.1f–%.1f MiB over the run, more than 10 %%", t.Name, t.RSSMin/(1<<20), t.RSSMax/(1<<20)))
		}
		if t.GorMax > 1.10*t.GorMin {
			p = append(p, fmt.Sprintf("%s: least goroutines per cycle %.0f–%.0f over the run, more than 10 %%", t.Name, t.GorMin, t.GorMax))
		}
	}
	return p
}

// KillRestart is the fault that kills the daemon of t (SIGKILL) and starts
// it again on the same store file, checking that a user's vote cast before
// survives: a message voted "bulk" by its recipient is bulk for her again
// after the restart (an own vote decides whatever the counts, which the
// kill may set back to the last periodic save).
func KillRestart(target int, t *Target, round *atomic.Int64) Fault {
	return Fault{Name: "SIGKILL " + t.Name + " daemon", Target: target, Kills: true, Extra: 1, Do: func(ctx context.Context) error {
		n := round.Add(1)
		voter := fmt.Sprintf("voter%d@example.test", n)
		msg := votedMessage(n, voter)
		cl := mtaclient.New("tcp", t.Daemon.Addr)
		env := mtaclient.Envelope{From: "news@votes.example", Rcpts: []string{voter}}
		if _, err := cl.Send(env, msg); err != nil {
			return fmt.Errorf("send the message to vote on: %w", err)
		}
		saves := func() (float64, error) {
			m, err := scrapeMetrics(ctx, t.Daemon.MetricsURL)
			return m.Get(`bulkmilter_store_request_duration_seconds_count{op="save"}`), err
		}
		saved, err := saves()
		if err != nil {
			return err
		}
		report := feedbackReport("bulk", voter, msg)
		if _, err := cl.Send(mtaclient.Envelope{AuthUser: voter, From: voter, Rcpts: []string{"bulk-feedback@example.test"}}, report); err != nil {
			return fmt.Errorf("send the vote: %w", err)
		}
		if err := userBulk(cl, env, msg); err != nil {
			return fmt.Errorf("before the kill: %w", err)
		}
		// The vote is written within a second; wait for that save (a
		// count, bounded far above a busy machine's second).
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			s, err := saves()
			if err != nil {
				return err
			}
			if s > saved {
				break
			}
			if time.Now().After(deadline) {
				return errors.New("the store file was not saved within 60 s of a vote")
			}
		}
		t.phase.Store(1)
		t.down.Store(true)
		if err := t.Daemon.Kill(); err != nil {
			return err
		}
		err = t.Daemon.Restart()
		t.back.Store(time.Now().UnixNano())
		t.down.Store(false)
		t.phase.Store(2)
		if err != nil {
			return err
		}
		if err := userBulk(cl, env, msg); err != nil {
			return fmt.Errorf("the vote was lost with the SIGKILL: %w", err)
		}
		return nil
	}}
}

// userBulk sends msg and wants the recipient's own "bulk" vote in the
// verdict.
func userBulk(cl *mtaclient.Client, env mtaclient.Envelope, msg []byte) error {
	res, err := cl.Send(env, msg)
	if err != nil {
		return err
	}
	if v, _ := res.Header("X-Bulk"); !strings.HasPrefix(v, "yes") || !strings.Contains(v, "feedback=user-bulk") {
		return fmt.Errorf("verdict %q, want yes with feedback=user-bulk", v)
	}
	return nil
}

// votedMessage is a message that shares keys with no load message and no
// other round's: its words are made up from the round's own random letters.
// (Words drawn from one vocabulary gave every round's message the same
// lexicon terms, so since issue 15 they joined one campaign and an earlier
// round's voters decided the verdict, not this round's own vote.)
func votedMessage(n int64, rcpt string) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 99))
	var b strings.Builder
	for i := range 80 {
		for range 4 + rng.IntN(6) {
			b.WriteByte(byte('a' + rng.IntN(26)))
		}
		if i%12 == 11 {
			b.WriteString(".\r\n")
		} else {
			b.WriteByte(' ')
		}
	}
	return fmt.Appendf(nil, "From: Votes <news@votes.example>\r\nTo: <%s>\r\nSubject: the weekly digest %d\r\nMessage-ID: <vote%d@votes.example>\r\n\r\n%s\r\n", rcpt, n, n, b.String())
}

// feedbackReport is a user's report on msg, attached as message/rfc822,
// as deploy/dovecot/bulk-feedback sends it.
func feedbackReport(kind, voter string, msg []byte) []byte {
	return []byte("From: <" + voter + ">\r\nTo: <bulk-feedback@example.test>\r\nSubject: bulk feedback: " + kind + "\r\n" +
		"X-Bulk-Feedback: " + kind + "\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"fb-boundary\"\r\n\r\n" +
		"--fb-boundary\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\nThe attached message was reported as " + kind + ".\r\n\r\n" +
		"--fb-boundary\r\nContent-Type: message/rfc822\r\nContent-Disposition: attachment\r\n\r\n" + string(msg) + "\r\n--fb-boundary--\r\n")
}

// Reloads is the fault that reloads every daemon (SIGHUP) times times,
// each reload waited for in bulkmilter_config_reloads_total.
func Reloads(targets []*Target, times int) Fault {
	return Fault{Name: "reloads", Target: -1, Do: func(ctx context.Context) error {
		for range times {
			for _, t := range targets {
				m, err := scrapeMetrics(ctx, t.Daemon.MetricsURL)
				if err != nil {
					return err
				}
				ok := m.Get(`bulkmilter_config_reloads_total{result="success"}`)
				if err := t.Daemon.Signal(syscall.SIGHUP); err != nil {
					return err
				}
				for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
					m, err := scrapeMetrics(ctx, t.Daemon.MetricsURL)
					if err != nil {
						return err
					}
					if m.Get(`bulkmilter_config_reloads_total{result="success"}`) > ok {
						break
					}
					if m.Get(`bulkmilter_config_reloads_total{result="failure"}`) > 0 || time.Now().After(deadline) {
						return fmt.Errorf("%s: reload failed or not done within 60 s", t.Name)
					}
				}
			}
		}
		return nil
	}}
}

// DropConnections is the fault that opens n MTA connections to the daemon
// of t and drops each in the middle of its message.
func DropConnections(target int, t *Target, n int) Fault {
	return Fault{Name: "MTA connections dropped", Target: target, Do: func(ctx context.Context) error {
		pool := Pool(50)
		cl := mtaclient.New("tcp", t.Daemon.Addr)
		rng := rand.New(rand.NewPCG(uint64(n), 3))
		for range n {
			m := pool[rng.IntN(len(pool))]
			s, err := cl.Open(mtaclient.Envelope{From: m.From, Rcpts: m.Rcpts})
			if err != nil {
				return fmt.Errorf("open a connection to drop: %w", err)
			}
			if err := s.SendCut("", nil, m.Raw, rng.IntN(len(m.Raw))); err != nil {
				return fmt.Errorf("send a message to cut: %w", err)
			}
		}
		return nil
	}}
}
