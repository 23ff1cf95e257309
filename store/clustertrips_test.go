package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/store"
	"github.com/bulkmilter/bulkmilter/store/storetest"
)

// TestRedisClusterRoundTrips counts the round trips of every message on a
// real 3-primary Cluster (issue 15: at most two, reading the pointers, then
// writing): a written message takes exactly two, a read one, or two when
// it joins a campaign (the campaign's count). The stream holds TestStoresAgree's
// campaigns (twenty senders, a footer key) and one sender's feed items
// joined by their frame's key alone, the case of "One sender's template"
// (model.go), which once took a third call to read the campaign's senders,
// and a news salad's copies, each from a new sender, joined by spread
// lines (model.go), which once asked the campaign's senders in a third
// call; and the same lines from one sender, which join nothing.
func TestRedisClusterRoundTrips(t *testing.T) {
	cl := testenv.StartRedisCluster(t, 3)
	s, err := store.NewRedis(context.Background(), store.RedisOptions{Addrs: cl.Addrs(), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	// Every primary loads the script before counting (a first call's
	// NOSCRIPT is one trip more): 100 keys reach all three.
	warm := store.Observation{Time: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Recipients: []string{"w@x"}}
	for i := range 100 {
		warm.Keys = append(warm.Keys, fmt.Sprintf("w1:imatch.%d:%016x", i, i))
	}
	if _, err := s.Observe(ctx, warm); err != nil {
		t.Fatal(err)
	}
	hook := &countingHook{}
	s.Client().AddHook(hook)

	obs := campaignStream(3, 300)
	at := obs[len(obs)-1].Time
	for j := range 12 { // TestConformance's feed items: the frame, then each item's own keys
		keys := []string{fmt.Sprintf("f1:shingle.0:%016x", 0xf0), fmt.Sprintf("f1:shingle.1:%016x", j<<8|1)}
		for i := range 3 {
			keys = append(keys, fmt.Sprintf("f1:imatch.%d:%016x", i, j<<8|0x10+i))
		}
		rs := []string{fmt.Sprintf("r%d@x", j)}
		if j == 6 {
			rs = nil // a read
		}
		obs = append(obs, store.Observation{Keys: keys, Recipients: rs, Time: at.Add(time.Duration(j) * time.Minute), Sender: "rss@feeds.example"})
	}
	// the salad (conformance's CampaignSpreadLines): 16 line keys, the
	// offer's LinesAlone of them shared, from a new sender each copy, then
	// from one sender
	at = at.Add(time.Hour)
	const copies = 12
	salad := len(obs)
	for _, one := range []bool{false, true} {
		for j := range copies {
			keys := append(storetest.SaladLines(j), fmt.Sprintf("v1:imatch.0:%016x", j<<8|0xff))
			if one { // another signature set's keys: nothing in common
				for i := range keys {
					keys[i] = strings.Replace(keys[i], "v1:", "v2:", 1)
				}
			}
			snd := fmt.Sprintf("d%d.example", j)
			if one {
				snd = "news.example"
			}
			obs = append(obs, store.Observation{Keys: keys, Recipients: []string{fmt.Sprintf("s%d@x", j)}, Time: at.Add(time.Duration(j) * time.Minute), Sender: snd})
		}
	}
	if !store.CrossSlotForTest(s) {
		t.Fatal("redis-server 7 Cluster: the store calls one a slot, not one a primary")
	}
	var oneKey, reads int
	var vols []int64
	var calls, sigs int64
	for i, o := range obs {
		before, cbefore := hook.trips.Load(), hook.cmds.Load()
		res, err := s.Observe(ctx, o)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		trips := hook.trips.Load() - before
		// One call a primary and round trip, besides the free ref's
		// ('q'), the campaign's count and its union's (one call a slot
		// each, their keys' slots one campaign's).
		n := hook.cmds.Load() - cbefore
		if limit := int64(2*3 + 2 + store.UnionMax); n > limit {
			t.Errorf("message %d (%d keys): %d script calls, want at most %d", i, len(o.Keys), n, limit)
		}
		calls += n
		sigs += int64(len(o.Keys))
		if i >= salad {
			vols = append(vols, res.Campaign.Recipients)
		}
		want := int64(2)
		if len(o.Recipients) == 0 {
			reads++
			if len(res.Campaign.Joined) == 0 {
				want = 1
			}
		}
		if trips != want {
			t.Errorf("message %d (%d recipients, %d joined keys): %d round trips, want %d", i, len(o.Recipients), len(res.Campaign.Joined), trips, want)
		}
		if len(res.Campaign.Joined) == 1 && o.Sender != "" {
			oneKey++
		}
	}
	// The stream must hold the case it is for: joins one key carries, from
	// a known sender.
	if oneKey < 5 || reads == 0 {
		t.Errorf("%d joins by one key from a known sender and %d reads: the stream misses its cases", oneKey, reads)
	}
	// the salad's copies add up, the one sender's lines do not
	if got := []int64{vols[copies-1], slices.Max(vols[copies:])}; got[0] != copies || got[1] != 1 {
		t.Errorf("the salad's last copy counts %d (want %d), one sender's largest %d (want 1)", got[0], copies, got[1])
	}
	t.Logf("%d messages, %d joined by one key from a known sender, %d reads; %.2f script calls a message (%.1f keys)",
		len(obs), oneKey, reads, float64(calls)/float64(len(obs)), float64(sigs)/float64(len(obs)))
}
