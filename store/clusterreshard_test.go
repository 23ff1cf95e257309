package store_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/store"
)

// fallbackCounter is a store Observer that counts a Cluster primary's
// calls sent again one call a slot (store.ClusterObserver).
type fallbackCounter struct{ n atomic.Int64 }

func (f *fallbackCounter) ObserveRequest(string, time.Duration, error) {}
func (f *fallbackCounter) ObserveClusterFallback(string)               { f.n.Add(1) }

// TestRedisClusterReshard moves slots from one primary to another while a
// stream of campaigns is counted (CLUSTER SETSLOT IMPORTING / MIGRATING,
// MIGRATE of every key, SETSLOT NODE, one batch of 400 slots at a time
// between two messages): go-redis's map of the slots is then stale, so a
// primary's call (one call a primary: script.lua's 'X') reaches keys its
// node no longer serves, which the node refuses; the store sends that
// call again one call a slot, which go-redis redirects (MOVED). Every
// result must be the one an embedded store without the stored merge gives
// (as TestStoresAgree), and the fallback must have been taken.
func TestRedisClusterReshard(t *testing.T) {
	cl := testenv.StartRedisCluster(t, 3)
	ctx := context.Background()
	fb := &fallbackCounter{}
	s, err := store.NewRedis(ctx, store.RedisOptions{Addrs: cl.Addrs(), Timeout: 2 * time.Minute, Observer: fb})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if !store.CrossSlotForTest(s) {
		t.Fatal("redis-server 7 Cluster: the store calls one a slot, not one a primary")
	}
	ref, err := store.OpenEmbedded(store.EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	store.NoMergeForTest(ref)

	// The nodes, their ids, and which owns slot 0 (the source).
	type node struct {
		c        *redis.Client
		id, addr string
	}
	var nodes []node
	for _, a := range cl.Addrs() {
		c := redis.NewClient(&redis.Options{Addr: a})
		defer c.Close()
		id, err := c.Do(ctx, "cluster", "myid").Text()
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, node{c, id, a})
	}
	var src, dst node
	for _, n := range nodes {
		// CLUSTER NODES: the line of "myself" ends with its slot ranges
		all, err := n.c.ClusterNodes(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(all, "\n") {
			if f := strings.Fields(l); strings.Contains(l, "myself") && slices.ContainsFunc(f[8:], func(r string) bool { return strings.HasPrefix(r, "0-") }) {
				src = n
			}
		}
	}
	for _, n := range nodes {
		if n.id != src.id && src.id != "" {
			dst = n
			break
		}
	}
	if src.id == "" || dst.id == "" {
		t.Fatal("no node owns slot 0")
	}
	move := func(from, to int) (keys int) {
		for slot := from; slot < to; slot++ {
			must := func(c *redis.Client, args ...any) {
				if err := c.Do(ctx, args...).Err(); err != nil {
					t.Fatalf("slot %d: %v: %v", slot, args, err)
				}
			}
			must(dst.c, "cluster", "setslot", slot, "importing", src.id)
			must(src.c, "cluster", "setslot", slot, "migrating", dst.id)
			for {
				ks, err := src.c.ClusterGetKeysInSlot(ctx, slot, 100).Result()
				if err != nil {
					t.Fatal(err)
				}
				if len(ks) == 0 {
					break
				}
				host, port, _ := strings.Cut(dst.addr, ":")
				args := []any{"migrate", host, port, "", 0, 5000, "keys"}
				for _, k := range ks {
					args = append(args, k)
				}
				must(src.c, args...)
				keys += len(ks)
			}
			for _, n := range []node{dst, src} {
				must(n.c, "cluster", "setslot", slot, "node", dst.id)
			}
		}
		return keys
	}

	stream := campaignStream(5, 300)
	moved, batch := 0, 0
	for i, o := range stream {
		// a batch of 400 slots every 60 messages, the first after 20
		if i%60 == 20 {
			moved += move(400*batch, 400*(batch+1))
			batch++
		}
		want, err := ref.Observe(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Observe(ctx, o)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !reflect.DeepEqual(got.Volumes, want.Volumes) || !reflect.DeepEqual(got.Campaign, want.Campaign) {
			t.Fatalf("message %d (%d keys, %d recipients):\n got %v %+v\nwant %v %+v",
				i, len(o.Keys), len(o.Recipients), got.Volumes, got.Campaign, want.Volumes, want.Campaign)
		}
	}
	if moved == 0 || fb.n.Load() == 0 {
		t.Errorf("%d keys moved in %d batches, %d calls sent again one call a slot: the stream misses its case", moved, batch, fb.n.Load())
	}
	t.Logf("%d keys moved in %d batches of 400 slots; %d primary calls sent again one call a slot", moved, batch, fb.n.Load())
}
