package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/store"
)

// campaignStream makes n observations of edited campaigns, the case the
// campaign model is for: each copy keeps a random part of its campaign's
// keys in each family and adds keys of its own, goes to recipients drawn
// from a small pool (so some come back), from a few networks and senders,
// within one window. Some messages are unrelated mail, some share a
// "footer" key with everything, some only containment keys or only line
// keys (padded copies), or a few of each and of the term set (scattered
// words).
func campaignStream(seed uint64, n int) []store.Observation {
	rng := rand.New(rand.NewPCG(seed, 42))
	fams := []struct {
		name string
		keys int
	}{{"imatch", 6}, {"shingle", 4}, {"charshingle", 4}, {"sift", 3}, {"terms", 5}, {"contain", 16}, {"lines", 8}}
	t0 := time.Date(2026, 11, 2, 1, 0, 0, 0, time.UTC)
	var out []store.Observation
	for i := range n {
		camp := rng.IntN(12)
		if rng.IntN(5) == 0 {
			camp = 1000 + i // unrelated
		}
		// A padded copy shares only containment keys or only line keys,
		// fewer of them: whether they name the campaign alone
		// (ContainAlone, LinesAlone) decides. A copy with words scattered
		// through it shares a few of each and of the term set: whether
		// they add up (supportAdds) decides.
		padded, by := rng.IntN(4) == 0, []string{"contain", "lines", "scattered"}[rng.IntN(3)]
		var keys []string
		for _, f := range fams {
			keep := 55
			if padded {
				keep = 0
				switch {
				case f.name == by && by == "lines":
					keep = 50 // about half: LinesShare decides too
				case f.name == by:
					keep = 35
				case by == "scattered" && f.name == "contain":
					keep = 25
				case by == "scattered" && f.name == "lines":
					keep = 50 // of 4 lines: 2 do not name a campaign alone
				case by == "scattered" && f.name == "terms":
					keep = 30
				}
			}
			nk := f.keys
			if padded && by == "scattered" && f.name == "lines" {
				nk = 4
			}
			for k := range nk {
				if rng.IntN(100) < keep {
					keys = append(keys, fmt.Sprintf("s1:%s.%d:%016x", f.name, k, camp*100+k))
				} else {
					keys = append(keys, fmt.Sprintf("s1:%s.%d:%016x", f.name, k, rng.Uint64()))
				}
			}
		}
		if rng.IntN(3) == 0 {
			keys = append(keys, "s1:sift.9:00000000000000f0") // the footer
		}
		if rng.IntN(10) == 0 {
			keys = append(keys, keys[0]) // a duplicate
		}
		var rs []string
		for range 1 + rng.IntN(3) {
			rs = append(rs, fmt.Sprintf("u%d@x", rng.IntN(60)))
		}
		if rng.IntN(25) == 0 {
			rs = nil // a read
		}
		out = append(out, store.Observation{
			Keys: keys, Recipients: rs,
			Time:    t0.Add(time.Duration(i) * 20 * time.Hour / time.Duration(n)),
			Network: fmt.Sprintf("192.0.%d.0/24", rng.IntN(4)),
			Sender:  fmt.Sprintf("s%d@x", rng.IntN(20)),
		})
	}
	return out
}

// TestStoresAgree runs the same streams through the embedded store, one
// Redis server (the decision in the Lua script) and a Redis Cluster (the
// decision in Go between two round trips): every result must be the same,
// campaign ids included. A Redis Cluster runs the model without the stored
// merge (model.go; docs/operations.md): it is compared with an embedded
// store without it, run beside.
func TestStoresAgree(t *testing.T) {
	single := testenv.StartRedis(t, testenv.RedisOptions{})
	var cluster *testenv.RedisCluster
	if !testing.Short() {
		cluster = testenv.StartRedisCluster(t, 3)
	}
	ctx := context.Background()
	differs := 0 // results the stored merge changed
	defer func() {
		// ... and the stored merge, so that the single server is
		// compared with it at work (seed 3 merges).
		if differs == 0 && !t.Failed() {
			t.Errorf("the stored merge changed no result")
		}
	}()
	for seed := range uint64(4) {
		stream := campaignStream(seed, 300)
		if seed == 3 {
			// Clocks that disagree: every seventh message dated 9 hours
			// back, so earlier buckets are written after later ones.
			for i := 0; i < len(stream); i += 7 {
				stream[i].Time = stream[i].Time.Add(-9 * time.Hour)
			}
		}
		emb, err := store.OpenEmbedded(store.EmbeddedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer emb.Close()
		plain, err := store.OpenEmbedded(store.EmbeddedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		store.NoMergeForTest(plain)
		stores := map[string]store.Store{"embedded": emb}
		addrs := map[string][]string{"redis": {single.Addr()}}
		if cluster != nil {
			addrs["cluster"] = cluster.Addrs()
		}
		for name, a := range addrs {
			r, err := store.NewRedis(ctx, store.RedisOptions{Addrs: a, Namespace: fmt.Sprint("agree", seed, ":"),
				Timeout: 2 * time.Minute}) // results are compared, not timed
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			stores[name] = r
		}
		joined, differ := 0, 0
		for i, o := range stream {
			merged, err := emb.Observe(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			unmerged, err := plain.Observe(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(merged.Campaign.Joined) > 0 {
				joined++
			}
			if !reflect.DeepEqual(merged, unmerged) {
				differ++
			}
			for name, st := range stores {
				if name == "embedded" {
					continue
				}
				want := merged
				if name == "cluster" {
					want = unmerged
				}
				got, err := st.Observe(ctx, o)
				if err != nil {
					t.Fatalf("seed %d, message %d, %s: %v", seed, i, name, err)
				}
				if !reflect.DeepEqual(got.Volumes, want.Volumes) || !reflect.DeepEqual(got.Campaign, want.Campaign) {
					t.Fatalf("seed %d, message %d (%d keys, %d recipients), %s:\n got %v %+v\nwant %v %+v",
						seed, i, len(o.Keys), len(o.Recipients), name, got.Volumes, got.Campaign, want.Volumes, want.Campaign)
				}
			}
		}
		// The stream must exercise joins, not only new campaigns.
		if joined < len(stream)/3 {
			t.Errorf("seed %d: %d of %d messages joined a campaign", seed, joined, len(stream))
		}
		differs += differ
	}
}
