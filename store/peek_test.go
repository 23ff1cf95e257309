package store_test

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/store"
)

// peekable is a store that can be peeked at.
type peekable interface {
	store.Store
	store.Peeker
}

// testPeek observes keys in every counting tier (first sighting, exact
// set, HyperLogLog), votes on one, then checks that Peek reports what
// Observe did, 0 for an unknown key, and that it changed nothing: snapshot
// (the store's state) is the same before and after, and an unknown key
// peeked at is still new to Observe.
func testPeek(t *testing.T, s peekable, snapshot func() any) {
	ctx := context.Background()
	rcpts := func(p string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d@example.test", p, i)
		}
		return out
	}
	want := map[string]int64{}
	for _, o := range []store.Observation{
		{Keys: []string{"v1:one"}, Recipients: rcpts("a", 1)},
		{Keys: []string{"v1:three"}, Recipients: rcpts("b", 3)},
		{Keys: []string{"v1:many"}, Recipients: rcpts("c", 40)},
		{Keys: []string{"v1:many"}, Recipients: rcpts("d", 5)},
	} {
		res, err := s.Observe(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		want[o.Keys[0]] = res.Volumes[0]
	}
	if err := s.RecordVote(ctx, store.Vote{Keys: []string{"v1:three"}, Voter: "b0@example.test", Kind: store.VoteNotBulk}); err != nil {
		t.Fatal(err)
	}
	before := snapshot()
	keys := []string{"v1:one", "v1:three", "v1:many", "v1:unknown", "v1:one"}
	res, err := s.Peek(ctx, keys, t0())
	if err != nil {
		t.Fatal(err)
	}
	wantVols := []int64{want["v1:one"], want["v1:three"], want["v1:many"], 0, want["v1:one"]}
	if !reflect.DeepEqual(res.Volumes, wantVols) || wantVols[2] < 40 {
		t.Errorf("peeked volumes %v, observed %v", res.Volumes, wantVols)
	}
	if res.Votes[1] != (store.Tally{NotBulk: 1}) || res.Votes[0] != (store.Tally{}) {
		t.Errorf("peeked tallies %v", res.Votes)
	}
	if res.UserVotes != nil || res.OwnVotes != nil {
		t.Errorf("peek returned recipients' votes: %v", res.UserVotes)
	}
	if after := snapshot(); !reflect.DeepEqual(before, after) {
		t.Errorf("peek changed the store:\nbefore %v\nafter  %v", before, after)
	}
	if res, err := s.Observe(ctx, store.Observation{Keys: []string{"v1:unknown"}, Recipients: rcpts("e", 1)}); err != nil || res.Volumes[0] != 1 {
		t.Errorf("observe after peek: %v, %v; want volume 1", res.Volumes, err)
	}
}

func TestPeekEmbedded(t *testing.T) {
	s, err := store.OpenEmbedded(store.EmbeddedOptions{Params: store.Params{ExactLimit: 8, Now: t0}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testPeek(t, s, func() any { return s.Stats() })
}

func TestPeekRedis(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	s, err := store.NewRedis(context.Background(), store.RedisOptions{Addrs: []string{r.Addr()}, Namespace: "peek:", Params: store.Params{ExactLimit: 8, Now: t0}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer c.Close()
	testPeek(t, s, func() any {
		ctx := context.Background()
		keys, err := c.Keys(ctx, "peek:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		dump := map[string]string{}
		for _, k := range keys {
			v, _ := c.Dump(ctx, k).Result()
			ttl, _ := c.PTTL(ctx, k).Result()
			// PFCOUNT may refresh the cached cardinality inside a
			// HyperLogLog: compare those by count.
			if typ, _ := c.Type(ctx, k).Result(); typ == "string" && len(v) > 4 && v[:4] == "HYLL" {
				n, _ := c.PFCount(ctx, k).Result()
				v = fmt.Sprint("hll:", n)
			}
			dump[k] = fmt.Sprintf("%q ttl>%d", v, ttl.Milliseconds()/60000)
		}
		return dump
	})
}

// t0 is the tests' clock: fixed, so that no bucket turns between an
// observation and the peek.
var start = time.Now()

func t0() time.Time { return start }

// On a cluster the keys of one signature share a slot; go-redis routes
// each read of the pipeline to its node.
func TestPeekRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster in -short mode")
	}
	c := testenv.StartRedisCluster(t, 3)
	s, err := store.NewRedis(context.Background(), store.RedisOptions{Addrs: c.Addrs(), Namespace: "peek:", Params: store.Params{ExactLimit: 8, Now: t0}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer cl.Close()
	testPeek(t, s, func() any {
		ctx := context.Background()
		var n atomic.Int64 // ForEachMaster runs on every master at once
		err := cl.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			k, err := m.DBSize(ctx).Result()
			n.Add(k)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n.Load() // the number of keys: peek creates none
	})
}
