// Package redisinfo reads the figures a benchmark or a test needs from a
// Redis server's INFO: commands executed (commandstats), replies written,
// the server's CPU time and its memory, so that "one round trip per
// message" and "Redis CPU per message" are measured the same way
// everywhere.
//
// Commandstats counts the commands a Lua script calls as well as the
// script's own EVALSHA, so it cannot tell round trips alone. The server's
// total_writes_processed can: it grows once each time the server flushes
// replies to a client, so a client that sends one pipeline and waits for
// its answer adds exactly one.
//
// It may import go-redis, nothing of bulkmilter.
package redisinfo

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Snapshot is one reading of INFO commandstats, cpu and memory.
type Snapshot struct {
	// Commands holds, per command name (lower case, "evalsha"), its calls
	// and the microseconds the server spent in it.
	Commands map[string]Command
	// CPU is used_cpu_user + used_cpu_sys, in seconds.
	CPU float64
	// UsedMemory is used_memory, in bytes.
	UsedMemory int64
	// Writes is total_writes_processed: reply flushes to clients, one per
	// round trip.
	Writes int64
}

// Command is one command's line of INFO commandstats.
type Command struct {
	Calls int64
	Usec  int64
}

// Read takes a snapshot. The server counts the INFO call itself: Sub
// leaves it out of the commands, and its reply is one write (see
// Diff.Writes).
func Read(ctx context.Context, c redis.UniversalClient) (Snapshot, error) {
	s, err := c.Info(ctx, "commandstats", "cpu", "memory", "stats").Result()
	if err != nil {
		return Snapshot{}, fmt.Errorf("redis info: %w", err)
	}
	return Parse(s)
}

// Parse reads the text of INFO.
func Parse(info string) (Snapshot, error) {
	snap := Snapshot{Commands: map[string]Command{}}
	var user, sys float64
	for l := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(k, "cmdstat_"):
			var cmd Command
			for f := range strings.SplitSeq(v, ",") {
				fk, fv, _ := strings.Cut(f, "=")
				n, _ := strconv.ParseInt(fv, 10, 64)
				switch fk {
				case "calls":
					cmd.Calls = n
				case "usec":
					cmd.Usec = n
				}
			}
			snap.Commands[strings.TrimPrefix(k, "cmdstat_")] = cmd
		case k == "used_cpu_user":
			user, _ = strconv.ParseFloat(v, 64)
		case k == "used_cpu_sys":
			sys, _ = strconv.ParseFloat(v, 64)
		case k == "used_memory":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return snap, fmt.Errorf("redis info: used_memory %q: %w", v, err)
			}
			snap.UsedMemory = n
		case k == "total_writes_processed":
			snap.Writes, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	snap.CPU = user + sys
	return snap, nil
}

// Diff is what happened between two snapshots.
type Diff struct {
	Commands   map[string]Command // growth per command, the bench's INFO and LATENCY left out
	CPU        float64            // seconds
	UsedMemory int64              // bytes
	// Writes is the reply flushes between the two snapshots, less the
	// reply to the first snapshot's INFO (written after it was read): the
	// round trips of every client but the one reading INFO.
	Writes int64
}

// Sub returns what happened between before and s.
func (s Snapshot) Sub(before Snapshot) Diff {
	d := Diff{Commands: map[string]Command{}, CPU: s.CPU - before.CPU, UsedMemory: s.UsedMemory - before.UsedMemory,
		Writes: s.Writes - before.Writes - 1}
	for name, c := range s.Commands {
		if name == "info" || name == "latency" { // the reader's own
			continue
		}
		b := before.Commands[name]
		if c.Calls != b.Calls {
			d.Commands[name] = Command{Calls: c.Calls - b.Calls, Usec: c.Usec - b.Usec}
		}
	}
	return d
}

// Calls is the number of commands executed, every command but INFO.
func (d Diff) Calls() int64 {
	var n int64
	for _, c := range d.Commands {
		n += c.Calls
	}
	return n
}

// Usec is the server's time in commands, every command but INFO.
func (d Diff) Usec() int64 {
	var n int64
	for _, c := range d.Commands {
		n += c.Usec
	}
	return n
}

// Latency is a command's execution times as the server measured them
// (LATENCY HISTOGRAM, Redis 7): Counts[i] executions took at most
// Bounds[i] µs, cumulative, on power-of-2 bounds.
type Latency struct {
	Bounds, Counts []int64
}

// ReadLatency reads one command's latency histogram; empty when the
// server has run none.
func ReadLatency(ctx context.Context, c redis.UniversalClient, command string) (Latency, error) {
	v, err := c.Do(ctx, "latency", "histogram", command).Result()
	if err != nil {
		return Latency{}, fmt.Errorf("redis latency histogram %s: %w", command, err)
	}
	// RESP3 answers maps, RESP2 flat arrays of keys and values.
	pairs := func(v any) []any {
		switch x := v.(type) {
		case []any:
			return x
		case map[any]any:
			out := make([]any, 0, 2*len(x))
			for k, v := range x {
				out = append(out, k, v)
			}
			return out
		}
		return nil
	}
	var l Latency
	cmd := pairs(v)
	if len(cmd) < 2 {
		return l, nil
	}
	fields := pairs(cmd[1])
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] != "histogram_usec" {
			continue
		}
		h := pairs(fields[i+1])
		for j := 0; j+1 < len(h); j += 2 {
			b, okb := h[j].(int64)
			n, okn := h[j+1].(int64)
			if !okb || !okn {
				return Latency{}, fmt.Errorf("redis latency histogram %s: bucket %v: %v", command, h[j], h[j+1])
			}
			l.Bounds, l.Counts = append(l.Bounds, b), append(l.Counts, n)
		}
	}
	// A map has no order; the counts grow with the bounds.
	idx := make([]int, len(l.Bounds))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(l.Bounds[a], l.Bounds[b]) })
	s := Latency{Bounds: make([]int64, len(idx)), Counts: make([]int64, len(idx))}
	for i, j := range idx {
		s.Bounds[i], s.Counts[i] = l.Bounds[j], l.Counts[j]
	}
	return s, nil
}

// Quantile returns the bound (µs) of the bucket that holds the q-th
// quantile of the executions between before and l, 0 when there were
// none.
func (l Latency) Quantile(before Latency, q float64) int64 {
	if len(l.Bounds) == 0 {
		return 0
	}
	// A reading lists the buckets that hold executions; one it leaves
	// out holds as many as the bucket below it.
	at := func(x Latency, b int64) int64 {
		var n int64
		for i, xb := range x.Bounds {
			if xb <= b {
				n = x.Counts[i]
			}
		}
		return n
	}
	last := len(l.Bounds) - 1
	total := l.Counts[last] - at(before, l.Bounds[last])
	if total <= 0 {
		return 0
	}
	want := max(int64(math.Ceil(q*float64(total))), 1)
	for i, b := range l.Bounds {
		if l.Counts[i]-at(before, b) >= want {
			return b
		}
	}
	return l.Bounds[last]
}
