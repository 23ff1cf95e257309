package bench_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/lab/bench"
	"github.com/bulkmilter/bulkmilter/lab/redisinfo"
	"github.com/bulkmilter/bulkmilter/store"
)

// BenchmarkRedisClusterCPU backs the capacity on paper (docs/performance.md):
// the Redis CPU of a message on one server and on Redis Clusters of 3 and 6
// primaries, the same workload (29 keys, one recipient, distinct messages
// at the density of a million a day, 4 writers). Redis CPU is
// used_cpu_user+sys summed over the primaries, less what they spend idle
// (cron, cluster bus: idle-cpu-µs/msg, measured for 3 s before);
// max-primary-share is the busiest primary's part of all of it.
//
//	go test ./lab/bench -run '^$' -bench RedisClusterCPU -benchtime 20000x
func BenchmarkRedisClusterCPU(b *testing.B) {
	for _, primaries := range []int{1, 3, 6} {
		b.Run(fmt.Sprintf("primaries=%d", primaries), func(b *testing.B) {
			ctx := context.Background()
			var addrs []string
			if primaries == 1 {
				addrs = []string{testenv.StartRedis(b, testenv.RedisOptions{}).Addr()}
			} else {
				addrs = testenv.StartRedisCluster(b, primaries).Addrs()
			}
			s, err := store.NewRedis(ctx, store.RedisOptions{Addrs: addrs, Cluster: primaries > 1, Timeout: 30 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.Ping(ctx); err != nil {
				b.Fatal(err)
			}
			read := func() []redisinfo.Snapshot {
				var snaps []redisinfo.Snapshot
				for _, a := range addrs {
					c := bench.NewRedisClient(a)
					snap, err := redisinfo.Read(ctx, c)
					c.Close()
					if err != nil {
						b.Fatal(err)
					}
					snaps = append(snaps, snap)
				}
				return snaps
			}
			sum := func(before, after []redisinfo.Snapshot) float64 {
				var cpu float64
				for i := range after {
					cpu += after[i].Sub(before[i]).CPU
				}
				return cpu
			}
			// What the servers spend idle (cron, cluster bus), per second,
			// is left out of the messages' cost.
			idle0, t0 := read(), time.Now()
			time.Sleep(3 * time.Second)
			before, t1 := read(), time.Now()
			idleRate := sum(idle0, before) / t1.Sub(t0).Seconds()
			w := bench.DensityWorkload(b.N, 29)
			b.ResetTimer()
			if _, err := bench.LoadStore(ctx, s, w, b.N, 4); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			after := read()
			idle := idleRate * time.Since(t1).Seconds()
			var cpu, busiest float64
			var writes, scripts int64
			for i, snap := range after {
				d := snap.Sub(before[i])
				cpu += d.CPU
				busiest = max(busiest, d.CPU)
				writes += d.Writes
				scripts += d.Commands["evalsha"].Calls
			}
			cpu -= idle
			if scripts < int64(b.N) {
				b.Fatalf("%d script calls for %d messages", scripts, b.N)
			}
			n := float64(b.N)
			b.ReportMetric(cpu/n*1e6, "redis-cpu-µs/msg")
			b.ReportMetric(idle/n*1e6, "idle-cpu-µs/msg")
			b.ReportMetric(busiest/cpu, "max-primary-share")
			b.ReportMetric(float64(writes)/n, "roundtrips/msg")
			b.ReportMetric(float64(scripts)/n, "scripts/msg")
		})
	}
}
