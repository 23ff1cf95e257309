package store_test

// Benchmarks against a real redis-server (started by the benchmark) and the
// embedded store. The memory benchmarks load b.N messages; run them with a
// fixed count, for example:
//
//	go test -run '^$' -bench 'Memory' -benchtime 1000000x ./store/
//
// Environment: BULKMILTER_BENCH_KEYS (keys per message, default 10),
// BULKMILTER_BENCH_REPEAT (fraction of messages that belong to a campaign
// whose keys repeat, default 0: every message distinct, the worst case),
// BULKMILTER_BENCH_SPLIT (first-sighting split, default the store's),
// BULKMILTER_BENCH_LISTPACK (the server's hash-max-listpack-entries,
// default 128 as upstream Redis 7), BULKMILTER_BENCH_FILL (records in
// every pointer string before RedisObserve measures: 206 is a million
// messages a day at 27 keys; default 0), BULKMILTER_BENCH_WRITERS
// (concurrent sessions of EmbeddedObserve, default 8).

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/lab/bench"
	"github.com/bulkmilter/bulkmilter/store"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil && v >= 0 {
		return v
	}
	return def
}

// workload is the store workload shared with "bulklab bench"
// (lab/bench): keys named like the default families', one recipient
// each, timestamps spread over the span, an optional campaign fraction.
type workload = bench.StoreWorkload

func newWorkload(n int) workload {
	return workload{
		Keys:   envInt("BULKMILTER_BENCH_KEYS", 10),
		Repeat: envFloat("BULKMILTER_BENCH_REPEAT", 0),
		Base:   bench.PastBase(),
		Span:   24*time.Hour - time.Minute,
		N:      n,
	}
}

// load observes n messages with c concurrent writers.
func load(b *testing.B, s store.Store, w workload, n, c int) {
	retries, err := bench.LoadStore(context.Background(), s, w, n, c)
	if err != nil {
		b.Fatal(err)
	}
	if retries > 0 {
		b.Logf("%d calls retried after ErrUnavailable", retries)
	}
}

// warm loads scripts and opens connections with 2,000 messages other
// than the measured ones: replaying them would measure copies (keys
// found in the current bucket, nothing to write), not distinct mail.
func warm(b *testing.B, s store.Store, w workload) {
	w.From = 1 << 32
	load(b, s, w, 2000, 4)
}

func info(b *testing.B, c redis.UniversalClient, section string) map[string]string {
	b.Helper()
	s, err := c.Info(context.Background(), section).Result()
	if err != nil {
		b.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = v
		}
	}
	return m
}

func infoFloat(m map[string]string, k string) float64 {
	f, _ := strconv.ParseFloat(m[k], 64)
	return f
}

// commandstat returns calls and usec of one command from INFO commandstats.
func commandstat(m map[string]string, cmd string) (calls, usec float64) {
	for _, f := range strings.Split(m["cmdstat_"+cmd], ",") {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "calls":
			calls, _ = strconv.ParseFloat(v, 64)
		case "usec":
			usec, _ = strconv.ParseFloat(v, 64)
		}
	}
	return
}

// nestedPerMsg returns the commands scripts ran per message (every
// command commandstats counted but EVALSHA, EVAL and the benchmark's own
// INFO), and logs each one's calls and µs per message, to show where the
// script's time goes.
func nestedPerMsg(b *testing.B, stats map[string]string, n float64) float64 {
	var total float64
	var lines []string
	for k := range stats {
		cmd, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok || cmd == "evalsha" || cmd == "eval" || cmd == "info" {
			continue
		}
		calls, usec := commandstat(stats, cmd)
		total += calls
		lines = append(lines, fmt.Sprintf("%s %.2f calls/msg %.1f µs/msg", cmd, calls/n, usec/n))
	}
	slices.Sort(lines)
	b.Logf("nested commands per message: %s", strings.Join(lines, "; "))
	return total / n
}

