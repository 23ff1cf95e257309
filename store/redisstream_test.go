package store_test

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/lab/bench"
	"github.com/bulkmilter/bulkmilter/store"
)

var updateStream = flag.Bool("update-stream", false, "rewrite testdata/redis-stream.golden")

// TestRedisCommandStream: the bytes the store sends a single server for a
// fixed run of messages (campaign copies and new mail, one and two
// recipients, the default 49 keys) are those of the golden file, taken
// through a loopback proxy. A cut in allocations must not change a byte
// Redis reads. The golden was written by main after the merge of s-redis4
// and c-clus3, before a message's key names went into one string and the
// script's numbers were passed by pointer, and again when the pointer
// strings became kc:/ko: (a lane's checks before its pointers): the
// script's text sent once (+3,838 bytes, the whole difference in length)
// and the strings' names changed, no command; and when script.lua took a
// Cluster primary's call ('X', c-xslot): its text (+2,694 bytes) alone.
func TestRedisCommandStream(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		sent = sha256.New()
		n    int64
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", r.Addr())
			if err != nil {
				t.Error(err)
				c.Close()
				return
			}
			wg.Go(func() { io.Copy(c, up); c.Close() })
			wg.Go(func() {
				buf := make([]byte, 64<<10)
				for {
					k, err := c.Read(buf)
					mu.Lock()
					sent.Write(buf[:k])
					n += int64(k)
					mu.Unlock()
					if _, werr := up.Write(buf[:k]); err != nil || werr != nil {
						up.Close()
						return
					}
				}
			})
		}
	})
	at := time.Date(2026, 11, 27, 9, 30, 0, 0, time.UTC)
	ctx := context.Background()
	// One connection, one message at a time: the stream's order is fixed.
	s, err := store.NewRedis(ctx, store.RedisOptions{Addrs: []string{ln.Addr().String()}, PoolSize: 1,
		Timeout: time.Minute, Params: store.Params{Now: func() time.Time { return at }, Secret: []byte("stream test secret")}})
	if err != nil {
		t.Fatal(err)
	}
	w := bench.StoreWorkload{Keys: 49, Repeat: 0.3, Base: at.Add(-3 * time.Hour), Span: 3 * time.Hour, N: 400}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range w.N {
		o := w.Observation(i, rng)
		if i%5 == 0 {
			o.Recipients = append(o.Recipients, fmt.Sprintf("other%d@example.net", i%7))
		}
		if _, err := s.Observe(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	ln.Close()
	wg.Wait()
	got := fmt.Sprintf("%x %d\n", sent.Sum(nil), n)
	const golden = "testdata/redis-stream.golden"
	want := testenv.Golden(t, golden, []byte(got), *updateStream)
	if got != string(want) {
		t.Errorf("the store sent Redis other bytes: sha256 and length\n%s want\n%s", strings.TrimSpace(got), want)
	}
}
