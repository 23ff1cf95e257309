package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkmilter/bulkmilter/lab/redisinfo"
	"github.com/bulkmilter/bulkmilter/store"
)

// StoreWorkload makes the observations of a store benchmark: keys per
// message named like the default families', one recipient each from a
// population of 200,000, timestamps spread evenly over Span from Base,
// and a fraction Repeat of messages belonging to 100 campaigns whose keys
// repeat (0: every message distinct, the worst case for memory).
type StoreWorkload struct {
	Keys   int
	Repeat float64
	Base   time.Time
	Span   time.Duration
	N      int // messages the span is spread over; 0: all at Base
	From   int // message i has id From+i: a warm-up from another From is not replayed
}

// families names keys like the default signature set's: mostly I-Match
// (plain and hardened over 11 lexicons), then shingles, character shingles
// and sifting.
var families = func() []string {
	var f []string
	for i := range 22 {
		f = append(f, fmt.Sprintf("imatch.%d", i))
	}
	for i := range 5 {
		f = append(f, fmt.Sprintf("shingle.%d", i), fmt.Sprintf("charshingle.%d", i), fmt.Sprintf("sift.%d", i))
	}
	return f
}()

// SupportKeys returns how many of a message's k keys are of the support
// families (store.SupportAlone), as in the default signature set of that
// size: the term set's 10 bands from 37 keys (set 3), the containment
// family's 16 min-hashes too from 43 (set 4), and 6 line keys from 49
// (algorithm 9 makes about 49.7 keys a message on the bench's mail).
func SupportKeys(k int) (terms, contain, lines int) {
	if k >= 37 {
		terms = 10
	}
	if k >= 43 {
		contain = 16
	}
	if k >= 49 {
		lines = 6
	}
	return terms, contain, lines
}

// Observation returns message i.
func (w StoreWorkload) Observation(i int, rng *rand.Rand) store.Observation {
	id := uint64(w.From + i)
	if w.Repeat > 0 && rng.Float64() < w.Repeat {
		id = 1<<40 + uint64(rng.IntN(100))
	}
	keys := make([]string, w.Keys)
	terms, contain, lines := SupportKeys(w.Keys)
	others := w.Keys - terms - contain - lines
	for j := range keys {
		fam := families[j%len(families)]
		switch {
		case j >= others+terms+contain:
			fam = fmt.Sprintf("lines.%d", j-others-terms-contain)
		case j >= others+terms:
			fam = fmt.Sprintf("contain.%d", j-others-terms)
		case j >= others:
			fam = fmt.Sprintf("terms.%d", j-others)
		}
		keys[j] = fmt.Sprintf("v1:%s:%016x", fam, id*0x9e3779b97f4a7c15^uint64(j))
	}
	at := w.Base
	if w.N > 0 {
		at = w.Base.Add(time.Duration(int64(w.Span) / int64(w.N) * int64(i)))
	}
	return store.Observation{Keys: keys, Recipients: []string{fmt.Sprintf("user%d@example.org", rng.IntN(200000))}, Time: at}
}

// Observer is the part of a store the workload uses.
type Observer interface {
	Observe(ctx context.Context, o store.Observation) (store.Result, error)
}

