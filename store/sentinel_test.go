package store_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/store"
	"github.com/bulkmilter/bulkmilter/store/storetest"
)

const sentinelMaster = "bulk"

// sentinelStore opens a store through the sentinel; timeout 0 is the
// default budget.
func sentinelStore(t *testing.T, sentinel *testenv.Redis, space string, p store.Params, timeout time.Duration) *store.Redis {
	t.Helper()
	s, err := store.NewRedis(context.Background(), store.RedisOptions{
		Addrs:      []string{sentinel.Addr()},
		MasterName: sentinelMaster,
		Namespace:  space + ":",
		Params:     p,
		Timeout:    timeout,
	})
	if err != nil {
		t.Fatalf("open redis store through sentinel: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestRedisSentinel runs the conformance suite through a real Sentinel,
// then fails the master over to its replica during use: the store finds
// the new master by itself and the counts, replicated, carry on.
func TestRedisSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("sentinel failover in -short mode")
	}
	master := testenv.StartRedis(t, testenv.RedisOptions{})
	replica := testenv.StartRedisReplica(t, master)
	sentinel := testenv.StartRedisSentinel(t, sentinelMaster, master)
	ctx := context.Background()

	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, storetest.Harness{
			Open: func(t *testing.T, space string, p store.Params) store.Store {
				// The suite checks what is counted, not how fast, as
				// redisHarness: a busy machine must not turn a
				// 100,000-recipient call into a timeout.
				s := sentinelStore(t, sentinel, space, p, 2*time.Minute)
				if err := s.Ping(ctx); err != nil {
					t.Fatalf("ping through sentinel: %v", err)
				}
				return s
			},
			Shared: true,
		})
	})

	st := sentinelStore(t, sentinel, "failover", store.Params{}, 0)
	at := time.Now()
	observe := func(rcpt string) (int64, error) {
		res, err := st.Observe(ctx, store.Observation{Keys: []string{"campaign"}, Recipients: []string{rcpt}, Time: at})
		if err != nil {
			return 0, err
		}
		return res.Volumes[0], nil
	}
	for i := range 5 {
		if _, err := observe(fmt.Sprintf("r%d@example.test", i)); err != nil {
			t.Fatalf("observe before failover: %v", err)
		}
	}
	// The counts must be on the replica before it is promoted.
	if n, err := master.Do(ctx, "WAIT", 1, 5000); err != nil || n.(int64) != 1 {
		t.Fatalf("WAIT for the replica: %v %v", n, err)
	}
	// Sentinel promotes only a replica it has discovered (from the master's
	// INFO, every few seconds) and then heard from itself: sentinel.c's
	// sentinelSelectSlave passes over a replica whose link is still
	// disconnected or whose INFO it has not read yet (info_refresh 0), and
	// FAILOVER then answers NOGOODSLAVE (seen once, right after the
	// replica was first listed).
	waitFor(t, 30*time.Second, "sentinel to discover the replica and read its INFO", func() error {
		v, err := sentinel.Do(ctx, "SENTINEL", "REPLICAS", sentinelMaster)
		if err != nil {
			return err
		}
		l, _ := v.([]any)
		if len(l) != 1 {
			return fmt.Errorf("replicas: %v", v)
		}
		f := replyFields(l[0])
		refresh, err := strconv.ParseInt(f["info-refresh"], 10, 64)
		if f["flags"] != "slave" || f["master-link-status"] != "ok" || err != nil || refresh > 10000 {
			return fmt.Errorf("replica not yet selectable: flags %q, master-link-status %q, info-refresh %q ms",
				f["flags"], f["master-link-status"], f["info-refresh"])
		}
		return nil
	})
	if _, err := sentinel.Do(ctx, "SENTINEL", "FAILOVER", sentinelMaster); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	waitFor(t, 30*time.Second, "sentinel to name the replica master", func() error {
		addr, err := testenv.SentinelMaster(ctx, sentinel, sentinelMaster)
		if err != nil {
			return err
		}
		if addr != replica.Addr() {
			return fmt.Errorf("master is %s, replica is %s", addr, replica.Addr())
		}
		return nil
	})
	// Writes may fail while the old master steps down; the store must come
	// back on the new one by itself, with the count carried over.
	var vol int64
	waitFor(t, 30*time.Second, "an observation on the new master", func() error {
		var err error
		vol, err = observe("r5@example.test")
		return err
	})
	if vol != 6 {
		t.Errorf("volume after failover = %d, want 6 (5 before, 1 after)", vol)
	}
	role, err := replica.Do(ctx, "ROLE")
	if err != nil || fmt.Sprint(role.([]any)[0]) != "master" {
		t.Fatalf("the replica's role after failover: %v %v", role, err)
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, try func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := try()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replyFields reads one entry of SENTINEL REPLICAS, a map in RESP3 and a
// flat list of names and values in RESP2, as strings.
func replyFields(v any) map[string]string {
	f := make(map[string]string)
	switch e := v.(type) {
	case map[any]any:
		for k, x := range e {
			f[fmt.Sprint(k)] = fmt.Sprint(x)
		}
	case []any:
		for i := 0; i+1 < len(e); i += 2 {
			f[fmt.Sprint(e[i])] = fmt.Sprint(e[i+1])
		}
	}
	return f
}
