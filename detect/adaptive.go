package detect

import (
	"context"
	"sync"
	"time"

	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// The adaptive threshold (issue 16). Ten distinct recipients is a mass
// mailing at a site of 100,000 users; at a site of fifty, a campaign
// reaches a handful of them. The threshold follows the number of distinct
// recipients active at the site in the window: one step per PerStep of
// them, never below Floor nor above the configured thresholds (the
// ceiling), so a large site keeps the configured thresholds and a small
// one comes down to the floor. Measured on a real site's stream in
// docs/evaluation.md ("Real stream").

// SiteCounter counts the site's distinct recipients (store.Site,
// store.Redis).
type SiteCounter interface {
	CountSite(ctx context.Context, rcpts []string, at time.Time) (store.SiteCount, error)
}

// Adaptive configures the adaptive threshold.
type Adaptive struct {
	// Site counts the site's recipients; nil keeps the thresholds fixed.
	Site SiteCounter
	// Floor is the lowest threshold.
	Floor int
	// PerStep is the number of active recipients per step of threshold:
	// the threshold is ⌈active/PerStep⌉ within [Floor, ceiling].
	PerStep int
	// Window is the store's window: until the count has covered one, it
	// does not know the site, and the thresholds stay at the ceiling (after
	// a restart of a single host, whose count is in memory).
	Window time.Duration
	// NetworksOnly lowers only the threshold a campaign's distinct
	// sending networks count against; the families' volumes (recipients)
	// keep the configured thresholds.
	NetworksOnly bool
	// Refresh is how often, in message time, the count is brought up to
	// date (one store call; recipients seen meanwhile wait in memory).
	Refresh time.Duration
}

// maxPending bounds the recipients held between refreshes; a refresh is
// due when they reach it.
const maxPending = 4096

// site is an engine's view of the site's count.
type site struct {
	Adaptive
	mu      sync.Mutex
	pending map[string]struct{}
	count   store.SiteCount
	fresh   time.Time // message time of the last refresh
	busy    bool      // a refresh is running
	step    int       // the step capped was made for
	capped  map[signature.Family]int
}

func newSite(a Adaptive) *site {
	if a.Site == nil {
		return nil
	}
	a.Floor = max(a.Floor, 1)
	a.PerStep = max(a.PerStep, 1)
	if a.Refresh <= 0 {
		a.Refresh = time.Minute
	}
	return &site{Adaptive: a, pending: map[string]struct{}{}}
}

// observe adds a message's recipients and returns the count, refreshed
// when due. A failed refresh keeps the previous count.
func (s *site) observe(ctx context.Context, timeout time.Duration, rcpts []string, at time.Time) (store.SiteCount, time.Time) {
	now := at
	if now.IsZero() {
		now = time.Now()
	}
	s.mu.Lock()
	for _, r := range rcpts {
		if len(s.pending) < maxPending {
			s.pending[r] = struct{}{}
		}
	}
	due := !s.busy && (s.fresh.IsZero() || now.Sub(s.fresh) >= s.Refresh || len(s.pending) >= maxPending)
	if !due {
		defer s.mu.Unlock()
		return s.count, now
	}
	batch := make([]string, 0, len(s.pending))
	for r := range s.pending {
		batch = append(batch, r)
	}
	clear(s.pending)
	s.busy = true
	s.mu.Unlock()

	// The deadline only for the refresh: most messages make none, and a
	// context with a timer is three allocations.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	c, err := s.Site.CountSite(ctx, batch, at)
	cancel()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy, s.fresh = false, now
	if err == nil {
		s.count = c
	}
	return s.count, now
}

// thresholds returns the thresholds in effect for a message, for the
// families' volumes and for the campaign's sending networks: the
// configured ones (the ceiling) until the count covers a window, then one
// step per PerStep active recipients within [Floor, ceiling], for the
// networks alone when NetworksOnly.
func (e *Engine) thresholds(ctx context.Context, rcpts []string, at time.Time) inEffect {
	fixed := inEffect{e.opt.Thresholds, e.opt.Thresholds}
	if e.site == nil {
		return fixed
	}
	c, now := e.site.observe(ctx, e.opt.StoreTimeout, rcpts, at)
	if c.Since.IsZero() || now.Sub(c.Since) < e.site.Window {
		return fixed
	}
	step := max(int((c.Active+int64(e.site.PerStep)-1)/int64(e.site.PerStep)), e.site.Floor)
	out := e.site.lowered(e.opt.Thresholds, step)
	if e.site.NetworksOnly {
		return inEffect{e.opt.Thresholds, out}
	}
	return inEffect{out, out}
}

// lowered returns the thresholds capped at step, made once a step: the
// maps are read only.
func (s *site) lowered(ceiling map[signature.Family]int, step int) map[signature.Family]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.step != step || s.capped == nil {
		s.capped = make(map[signature.Family]int, len(ceiling))
		for f, t := range ceiling {
			s.capped[f] = min(t, step)
		}
		s.step = step
	}
	return s.capped
}

// inEffect are the thresholds in effect for one message.
type inEffect struct {
	volumes  map[signature.Family]int // the families' volumes (recipients)
	networks map[signature.Family]int // the campaign's sending networks
}
