// Package heapfloor keeps the Go collector from running more often than a
// heap of a given size needs.
//
// With GOGC=100 the collector runs each time the heap has grown by what
// was live after the last collection. The milter's live heap is small
// with Redis or a young embedded store (about 10 MB in the bench), while
// a message allocates 45–65 KB: a collection every ~200 messages, 4–6 per
// 1,000, about 20 µs of the milter's CPU a message and a stop-the-world
// pause each (docs/performance.md, "Eighth pass"). Keep raises GOGC while
// the live heap is under half the floor, so that the heap may grow to the
// floor before a collection; above that GOGC is 100, as without it, so a
// large embedded store's heap is not multiplied. GOMEMLIMIT, when set,
// still bounds the heap.
package heapfloor

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Default is the floor the daemon keeps: 64 MiB of heap before a
// collection, whatever little is live.
const Default = 64 << 20

// maxPercent bounds GOGC: a live heap of 4 MiB may still grow to 64 MiB.
const maxPercent = 1500

// Keep sets GOGC from the live heap every interval, until ctx ends, and
// then sets it back to 100. It does nothing when GOGC is set in the
// environment: the operator's choice stands.
func Keep(ctx context.Context, floor uint64, every time.Duration) {
	if os.Getenv("GOGC") != "" {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	set := func() int {
		metrics.Read(sample)
		p := Percent(sample[0].Value.Uint64(), floor)
		debug.SetGCPercent(p)
		return p
	}
	last := set()
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				debug.SetGCPercent(100)
				return
			case <-t.C:
			}
			metrics.Read(sample)
			// Set only on a change of an eighth or more: each call
			// recomputes the collector's pacing.
			if p := Percent(sample[0].Value.Uint64(), floor); p > last+last/8 || p < last-last/8 || (p == 100) != (last == 100) {
				debug.SetGCPercent(p)
				last = p
			}
		}
	}()
}

// Percent is the GOGC that lets a heap with live bytes grow to floor
// before its next collection: never below 100, at most maxPercent.
func Percent(live, floor uint64) int {
	if live == 0 || 2*live >= floor {
		return 100
	}
	return int(min(max((floor-live)*100/live, 100), maxPercent))
}
