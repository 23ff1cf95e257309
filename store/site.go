package store

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The site's size (issue 16): how many distinct recipients the site
// receives mail for, counted apart from the signatures' volumes, so that
// the threshold can follow it (detect's adaptive threshold). One
// HyperLogLog per window-long period of the recipients' pseudonyms; the
// count is the union of the current period and the one before it, so it
// spans between one and two windows. Since is when the count began: a
// count younger than a window does not yet know the site.
//
// Redis keys (prefix as the store's, one hash tag so that PFCOUNT can
// read two keys on a cluster):
//
//	<prefix>{site}:<period>   HyperLogLog of recipient pseudonyms, expires after two windows
//	<prefix>{site}:since      unix ms of the first count, expires after two windows without mail

// SiteCount is the site's distinct recipients in the window.
type SiteCount struct {
	// Active is the number of distinct recipients of the current and the
	// previous period (one window each).
	Active int64
	// Since is when counting began; the zero Time when nothing was counted.
	Since time.Time
}

// Site counts the site's distinct recipients in memory, for a single host
// (the embedded store's counterpart of Redis.CountSite). Nothing is
// persisted: after a restart the count starts again, and Since says so.
type Site struct {
	c       counting
	mu      sync.Mutex
	periods map[int64]*hll // the two newest periods
	newest  int64
	since   time.Time
}

// NewSite returns an empty site count with the store's window and secret.
func NewSite(p Params) (*Site, error) {
	c, err := p.resolve()
	if err != nil {
		return nil, fmt.Errorf("site count: %w", err)
	}
	return &Site{c: c, periods: map[int64]*hll{}}, nil
}

// period is the index of the window-long period t falls in.
func (c *counting) period(t time.Time) int64 {
	l := c.Window.Milliseconds()
	n := t.UnixMilli()
	p := n / l
	if n < 0 && n%l != 0 {
		p--
	}
	return p
}

// CountSite adds the recipients seen at at (zero: now) and returns the
// site's count.
func (s *Site) CountSite(_ context.Context, rcpts []string, at time.Time) (SiteCount, error) {
	if at.IsZero() {
		at = s.c.Now()
	}
	p := s.c.period(at)
	s.mu.Lock()
	defer s.mu.Unlock()
	// The site's size is its size now: a replay that goes back in time (a
	// message's forged Date) counts into the newest period.
	p = max(p, s.newest)
	s.newest = p
	h := s.periods[p]
	if h == nil && len(rcpts) > 0 {
		h = new(hll)
		s.periods[p] = h
		for q := range s.periods {
			if q < p-1 {
				delete(s.periods, q)
			}
		}
	}
	for _, r := range rcpts {
		if normalise(r) != "" {
			h.add(s.c.pseudonym(r))
		}
	}
	if len(rcpts) > 0 && (s.since.IsZero() || at.Before(s.since)) {
		s.since = at
	}
	var u hll
	for _, q := range []int64{p - 1, p} {
		if o := s.periods[q]; o != nil {
			u.merge(o)
		}
	}
	return SiteCount{Active: u.count(), Since: s.since}, nil
}

func (r *Redis) siteKey(suffix string) string { return r.prefix + "{site}:" + suffix }

// CountSite adds the recipients seen at at (zero: now) and returns the
// site's count, in one round trip.
func (r *Redis) CountSite(ctx context.Context, rcpts []string, at time.Time) (sc SiteCount, err error) {
	start := time.Now()
	defer func() { r.observe("site", start, err) }()
	if at.IsZero() {
		at = r.c.Now()
	}
	p := r.c.period(at)
	cur, prev, since := r.siteKey(strconv.FormatInt(p, 10)), r.siteKey(strconv.FormatInt(p-1, 10)), r.siteKey("since")
	life := 2 * r.c.Window
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var count *redis.IntCmd
	var first *redis.StringCmd
	_, err = r.client.Pipelined(ctx, func(pl redis.Pipeliner) error {
		if len(rcpts) > 0 {
			ids := make([]any, 0, len(rcpts))
			for _, rc := range rcpts {
				if normalise(rc) != "" {
					ids = append(ids, r.c.pseudonym(rc).bytes())
				}
			}
			if len(ids) > 0 {
				pl.PFAdd(ctx, cur, ids...)
				pl.PExpire(ctx, cur, life)
				pl.SetNX(ctx, since, strconv.FormatInt(at.UnixMilli(), 10), 0)
				pl.PExpire(ctx, since, life)
			}
		}
		count = pl.PFCount(ctx, cur, prev)
		first = pl.Get(ctx, since)
		return nil
	})
	if err != nil && err != redis.Nil {
		return SiteCount{}, fmt.Errorf("count site: %w", classify(err))
	}
	sc.Active = count.Val()
	if ms, perr := strconv.ParseInt(first.Val(), 10, 64); perr == nil {
		sc.Since = time.UnixMilli(ms)
	}
	return sc, nil
}
