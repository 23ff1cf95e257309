package store_test

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/store"
)

// BenchmarkRedisClusterCPU: the Redis CPU a message takes on one server
// and on Clusters of 3 and 6 primaries, summed over the primaries, and the
// busiest primary's share of it, less what the nodes spend idle (cron,
// the Cluster's bus), for the capacity lines of docs/performance.md
// ("Capacity on paper"). Keys and density as BenchmarkRedisObserve
// (BULKMILTER_BENCH_KEYS, BULKMILTER_BENCH_FILL: pointer strings filled
// as at a million messages a day; lab/bench's earlier version only spread
// its messages over a span, which left the strings near-empty).
//
// On a Cluster, calls=slot takes a message's pointers one script call a
// slot, as before the store took one a primary (calls=primary), each on a
// Cluster of its own, one after the other; BULKMILTER_BENCH_PRIMARIES
// sets the Clusters' sizes.
func BenchmarkRedisClusterCPU(b *testing.B) {
	type run struct {
		primaries int
		perSlot   bool
	}
	runs := []run{{1, false}}
	// BULKMILTER_BENCH_PRIMARIES: the Clusters' sizes, "3,6" unless set
	for _, f := range strings.Split(cmp.Or(os.Getenv("BULKMILTER_BENCH_PRIMARIES"), "3,6"), ",") {
		p, err := strconv.Atoi(f)
		if err != nil || p < 3 {
			b.Fatalf("BULKMILTER_BENCH_PRIMARIES: %q is not a Cluster size of 3 or more", f)
		}
		runs = append(runs, run{p, true}, run{p, false})
	}
	for _, r := range runs {
		name := fmt.Sprintf("primaries=%d", r.primaries)
		if r.primaries > 1 {
			name += map[bool]string{true: "/calls=slot", false: "/calls=primary"}[r.perSlot]
		}
		primaries := r.primaries
		b.Run(name, func(b *testing.B) {
			var addrs []string
			if primaries == 1 {
				addrs = []string{startRedis(b).Addr()}
			} else {
				addrs = testenv.StartRedisCluster(b, primaries).Addrs()
			}
			s, c := benchRedis(b, addrs)
			store.PerSlotForTest(s, r.perSlot)
			hook := &countingHook{}
			c.AddHook(hook)
			w := newWorkload(0)
			fillPointers(b, c, w.Base, envInt("BULKMILTER_BENCH_FILL", 0))
			warm(b, s, w)
			hook.trips.Store(0)
			hook.cmds.Store(0)
			nodes := make([]*redis.Client, len(addrs))
			for i, a := range addrs {
				nodes[i] = redis.NewClient(&redis.Options{Addr: a})
				defer nodes[i].Close()
			}
			// cpu gives each node's CPU seconds, user and system
			// (the kernel's: a node's reads and writes of the network)
			cpu := func() (out, sys []float64) {
				for _, n := range nodes {
					m := info(b, n, "cpu")
					out = append(out, infoFloat(m, "used_cpu_user")+infoFloat(m, "used_cpu_sys"))
					sys = append(sys, infoFloat(m, "used_cpu_sys"))
				}
				return out, sys
			}
			// The nodes' own CPU while idle (cron, the Cluster's gossip),
			// to tell it from the messages' cost.
			idle0, sidle0 := cpu()
			t0 := time.Now()
			time.Sleep(2 * time.Second)
			idle1, sidle1 := cpu()
			idleFor := time.Since(t0)
			cpu0, sys0 := idle1, sidle1
			b.ResetTimer()
			load(b, s, w, b.N, 8)
			b.StopTimer()
			cpu1, sys1 := cpu()
			var sum, sys, busiest float64
			for i := range cpu1 {
				d := cpu1[i] - cpu0[i]
				sum += d
				sys += sys1[i] - sys0[i]
				busiest = max(busiest, d)
			}
			var idle, sidle float64
			for i := range idle1 {
				idle += idle1[i] - idle0[i]
				sidle += sidle1[i] - sidle0[i]
			}
			idle *= b.Elapsed().Seconds() / idleFor.Seconds()
			sidle *= b.Elapsed().Seconds() / idleFor.Seconds()
			n := float64(b.N)
			b.ReportMetric((sum-idle)*1e6/n, "redis-cpu-µs/msg")
			b.ReportMetric((sys-sidle)*1e6/n, "redis-sys-µs/msg")
			b.ReportMetric(idle*1e6/n, "idle-cpu-µs/msg")
			b.ReportMetric(busiest/sum, "busiest-share")
			b.ReportMetric(float64(hook.trips.Load())/n, "roundtrips/msg")
			b.ReportMetric(float64(hook.cmds.Load())/n, "calls/msg")
		})
	}
}
