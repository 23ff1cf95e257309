package detect

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/store"
)

// counting hands every call to the real embedded store and counts the
// recipients each Observe call carried.
type counting struct {
	*store.Embedded
	rcpts atomic.Int64
}

func (c *counting) Observe(ctx context.Context, o store.Observation) (store.Result, error) {
	c.rcpts.Add(int64(len(o.Recipients)))
	return c.Embedded.Observe(ctx, o)
}

// Every recipient of a message reaches the store: detect never caps them
// (the session does, at limits.max_recipients, 100,000 by default).
func TestAllRecipientsReachTheStore(t *testing.T) {
	st, err := store.OpenEmbedded(store.EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &counting{Embedded: st}
	f := newFixtureWith(t, c)
	rcpts := recipients("flood", 100_000)
	v := f.e.Check(context.Background(), newsletter("gardening", append(rcpts, rcpts[:10]...)...))
	if got := c.rcpts.Load(); got != 100_000 {
		t.Errorf("the store got %d recipients, want the 100,000 distinct ones", got)
	}
	t.Logf("verdict %q", v.Header(false))
}

// personalWords strips only what can be a name: a bounded display name of
// name-like words, given to the recipient's own address.
func TestPersonalWords(t *testing.T) {
	const anna = "anna.ivanova@example.test"
	for _, tc := range []struct {
		name   string
		fields map[string]string
		want   []string // beyond the address parts
	}{
		{"name in To", map[string]string{"To": `"Anna Ivanova" <anna.ivanova@example.test>`}, []string{"Anna", "Ivanova"}},
		{"name in Cc, other To", map[string]string{"To": "list@example.org", "Cc": `Anna Ivanova <Anna.Ivanova@Example.TEST>`}, []string{"Anna", "Ivanova"}},
		{"encoded name", map[string]string{"To": `=?utf-8?q?J=C3=BCrgen_O'Neil-Smith?= <anna.ivanova@example.test>`}, []string{"Jürgen", "O'Neil-Smith"}},
		{"someone else's name", map[string]string{"To": `"Boris Petrov" <boris@example.test>, anna.ivanova@example.test`}, nil},
		{"five words: not a name", map[string]string{"To": `"Dear Valued Garden Club Member" <anna.ivanova@example.test>`}, nil},
		{"digits: not a name", map[string]string{"To": `"Anna 2024" <anna.ivanova@example.test>`}, nil},
		{"forty body words: not a name", map[string]string{"To": `"` + strings.Repeat("spring garden soil ", 14) + `" <anna.ivanova@example.test>`}, nil},
		{"only the first name given to her counts", map[string]string{"To": `"Anna" <anna.ivanova@example.test>, "Spring Garden Soil Seeds" <anna.ivanova@example.test>`}, []string{"Anna"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h textproto.Header
			for k, v := range tc.fields {
				h.Add(k, v)
			}
			got := personalWords(h, []string{anna}, DefaultLimits.NameWords)
			want := append([]string{"anna.ivanova", "anna", "ivanova", "example"}, tc.want...)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("personalWords = %q, want %q", got, want)
			}
		})
	}
}

// A display name made of the body's words strips nothing, so the copies of
// such a campaign share every key: what the eval's display-name attacks
// measure, here on one message.
func TestDisplayNameOfBodyWordsStripsNothing(t *testing.T) {
	f := newFixture(t)
	rng := rand.New(rand.NewPCG(22, 22))
	msg := func(i int) *Message {
		m := newsletter("gardening", fmt.Sprintf("r%d@example.test", i))
		body, _ := io.ReadAll(newsletter("gardening").Body)
		var name []string
		for _, w := range strings.Fields(string(body)) {
			if rng.Float64() < 0.4 {
				name = append(name, w)
			}
		}
		m.Header.Set("To", fmt.Sprintf("%q <r%d@example.test>", strings.Join(name, " "), i))
		return m
	}
	first := f.ids(func() *Message { return msg(1) })
	for i := 2; i <= 5; i++ {
		if got := f.ids(func() *Message { return msg(i) }); strings.Join(got, " ") != strings.Join(first, " ") {
			t.Errorf("copy %d has other keys than copy 1", i)
		}
	}
}

// deadlines hands every call to the real embedded store and records the
// deadline each Observe call was given, as a time after from.
type deadlines struct {
	*store.Embedded
	from  time.Time
	after []time.Duration
}

func (d *deadlines) Observe(ctx context.Context, o store.Observation) (store.Result, error) {
	if dl, ok := ctx.Deadline(); ok {
		d.after = append(d.after, dl.Sub(d.from))
	}
	return d.Embedded.Observe(ctx, o)
}

// A slow analysis is not a store failure: the store's budget starts when
// the analysis is done, and the verdict is the store's, marked slow.
func TestSlowAnalysisIsNotAStoreFailure(t *testing.T) {
	st, err := store.OpenEmbedded(store.EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	d := &deadlines{Embedded: st}
	f := newFixtureWith(t, d)
	var slow atomic.Int32
	opt := f.e.opt
	opt.StoreTimeout, opt.SlowAnalysis, opt.Observer = time.Second, 5*time.Millisecond, slowCounter{&slow}
	e, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	// A large message: its analysis takes tens of milliseconds, more than
	// SlowAnalysis on any machine.
	m := newsletter("gardening", "a@example.test")
	body, _ := io.ReadAll(m.Body)
	m.Body = strings.NewReader(strings.Repeat(string(body), 2000))
	d.from = time.Now()
	v := e.Check(context.Background(), m)
	if v.Err != nil || !v.Slow || !strings.HasSuffix(v.Header(false), "; slow") || slow.Load() != 1 {
		t.Fatalf("verdict %q (err %v, slow %v), slow analyses counted %d", v.Header(false), v.Err, v.Slow, slow.Load())
	}
	// The verdict is slow, so the analysis took more than SlowAnalysis
	// after the check began: a budget that starts after it ends no sooner
	// than SlowAnalysis+StoreTimeout after that. The bound holds on a
	// machine of any speed or load (a stall only moves the deadline
	// later), where a bound on the budget left when the call began failed
	// whenever the process was descheduled between the two.
	if len(d.after) != 1 || d.after[0] < opt.SlowAnalysis+opt.StoreTimeout {
		t.Errorf("store deadlines %v after the check began; want one, at least %v: the analysis ate the budget",
			d.after, opt.SlowAnalysis+opt.StoreTimeout)
	}
}

// slowCounter counts slow analyses and observes nothing else.
type slowCounter struct{ n *atomic.Int32 }

func (c slowCounter) Message(string, time.Duration) {}
func (c slowCounter) Signature(string, string)      {}
func (c slowCounter) Volume(string, int64)          {}
func (c slowCounter) Override(string, string)       {}
func (c slowCounter) Defect(string)                 {}
func (c slowCounter) Truncated()                    {}
func (c slowCounter) SlowAnalysis()                 { c.n.Add(1) }
func (c slowCounter) Level(int, string)             {}
func (c slowCounter) Error(string)                  {}
func (c slowCounter) SenderExempt(string)           {}
