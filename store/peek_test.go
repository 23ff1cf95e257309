package store_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
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

// testPeek counts a campaign in every counting tier (one recipient, an
// exact set, a HyperLogLog) and votes on one key, then checks that Peek
// reports the campaign and volumes Observe did, nothing for unknown keys,
// and that it changed nothing: snapshot (the store's state) is the same
// before and after, and an unknown message peeked at is still new to
// Observe.
func testPeek(t *testing.T, s peekable, snapshot func() any) {
	ctx := context.Background()
	rcpts := func(p string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d@example.test", p, i)
		}
		return out
	}
	for _, tt := range []struct {
		name string
		keys []string
		n    []int // recipients of each copy
	}{
		{"first sighting", []string{"v1:one.a", "v1:one.b"}, []int{1}},
		{"exact set", []string{"v1:three.a", "v1:three.b"}, []int{3}},
		{"hyperloglog", []string{"v1:many.a", "v1:many.b"}, []int{40, 5}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var last store.Result
			for i, n := range tt.n {
				var err error
				if last, err = s.Observe(ctx, store.Observation{Keys: tt.keys, Recipients: rcpts(fmt.Sprint(tt.name, i), n), Time: t0()}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.RecordVote(ctx, store.Vote{Keys: tt.keys[:1], Voter: tt.name + "0@example.test", Kind: store.VoteNotBulk, Time: t0()}); err != nil {
				t.Fatal(err)
			}
			before := snapshot()
			keys := append(slices.Clone(tt.keys), "v1:unknown.a", tt.keys[0])
			res, err := s.Peek(ctx, keys, t0())
			if err != nil {
				t.Fatal(err)
			}
			vol := last.Campaign.Recipients
			if res.Campaign.ID != last.Campaign.ID || res.Campaign.Recipients != vol || vol < int64(tt.n[0]) {
				t.Errorf("peeked campaign %+v, observed %+v", res.Campaign, last.Campaign)
			}
			if want := []int64{vol, vol, 0, vol}; !reflect.DeepEqual(res.Volumes, want) {
				t.Errorf("peeked volumes %v, want %v", res.Volumes, want)
			}
			if res.Votes[0] != (store.Tally{NotBulk: 1}) || res.Votes[1] != (store.Tally{}) {
				t.Errorf("peeked tallies %v", res.Votes)
			}
			if res.UserVotes != nil || res.OwnVotes != nil {
				t.Errorf("peek returned recipients' votes: %v", res.UserVotes)
			}
			if after := snapshot(); !reflect.DeepEqual(before, after) {
				t.Errorf("peek changed the store:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
	unknown := []string{"v1:new.a", "v1:new.b"}
	if res, err := s.Peek(ctx, unknown, t0()); err != nil || res.Campaign.Recipients != 0 || res.Volumes[0] != 0 {
		t.Errorf("peek of an unknown message: %+v, %v", res, err)
	}
	if res, err := s.Observe(ctx, store.Observation{Keys: unknown, Recipients: rcpts("e", 1), Time: t0()}); err != nil || res.Volumes[0] != 1 || res.Campaign.Recipients != 1 {
		t.Errorf("observe after peek: %v %+v, %v; want volume 1", res.Volumes, res.Campaign, err)
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
			// The absolute expiry (Redis 7): a relative TTL moves on by
			// itself between the two snapshots.
			exp, _ := c.Do(ctx, "PEXPIRETIME", k).Int64()
			// PFCOUNT may refresh the cached cardinality inside a
			// HyperLogLog: compare those by count.
			if typ, _ := c.Type(ctx, k).Result(); typ == "string" && len(v) > 4 && v[:4] == "HYLL" {
				n, _ := c.PFCount(ctx, k).Result()
				v = fmt.Sprint("hll:", n)
			}
			dump[k] = fmt.Sprintf("%q expires %d", v, exp)
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
