package store_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/store"
	"github.com/bulkmilter/bulkmilter/store/storetest"
)

func TestConformanceEmbedded(t *testing.T) {
	var mu sync.Mutex
	dirs := map[string]string{}
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T, space string, p store.Params) store.Store {
			mu.Lock()
			dir, ok := dirs[space]
			if !ok {
				dir = t.TempDir()
				dirs[space] = dir
			}
			mu.Unlock()
			s, err := store.OpenEmbedded(store.EmbeddedOptions{Path: filepath.Join(dir, "state"), Params: p})
			if err != nil {
				t.Fatalf("open embedded store: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	})
}

func redisHarness(addrs []string, restart func(t *testing.T)) storetest.Harness {
	return storetest.Harness{
		Open: func(t *testing.T, space string, p store.Params) store.Store {
			s, err := store.NewRedis(context.Background(), store.RedisOptions{
				Addrs:     addrs,
				Namespace: space + ":",
				Params:    p,
				// The suite checks what is counted, not how fast: a
				// busy machine must not turn a 100,000-recipient call
				// into a timeout (the default budget is 1 s).
				Timeout: 2 * time.Minute,
			})
			if err != nil {
				t.Fatalf("open redis store: %v", err)
			}
			if err := s.Ping(context.Background()); err != nil {
				t.Fatalf("ping redis store: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		Shared:  true,
		Restart: restart,
	}
}

func TestConformanceRedis(t *testing.T) {
	// Persistence on: the suite restarts the server and expects votes and
	// counts back.
	r := testenv.StartRedis(t, testenv.RedisOptions{Config: []string{"appendonly yes"}})
	storetest.Run(t, redisHarness([]string{r.Addr()}, func(t *testing.T) { r.Restart() }))
}

func TestConformanceRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster conformance in -short mode")
	}
	c := testenv.StartRedisCluster(t, 3)
	h := redisHarness(c.Addrs(), nil)
	h.NoMerge = true
	storetest.Run(t, h)
}
