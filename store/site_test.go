package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/store"
)

type siteCounter interface {
	CountSite(ctx context.Context, rcpts []string, at time.Time) (store.SiteCount, error)
}

func rcpts(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d@Example.org", prefix, i)
	}
	return out
}

// testSite checks a site count: distinct recipients of the current and the
// previous window-long period, case-insensitive, and when it began.
func testSite(t *testing.T, s siteCounter) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 26, 0, 30, 0, 0, time.UTC) // periods of a day start at midnight UTC
	near := func(step string, got store.SiteCount, want int64) {
		t.Helper()
		if d := got.Active - want; d < -want/50-1 || d > want/50+1 {
			t.Errorf("%s: %d active, want %d (HyperLogLog: within 2 %%)", step, got.Active, want)
		}
		if !got.Since.Equal(t0) {
			t.Errorf("%s: since %v, want %v", step, got.Since, t0)
		}
	}
	if c, err := s.CountSite(ctx, nil, t0); err != nil || c.Active != 0 || !c.Since.IsZero() {
		t.Fatalf("empty: %+v %v", c, err)
	}
	c, err := s.CountSite(ctx, rcpts("a", 300), t0)
	if err != nil {
		t.Fatal(err)
	}
	near("300 recipients", c, 300)
	up := rcpts("a", 300)
	for i := range up {
		up[i] = strings.ToUpper(up[i])
	}
	c, _ = s.CountSite(ctx, up, t0.Add(time.Hour))
	near("the same again, upper case", c, 300)
	c, _ = s.CountSite(ctx, rcpts("b", 100), t0.Add(24*time.Hour))
	near("the next day: both days", c, 400)
	c, _ = s.CountSite(ctx, rcpts("c", 10), t0.Add(48*time.Hour))
	near("two days later: the first day is out", c, 110)
	c, _ = s.CountSite(ctx, nil, t0.Add(48*time.Hour))
	near("reading only", c, 110)
}

func TestSiteEmbedded(t *testing.T) {
	s, err := store.NewSite(store.Params{Window: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	testSite(t, s)
	// A replay going back in time (a forged Date) counts into the newest
	// period: the site's size is its size now.
	c, _ := s.CountSite(context.Background(), rcpts("z", 5), time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	if c.Active < 113 || c.Active > 117 {
		t.Errorf("a message years back: %d active, want 115", c.Active)
	}
}

func TestSiteRedis(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	s, err := store.NewRedis(context.Background(), store.RedisOptions{Addrs: []string{r.Addr()}, Params: store.Params{Window: 24 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	testSite(t, s)
	// Pseudonyms only, under one hash tag, every key expiring.
	for _, k := range strings.Split(cli(t, r, "KEYS", "*{site}*"), "\n") {
		if k == "" {
			t.Fatal("no site keys")
		}
		if ttl := cli(t, r, "PTTL", k); strings.HasPrefix(ttl, "-") {
			t.Errorf("%s: no expiry (%s)", k, ttl)
		}
		if v := cli(t, r, "DUMP", k); strings.Contains(strings.ToLower(v), "example.org") {
			t.Errorf("%s holds an address", k)
		}
	}
}

func TestSiteRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster in -short mode")
	}
	c := testenv.StartRedisCluster(t, 3)
	s, err := store.NewRedis(context.Background(), store.RedisOptions{Addrs: c.Addrs(), Params: store.Params{Window: 24 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	testSite(t, s)
}
