package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/lab/bench"
	"github.com/bulkmilter/bulkmilter/store"
)

// TestRedisObserveAllocs holds the objects an observation allocates in
// the milter's process on a single server (the default signature set's
// 43 keys, one recipient): the call's ~130 key names and ~90 arguments
// were an allocation each (go-redis boxes every string into an
// interface); callScript passes them as pointers. The votes are matched to
// the keys without a map of the ids. The key names are one string a
// message (sigKeysOf), not one a signature; the script's numbers are
// passed by pointer.
func TestRedisObserveAllocs(t *testing.T) {
	const budget, budgetKB = 48, 28 // measured 42 and 22.0 KB (51 in a one-command pipeline, supFlags two allocations, the hidden buckets boxed, errors.As on no error); 59 with boxed numbers, 98 with a string a signature, 399 and 40.3 KB before callScript
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	ctx := context.Background()
	s, err := store.NewRedis(ctx, store.RedisOptions{Addrs: []string{r.Addr()},
		Timeout: 2 * time.Minute}) // allocations, not speed
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := bench.StoreWorkload{Keys: 43, Base: bench.PastBase()}
	rng := rand.New(rand.NewPCG(1, 2))
	const runs = 200
	obs := make([]store.Observation, runs+1)
	for i := range obs {
		obs[i] = w.Observation(i%50, rng) // a campaign's copies and new messages
	}
	var i int
	var failed error
	allocs := testing.AllocsPerRun(runs, func() {
		res, err := s.Observe(ctx, obs[i])
		i++
		switch {
		case err != nil:
			failed = err
		case len(res.Volumes) != 43:
			failed = fmt.Errorf("%d volumes for 43 keys", len(res.Volumes))
		}
	})
	if failed != nil {
		t.Fatal(failed)
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for _, o := range obs[:runs] {
		if _, err := s.Observe(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&m1)
	kb := float64(m1.TotalAlloc-m0.TotalAlloc) / runs / 1024
	t.Logf("%.1f objects, %.1f KB allocated an observation", allocs, kb)
	if allocs > budget {
		t.Errorf("an observation allocates %.1f objects, budget %d", allocs, budget)
	}
	if kb > budgetKB {
		t.Errorf("an observation allocates %.1f KB, budget %d", kb, budgetKB)
	}
}
