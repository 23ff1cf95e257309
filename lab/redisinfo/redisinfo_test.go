package redisinfo_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/lab/redisinfo"
)

// The counters mean what the package says, on a real server: a pipeline is
// one write whatever it holds, lone commands one each, and a script's
// nested calls show in commandstats but not in the writes.
func TestRoundTripsAndCommands(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	// One connection, opened before measuring: a new connection's HELLO
	// is a round trip too.
	o := r.ClientOptions()
	o.PoolSize = 1
	c := redis.NewClient(o)
	defer c.Close()
	ctx := context.Background()
	// go-redis (9.23, against Redis 7.0) opens a second connection for its
	// first pipeline; open it before measuring too.
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	measure := func(do func()) redisinfo.Diff {
		t.Helper()
		before, err := redisinfo.Read(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		do()
		after, err := redisinfo.Read(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return after.Sub(before)
	}
	tests := []struct {
		name          string
		do            func()
		writes, calls int64
	}{
		{"nothing", func() {}, 0, 0},
		{"three lone commands", func() {
			for range 3 {
				c.Set(ctx, "k", "v", 0)
			}
		}, 3, 3},
		{"a pipeline of three", func() {
			p := c.Pipeline()
			p.Set(ctx, "a", "1", 0)
			p.Set(ctx, "b", "2", 0)
			p.Get(ctx, "a")
			if _, err := p.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}, 1, 3},
		{"a script with two nested calls", func() {
			if err := c.Eval(ctx, "redis.call('SET', KEYS[1], '1'); return redis.call('GET', KEYS[1])", []string{"s"}).Err(); err != nil {
				t.Fatal(err)
			}
		}, 1, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := measure(tc.do)
			if d.Writes != tc.writes || d.Calls() != tc.calls {
				t.Errorf("writes %d, calls %d (%v); want writes %d, calls %d", d.Writes, d.Calls(), d.Commands, tc.writes, tc.calls)
			}
		})
	}
}

func TestParse(t *testing.T) {
	s, err := redisinfo.Parse("# Commandstats\r\ncmdstat_evalsha:calls=12,usec=340,usec_per_call=28.33,rejected_calls=0,failed_calls=0\r\n" +
		"# CPU\r\nused_cpu_sys:1.5\r\nused_cpu_user:2.25\r\n# Memory\r\nused_memory:1048576\r\n# Stats\r\ntotal_writes_processed:99\r\n")
	if err != nil {
		t.Fatal(err)
	}
	if s.Commands["evalsha"] != (redisinfo.Command{Calls: 12, Usec: 340}) || s.CPU != 3.75 || s.UsedMemory != 1<<20 || s.Writes != 99 {
		t.Errorf("got %+v", s)
	}
	if _, err := redisinfo.Parse("used_memory:lots\r\n"); err == nil {
		t.Error("a malformed used_memory was accepted")
	}
}

// TestReadLatency: a script's executions between two readings, as the
// server timed them, without those before.
func TestReadLatency(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	c := redis.NewClient(r.ClientOptions())
	defer c.Close()
	ctx := context.Background()
	const fast, slow = "return 1", "local x = 0 for i = 1, 300000 do x = x + i end return x"
	for range 30 {
		if err := c.Eval(ctx, fast, nil).Err(); err != nil {
			t.Fatal(err)
		}
	}
	before, err := redisinfo.ReadLatency(ctx, c, "eval")
	if err != nil {
		t.Fatal(err)
	}
	if q := before.Quantile(redisinfo.Latency{}, 0.5); q < 1 || q > 256 {
		t.Errorf("30 trivial scripts: median bound %d µs, want 1 to 256", q)
	}
	for range 10 {
		if err := c.Eval(ctx, slow, nil).Err(); err != nil {
			t.Fatal(err)
		}
	}
	after, err := redisinfo.ReadLatency(ctx, c, "eval")
	if err != nil {
		t.Fatal(err)
	}
	if q := after.Quantile(before, 0.5); q < 512 {
		t.Errorf("10 scripts of 300,000 additions after the trivial ones: median bound %d µs, want at least 512", q)
	}
	if q := after.Quantile(after, 0.5); q != 0 {
		t.Errorf("nothing between a reading and itself: median bound %d, want 0", q)
	}
}