// countingHook counts round trips (a pipeline or a lone command) and the
// commands the client sends.
type countingHook struct{ trips, cmds atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func benchRedis(b *testing.B, addrs []string) (*store.Redis, redis.UniversalClient) {
	s, err := store.NewRedis(context.Background(), store.RedisOptions{Addrs: addrs, Timeout: 30 * time.Second,
		FirstSightSplit: envInt("BULKMILTER_BENCH_SPLIT", 0)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.Ping(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s, s.Client()
}

// BenchmarkRedisObserve: messages per second, round trips and commands
// per message, and Redis CPU per message, with several concurrent
// sessions as a milter has.
func BenchmarkRedisObserve(b *testing.B) {
	// 27: what the default signature set gave on the SpamAssassin corpus
	// (docs/performance.md, "Signature families"); 43 what it gives since
	// the containment family, 49 since the line family.
	for _, keys := range []int{10, 27, 43, 49} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			r := startRedis(b)
			s, c := benchRedis(b, []string{r.Addr()})
			hook := &countingHook{}
			c.AddHook(hook)
			w := newWorkload(0)
			w.Keys = keys
			fillPointers(b, c, w.Base, envInt("BULKMILTER_BENCH_FILL", 0))
			warm(b, s, w)
			hook.trips.Store(0)
			hook.cmds.Store(0)
			c.ConfigResetStat(context.Background())
			cpu0 := info(b, c, "cpu")
			client0 := bench.CPUTime()
			b.ResetTimer()
			load(b, s, w, b.N, 8)
			b.StopTimer()
			// The client's side: this process, the server is another.
			b.ReportMetric(float64((bench.CPUTime()-client0).Nanoseconds())/float64(b.N), "client-cpu-ns/msg")
			cpu1 := info(b, c, "cpu")
			stats := info(b, c, "commandstats")
			n := float64(b.N)
			b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(hook.trips.Load())/n, "roundtrips/msg")
			b.ReportMetric(float64(hook.cmds.Load())/n, "cmds/msg")
			calls, usec := commandstat(stats, "evalsha")
			b.ReportMetric(usec/n, "evalsha-µs/msg")
			b.ReportMetric(calls/n, "evalsha/msg")
			b.ReportMetric(nestedPerMsg(b, stats, n), "nested-cmds/msg")
			cpu := (infoFloat(cpu1, "used_cpu_user") + infoFloat(cpu1, "used_cpu_sys")) -
				(infoFloat(cpu0, "used_cpu_user") + infoFloat(cpu0, "used_cpu_sys"))
			b.ReportMetric(cpu*1e6/n, "redis-cpu-µs/msg")
		})
	}
}

