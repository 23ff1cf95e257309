package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/lab/soak"
)

var soakMixed = flag.Duration("soak-mixed", 0, "run TestSoakMixed: the mixed-fault soak for this long (e.g. 30m)")

// The mixed-fault soak, short: four milterd, on Redis, on Redis through
// Sentinel, on a Redis Cluster with replicas and on the embedded store,
// each carry a paced load while, one round each, Redis is restarted, the
// Sentinel fails over, a Cluster master is killed and its replica takes
// over, the embedded daemon is killed (SIGKILL) and restarted with a
// user's vote checked before and after, every daemon reloads three times,
// and MTA connections are dropped mid-message. No message may go
// unanswered (but those cut by the kill, which an MTA hands to its
// milter_default_action) and every answered message must be counted.
// Rounds are counts of messages, so a busy machine makes the test slower,
// not red.
func TestSoakMixedShort(t *testing.T) {
	if testing.Short() {
		t.Skip("thirteen processes for a minute or more: the full pass runs it")
	}
	rep := runMixed(t, soak.MixedOptions{Sessions: 10, Rate: 100, PerRound: 600, Rounds: 6})
	if !rep.OK() {
		t.Fail()
	}
}

// TestSoakMixed is the long run behind -soak-mixed DURATION (docs/reliability.md):
//
//	go test ./cmd/bulklab -run TestSoakMixed$ -soak-mixed 30m -timeout 2h -v
func TestSoakMixed(t *testing.T) {
	if *soakMixed <= 0 {
		t.Skip("the long mixed-fault soak runs with -soak-mixed DURATION")
	}
	rep := runMixed(t, soak.MixedOptions{Sessions: 20, Rate: 100, PerRound: 3000, Duration: *soakMixed, Warmup: 6, Flat: true})
	if !rep.OK() {
		t.Fail()
	}
}

func runMixed(t *testing.T, o soak.MixedOptions) *soak.MixedReport {
	bin := filepath.Join(binDir(t), "milterd")
	// Redis: standalone, Sentinel (a primary, its replica, one sentinel),
	// Cluster (three masters, one replica each).
	single := testenv.StartRedis(t, testenv.RedisOptions{})
	primary := testenv.StartRedis(t, testenv.RedisOptions{})
	replica := testenv.StartRedisReplica(t, primary)
	sentinel := testenv.StartRedisSentinel(t, "soak", primary)
	cluster := testenv.StartRedisClusterReplicas(t, 3, 1)

	dir := t.TempDir()
	logs := map[string]*os.File{}
	spawn := func(name string, args ...string) *soak.Target {
		cfg := filepath.Join(dir, name+".yml")
		// The default store budget (500 ms): failovers cost failure-policy
		// verdicts, which the soak reports.
		writeFile(t, cfg, "feedback:\n  trust_authenticated: true\n")
		f, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		logs[name] = f
		d, err := soak.Spawn(bin, append([]string{"-config", cfg}, args...), f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(func() {
			if err := d.Stop(); err != nil {
				t.Errorf("%s daemon: %v", name, err)
			}
		})
		return &soak.Target{Name: name, Daemon: d}
	}
	targets := []*soak.Target{
		spawn("redis", "-redis", "redis://"+single.Addr()+"/0"),
		spawn("sentinel", "-redis", "redis+sentinel://"+sentinel.Addr()+"/soak/0"),
		spawn("cluster", "-redis", "redis+cluster://"+strings.Join(cluster.Addrs(), ",")),
		spawn("embedded"),
	}
	var votes atomic.Int64
	o.Targets = targets
	o.Faults = []soak.Fault{
		{Name: "Redis restarted", Target: 0, Do: func(context.Context) error { single.Restart(); return nil }},
		{Name: "Sentinel failover", Target: 1, Do: func(ctx context.Context) error {
			return sentinelFailover(ctx, sentinel, primary, replica)
		}},
		{Name: "Cluster master killed", Target: 2, Do: func(ctx context.Context) error { _, err := cluster.FailOver(ctx); return err }},
		soak.KillRestart(3, targets[3], &votes),
		soak.Reloads(targets, 3),
		soak.DropConnections(0, targets[0], 200),
	}
	o.Progress = testWriter{t}
	ctx, cancel := context.WithTimeout(context.Background(), max(o.Duration*2, 20*time.Minute))
	defer cancel()
	rep, err := soak.Mixed(ctx, o)
	if err != nil {
		for name, f := range logs {
			b, _ := os.ReadFile(f.Name())
			t.Logf("--- %s daemon log (tail) ---\n%s", name, tail(string(b), 3000))
		}
		t.Fatal(err)
	}
	t.Logf("\n%s", rep)
	return rep
}

// sentinelFailover asks the Sentinel to fail over and waits until the
// replica is the master and the old master replicates it, ready for the
// next one.
func sentinelFailover(ctx context.Context, sentinel, a, b *testenv.Redis) error {
	was, err := testenv.SentinelMaster(ctx, sentinel, "soak")
	if err != nil {
		return err
	}
	// On a busy machine the sentinel may have started one itself (the
	// master missed its pings for a second): wait for that one.
	if _, err := sentinel.Do(ctx, "SENTINEL", "FAILOVER", "soak"); err != nil && !strings.Contains(err.Error(), "INPROG") {
		return fmt.Errorf("SENTINEL FAILOVER: %w", err)
	}
	next := a
	if was == a.Addr() {
		next = b
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		now, _ := testenv.SentinelMaster(ctx, sentinel, "soak")
		info, _ := next.Client().Info(ctx, "replication").Result()
		if now == next.Addr() && strings.Contains(info, "role:master") && strings.Contains(info, "state=online") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sentinel failover from %s: master now %q, new master's replication:\n%s", was, now, info)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