// LoadStore observes messages [0, n) of w with c concurrent writers. A
// call that fails with ErrUnavailable (a stall) is retried up to twice:
// writes are idempotent. It returns the number of retries.
func LoadStore(ctx context.Context, s Observer, w StoreWorkload, n, c int) (int64, error) {
	var next, retries atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for g := range c {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for {
				i := int(next.Add(1)) - 1
				if i >= n || failed.Load() != nil {
					return
				}
				m := w.Observation(i, rng)
				var err error
				for range 3 {
					if _, err = s.Observe(ctx, m); !errors.Is(err, store.ErrUnavailable) {
						break
					}
					retries.Add(1)
				}
				if err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return retries.Load(), err
	}
	return retries.Load(), nil
}

// MemoryResult is the memory a store took for a load.
type MemoryResult struct {
	Store    string  `json:"store"`
	Messages int     `json:"messages"`
	Keys     int     `json:"keys_per_msg"`
	Span     float64 `json:"span_hours"`
	// BytesPerMsg is Redis's used_memory growth, or the Go heap growth
	// after GC for the embedded store, per message.
	BytesPerMsg float64 `json:"bytes_per_msg"`
	// PerMillionMB is BytesPerMsg for a million messages, in MB.
	PerMillionMB float64 `json:"mb_per_million_msgs"`
	// FileBytesPerMsg is the embedded store's state file per message.
	FileBytesPerMsg float64 `json:"file_bytes_per_msg,omitempty"`
}

// PastBase is a workload's Base: the start of a 6-hour bucket a day ago,
// so that no message of a span of up to a day is dated ahead of the
// store's clock (a store counts those at its present: store/ahead.go).
func PastBase() time.Time { return time.Now().Add(-24 * time.Hour).Truncate(6 * time.Hour) }

// DensityWorkload spreads n messages at the density of a million a day
// (the whole default window at a million is n = 1,000,000): at fewer
// messages each time bucket holds as many as at a million a day as long
// as n fills a bucket (250,000 with 6-hour buckets); below that the
// per-key overhead is shared by fewer messages and the figure is an upper
// bound.
func DensityWorkload(n, keys int) StoreWorkload {
	span := time.Duration(float64(24*time.Hour) * float64(n) / 1e6)
	span = min(span, 24*time.Hour-time.Minute)
	return StoreWorkload{Keys: keys, Base: PastBase(), Span: span, N: n}
}

func (r *MemoryResult) finish(delta float64) {
	r.BytesPerMsg = delta / float64(r.Messages)
	r.PerMillionMB = r.BytesPerMsg
}

// RedisMemory loads the workload into a fresh Redis database at addr
// (FLUSHALL first) and reports used_memory growth per message.
func RedisMemory(ctx context.Context, addr string, w StoreWorkload) (MemoryResult, error) {
	c := NewRedisClient(addr)
	defer c.Close()
	if err := c.FlushAll(ctx).Err(); err != nil {
		return MemoryResult{}, fmt.Errorf("redis memory: %w", err)
	}
	s, err := store.NewRedis(ctx, store.RedisOptions{Addrs: []string{addr}, Timeout: 30 * time.Second})
	if err != nil {
		return MemoryResult{}, fmt.Errorf("redis memory: %w", err)
	}
	defer s.Close()
	before, err := redisinfo.Read(ctx, c)
	if err != nil {
		return MemoryResult{}, err
	}
	if _, err := LoadStore(ctx, s, w, w.N, 8); err != nil {
		return MemoryResult{}, fmt.Errorf("redis memory: %w", err)
	}
	after, err := redisinfo.Read(ctx, c)
	if err != nil {
		return MemoryResult{}, err
	}
	r := MemoryResult{Store: "redis", Messages: w.N, Keys: w.Keys, Span: w.Span.Hours()}
	r.finish(float64(after.UsedMemory - before.UsedMemory))
	return r, nil
}

// EmbeddedMemory loads the workload into a fresh embedded store and
// reports the Go heap growth after GC per message, and the size of the
// state file it saves.
func EmbeddedMemory(w StoreWorkload) (MemoryResult, error) {
	dir, err := os.MkdirTemp("", "milterd-bench-store-")
	if err != nil {
		return MemoryResult{}, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state")
	s, err := store.OpenEmbedded(store.EmbeddedOptions{Path: path, SaveInterval: -1, MaxEntries: 1 << 30})
	if err != nil {
		return MemoryResult{}, fmt.Errorf("embedded memory: %w", err)
	}
	defer s.Close()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	if _, err := LoadStore(context.Background(), s, w, w.N, 8); err != nil {
		return MemoryResult{}, fmt.Errorf("embedded memory: %w", err)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	r := MemoryResult{Store: "embedded", Messages: w.N, Keys: w.Keys, Span: w.Span.Hours()}
	r.finish(float64(int64(m1.HeapAlloc) - int64(m0.HeapAlloc)))
	if err := s.Save(); err != nil {
		return r, fmt.Errorf("embedded memory: %w", err)
	}
	if fi, err := os.Stat(path); err == nil {
		r.FileBytesPerMsg = float64(fi.Size()) / float64(w.N)
	}
	runtime.KeepAlive(s)
	return r, nil
}