// fillPointers writes records random pointer records into every
// pointer string of the window ending in the bucket of at, as a
// database at full density holds them (at a million messages a day, 27
// keys and the default split of 2, a string holds about 206 records):
// without it the benchmark's strings hold a few records each and hide
// what a lookup costs at density. The records never match a workload key.
func fillPointers(b *testing.B, c redis.UniversalClient, at time.Time, records int) {
	if records <= 0 {
		return
	}
	const bucketMs, nb = 6 * 3600 * 1000, 5
	cb := at.UnixMilli() / bucketMs
	split := envInt("BULKMILTER_BENCH_SPLIT", store.DefaultFirstSightSplit)
	rng := rand.New(rand.NewPCG(1, 2))
	// the support families' share of the records (lab/bench's workload):
	// 9 bytes in the current string, 6 in the older one
	k := envInt("BULKMILTER_BENCH_KEYS", 10)
	terms, contain, lines := bench.SupportKeys(k)
	sup := records * (terms + contain + lines) / k
	recs := func(n, size int) []byte {
		buf := make([]byte, size*n)
		for i := range buf {
			buf[i] = byte(rng.Uint32())
		}
		return buf
	}
	ctx := context.Background()
	p := c.Pipeline()
	// lane returns n records of size bytes of lane l (the check's last
	// byte mod lanes: a main record's 4th, a support record's 2nd): their
	// checks (4 or 2 bytes) and their pointers
	const lanes = 4
	lane := func(n, size, l int) (checks, ptrs []byte) {
		cl := 4
		if size == 6 {
			cl = 2
		}
		out := recs(n, size)
		for i := 0; i < len(out); i += size {
			out[i+cl-1] = out[i+cl-1]&^(lanes-1) | byte(l)
			checks = append(checks, out[i:i+cl]...)
			ptrs = append(ptrs, out[i+cl:i+size]...)
		}
		return checks, ptrs
	}
	for tag := range 1 << 14 {
		for sub := range split {
			// the older string: the main part's lanes, then the support
			// part's, each the window's buckets newest first (a count
			// byte each, then the checks, then the pointers), the
			// current bucket's holding what its current string (half
			// full as on average, each string as full as a steady state
			// leaves it: 1 to 48 records, so that a new key's write
			// moves a full current string to the older one as often as
			// at density, one in 48) does not
			inCur := min(1+rng.IntN(48), records)
			var old, lens []byte
			for part := range 2 {
				for l := range lanes {
					var counts, checks, ptrs []byte
					for bk := cb; bk > cb-nb; bk-- {
						n, ns := records, sup
						if bk == cb {
							n, ns = records-inCur, sup-sup*inCur/records
						}
						k, size := (n-ns)/lanes, 9
						if part == 1 {
							k, size = ns/lanes, 6
						}
						ck, pk := lane(k, size, l)
						counts = append(counts, byte(k))
						checks = append(checks, ck...)
						ptrs = append(ptrs, pk...)
					}
					n0 := len(old)
					old = append(append(append(old, counts...), checks...), ptrs...)
					lens = binary.BigEndian.AppendUint16(lens, uint16(len(old)-n0))
				}
			}
			// the current string: its bucket, the older string's lanes'
			// lengths, its records (a support family's with the top bit
			// of its check set)
			cs := sup * inCur / records
			cur := binary.BigEndian.AppendUint32(nil, uint32(cb))
			cur = append(cur, lens...)
			rs := recs(inCur, 9)
			for i := 0; i < len(rs); i += 9 {
				rs[i] &^= 0x80
				if i < 9*cs {
					rs[i] |= 0x80
				}
			}
			cur = append(cur, rs...)
			base := fmt.Sprintf("bm%d:{%04x}:", store.SchemaVersion, tag)
			p.Set(ctx, base+"kc:"+strconv.Itoa(sub), string(cur), 30*time.Hour)
			p.Set(ctx, base+"ko:"+strconv.Itoa(sub), string(old), 24*time.Hour)
		}
		if p.Len() >= 2000 {
			if _, err := p.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := p.Exec(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRedisClusterObserve: the same on a 3-master cluster; a message
// is one pipeline split per node, sent in parallel.
func BenchmarkRedisClusterObserve(b *testing.B) {
	cl := testenv.StartRedisCluster(b, 3)
	s, c := benchRedis(b, cl.Addrs())
	w := newWorkload(0)
	warm(b, s, w)
	hook := &countingHook{}
	c.AddHook(hook)
	b.ResetTimer()
	load(b, s, w, b.N, 8)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(hook.cmds.Load())/float64(b.N), "cmds/msg")
	// A pipeline split over the nodes counts once: the reads, then the
	// writes (store/doc.go: at most two a message).
	b.ReportMetric(float64(hook.trips.Load())/float64(b.N), "roundtrips/msg")
}

// BenchmarkRedisMemory loads b.N messages spread over one day (the
// default window) and reports Redis's used_memory growth per message.
func BenchmarkRedisMemory(b *testing.B) {
	// Upstream Redis 7's default; some distributions build with 512.
	r := startRedis(b, "hash-max-listpack-entries "+strconv.Itoa(envInt("BULKMILTER_BENCH_LISTPACK", 128)))
	s, c := benchRedis(b, []string{r.Addr()})
	w := newWorkload(b.N)
	ctx := context.Background()
	runtime.GC()
	before := infoFloat(info(b, c, "memory"), "used_memory")
	b.ResetTimer()
	load(b, s, w, b.N, 8)
	b.StopTimer()
	after := infoFloat(info(b, c, "memory"), "used_memory")
	b.ReportMetric((after-before)/float64(b.N), "bytes/msg")
	b.ReportMetric((after-before)/float64(b.N)/float64(w.Keys), "bytes/key")
	keys, _ := c.DBSize(ctx).Result()
	b.ReportMetric(float64(keys)/float64(b.N), "rediskeys/msg")
	// How many first-sighting hashes left listpack encoding (a sample).
	var sampled, listpack int
	it := c.Scan(ctx, 0, "bm2:{*}:q[co]:*", 1000).Iterator()
	for it.Next(ctx) && sampled < 300 {
		sampled++
		if enc, _ := c.ObjectEncoding(ctx, it.Val()).Result(); enc == "listpack" || enc == "ziplist" {
			listpack++
		}
	}
	if sampled > 0 {
		b.ReportMetric(float64(listpack)/float64(sampled), "fs-listpack-fraction")
	}
	var x, cc int
	for _, pat := range []string{"bm2:{*}:x:*", "bm2:{*}:c:*"} {
		it := c.Scan(ctx, 0, pat, 1000).Iterator()
		n := 0
		for it.Next(ctx) {
			n++
		}
		if pat[len(pat)-3] == 'x' {
			x = n
		} else {
			cc = n
		}
	}
	b.ReportMetric(float64(x), "exact-keys")
	b.ReportMetric(float64(cc), "hll-keys")
}

// BenchmarkEmbeddedObserve: messages per second and process CPU a
// message through the embedded store with BULKMILTER_BENCH_WRITERS
// concurrent sessions (default 8).
func BenchmarkEmbeddedObserve(b *testing.B) {
	s, err := store.OpenEmbedded(store.EmbeddedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w := newWorkload(0)
	cpu0 := bench.CPUTime()
	b.ResetTimer()
	load(b, s, w, b.N, envInt("BULKMILTER_BENCH_WRITERS", 8))
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64((bench.CPUTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/msg")
}

// BenchmarkEmbeddedMemory loads b.N messages spread over one day and
// reports the Go heap growth per message, and the state file size.
func BenchmarkEmbeddedMemory(b *testing.B) {
	dir := b.TempDir()
	s, err := store.OpenEmbedded(store.EmbeddedOptions{Path: dir + "/state", SaveInterval: -1, MaxEntries: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	w := newWorkload(b.N)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	b.ResetTimer()
	load(b, s, w, b.N, 8)
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/float64(b.N), "heap-bytes/msg")
	start := time.Now()
	if err := s.Save(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(start).Seconds(), "save-s")
	fi, _ := os.Stat(dir + "/state")
	b.ReportMetric(float64(fi.Size())/float64(b.N), "file-bytes/msg")
	s.Close()
	start = time.Now()
	s2, err := store.OpenEmbedded(store.EmbeddedOptions{Path: dir + "/state", SaveInterval: -1, MaxEntries: 1 << 30,
		Params: store.Params{Now: func() time.Time { return w.Base.Add(w.Span) }}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(start).Seconds(), "load-s")
	st := s2.Stats()
	if st.FirstSightings+st.Counters == 0 {
		b.Error("nothing loaded back")
	}
	s2.Close()
}

// BenchmarkRedisScriptPrimitives: what the pieces of the campaign script
// cost inside one EVALSHA on this server, Redis CPU per call (the floor in
// docs/performance.md): the call itself with the script's key and argument
// count, a reply of nested rows, one nested command, reading 135 strings
// of a near-empty and of a full database, 27 whole-string rewrites, and
// the primitives of a lookup in tables of fixed-size slots (BITFIELD_RO
// and BITFIELD SET with many fields, GETRANGE of a key's probe window).
func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func BenchmarkRedisScriptPrimitives(b *testing.B) {
	r := startRedis(b)
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer c.Close()
	ctx := context.Background()
	names := func(n int, pat string) []string {
		var k []string
		for i := range n {
			k = append(k, fmt.Sprintf(pat, i*97))
		}
		return k
	}
	keys162 := names(162, "bm2:{%04x}:p:1:49000")
	args70 := make([]any, 70)
	for i := range args70 {
		args70[i] = "abcd"
	}
	small, full := names(135, "bm2:{%04x}:p:0:1"), names(135, "bm2:{%04x}:p:1:1")
	for i := range small {
		c.Set(ctx, small[i], strings.Repeat("x", 128), 0)
		c.Set(ctx, full[i], strings.Repeat("y", 1600), 0)
	}
	const mget = "local v = redis.call('MGET', unpack(KEYS)) return #v"
	// Pointer tables of fixed-size slots (the lookup docs/performance.md
	// weighs): strings of 4 Mi 8-byte slots (32 MiB, a single server's
	// table at about a million messages a day), probed at random slots
	// with BITFIELD_RO GETs whose offsets the client formats (building
	// them in Lua costs more than the command: ~1 µs a field).
	tables := names(5, "bm2:t:%d")
	for _, k := range tables {
		c.SetRange(ctx, k, 32<<20-1, "\x00")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	gets := func(n int, typ string) []any {
		var a []any
		for range n {
			a = append(a, "GET", typ, "#"+strconv.Itoa(rng.IntN(4<<20)))
		}
		return a
	}
	sets := func(n int) []any {
		var a []any
		for range n {
			a = append(a, "SET", "u32", "#"+strconv.Itoa(rng.IntN(8<<20)), rng.IntN(1<<31))
		}
		return a
	}
	const bitfield = `local n = 0
for b = 1, #KEYS do n = n + #redis.call(ARGV[1], KEYS[b], unpack(ARGV, 2)) end
return n`
	bf := func(cmd string, a []any) []any { return append([]any{cmd}, a...) }
	// A whole lookup and write of 27 keys in one window-wide table (or in
	// each of five bucket tables): each key's 8 slots from its home slot
	// (computed in Lua from its hash, as a script would), its 4-byte
	// check searched among them, then its 8-byte record written at the
	// home slot of the first table.
	probeArgs := make([]any, 0, 54)
	for range 27 {
		probeArgs = append(probeArgs, rng.IntN(1<<31))
	}
	for range 27 {
		probeArgs = append(probeArgs, string(binary.BigEndian.AppendUint32(nil, rng.Uint32())))
	}
	const windowGetrange = `local slots, n, hit = 4194296, #ARGV / 2, 0
for b = 1, #KEYS do
  for k = 1, n do
    local o = (tonumber(ARGV[k]) % slots) * 8
    local w = redis.call('GETRANGE', KEYS[b], o, o + 63)
    local p = string.find(w, ARGV[n + k], 1, true)
    if p and (p - 1) % 8 == 0 then hit = hit + 1 end
  end
end
for k = 1, n do
  redis.call('SETRANGE', KEYS[1], (tonumber(ARGV[k]) % slots) * 8, ARGV[n + k] .. 'abcd')
end
return hit`
	const windowBitfield = `local slots, n, hit = 4194296, #ARGV / 2, 0
local cmd = {'BITFIELD_RO', KEYS[1]}
for k = 1, n do
  local o = (tonumber(ARGV[k]) % slots) * 64
  for j = 0, 7 do cmd[#cmd + 1] = 'GET'; cmd[#cmd + 1] = 'u32'; cmd[#cmd + 1] = o + 64 * j end
end
local r = redis.call(unpack(cmd))
for i = 1, #r do if r[i] == 305419896 then hit = hit + 1 end end
cmd = {'BITFIELD', KEYS[1]}
for k = 1, n do
  local o = (tonumber(ARGV[k]) % slots) * 64
  cmd[#cmd + 1] = 'SET'; cmd[#cmd + 1] = 'u32'; cmd[#cmd + 1] = o; cmd[#cmd + 1] = 305419896
  cmd[#cmd + 1] = 'SET'; cmd[#cmd + 1] = 'u32'; cmd[#cmd + 1] = o + 32; cmd[#cmd + 1] = k
end
redis.call(unpack(cmd))
return hit`
	for _, p := range []struct {
		name, src string
		keys      []string
		args      []any
	}{
		{"empty-162keys-70args", "return 1", keys162, args70},
		{"empty-1arg", "return 1", nil, []any{strings.Repeat("abcdefghi", 27)}},
		// the same names as 232 ARGV, or packed in one argument that Lua
		// cuts into 162 names (what declaring KEYS costs, and what not
		// declaring them would)
		{"empty-0keys-232args", "return 1", nil, append(anys(keys162), args70...)},
		{"cut-1arg-162names", "local s, n = ARGV[1], {} for k in string.gmatch(s, '[^,]+') do n[#n + 1] = k end return #n", nil, []any{strings.Join(keys162, ",")}},
		{"cut-1arg-162names-fixed", "local s, n, w = ARGV[1], {}, #KEYS for i = 1, 162 do n[i] = string.sub(s, (i - 1) * 21 + 1, i * 21 - 1) end return #n", nil, []any{strings.Join(keys162, ",") + ","}},
		{"reply-27-nested-rows", "local v = {} for s = 1, 27 do v[s] = {0, 0, {}} end return {1, v}", nil, nil},
		{"135-HGET", "for i = 1, #KEYS do redis.call('HGET', KEYS[i], 'f') end return 1", names(135, "bm2:{%04x}:none"), nil},
		{"MGET-135x128B", mget, small, nil},
		{"MGET-135x1600B", mget, full, nil},
		{"1-BITFIELD_RO-27x4-u53", bitfield, tables[:1], bf("BITFIELD_RO", gets(108, "u53"))},
		{"1-BITFIELD_RO-27x8-u32", bitfield, tables[:1], bf("BITFIELD_RO", gets(216, "u32"))},
		{"5-BITFIELD_RO-27x4-u53", bitfield, tables, bf("BITFIELD_RO", gets(108, "u53"))},
		{"5-BITFIELD_RO-27x8-u32", bitfield, tables, bf("BITFIELD_RO", gets(216, "u32"))},
		{"27-BITFIELD_RO-4-u53", bitfield, slices.Repeat(tables[:1], 27), bf("BITFIELD_RO", gets(4, "u53"))},
		{"1-BITFIELD-SET-54-u32", bitfield, tables[:1], bf("BITFIELD", sets(54))},
		{"lookup-write-27-GETRANGE-64B", windowGetrange, tables[:1], probeArgs},
		{"lookup-5buckets-write-27-GETRANGE-64B", windowGetrange, tables, probeArgs},
		{"lookup-write-27-BITFIELD-8slots", windowBitfield, tables[:1], probeArgs},
		// the pointer writes of a message of 43 new keys: one SET a
		// string (as the script) or one MSET of them all
		{"43-SET-KEEPTTL-136B", "local v = string.rep('z', 136) for i = 1, 43 do redis.call('SET', KEYS[i], v, 'KEEPTTL') end return 1", small[:43], nil},
		{"MSET-43x136B", "local v, a = string.rep('z', 136), {} for i = 1, 43 do a[#a + 1] = KEYS[i] a[#a + 1] = v end redis.call('MSET', unpack(a)) return 1", small[:43], nil},
		{"27-GET-SET-1600B", "for i = 1, 27 do local v = redis.call('GET', KEYS[i]) redis.call('SET', KEYS[i], string.sub(v, 9) .. 'abcdefgh', 'KEEPTTL') end return 1", full, nil},
	} {
		b.Run(p.name, func(b *testing.B) {
			sc := redis.NewScript(p.src)
			if err := sc.Run(ctx, c, p.keys, p.args...).Err(); err != nil {
				b.Fatal(err)
			}
			cpu0 := info(b, c, "cpu")
			b.SetParallelism(4) // concurrent sessions, as in RedisObserve
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := sc.EvalSha(ctx, c, p.keys, p.args...).Err(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			cpu1 := info(b, c, "cpu")
			cpu := (infoFloat(cpu1, "used_cpu_user") + infoFloat(cpu1, "used_cpu_sys")) -
				(infoFloat(cpu0, "used_cpu_user") + infoFloat(cpu0, "used_cpu_sys"))
			b.ReportMetric(cpu*1e6/float64(b.N), "redis-cpu-µs/call")
		})
	}
}
