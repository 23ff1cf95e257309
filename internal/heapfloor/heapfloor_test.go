package heapfloor

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, floor uint64
		want        int
	}{
		{0, Default, 100},              // nothing read yet
		{1 * mib, Default, maxPercent}, // bounded
		{4 * mib, Default, 1500},
		{8 * mib, Default, 700},
		{16 * mib, Default, 300},
		{31 * mib, Default, 106},
		{32 * mib, Default, 100}, // half the floor: as without it
		{500 * mib, Default, 100},
		{8 * mib, 0, 100}, // no floor
	} {
		if got := Percent(tc.live, tc.floor); got != tc.want {
			t.Errorf("Percent(%d MiB, %d MiB) = %d, want %d", tc.live/mib, tc.floor/mib, got, tc.want)
		}
	}
}

func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Keep raises GOGC for this test's small heap at once, and sets it back to
// 100 when its context ends; with GOGC in the environment it leaves it.
func TestKeep(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	runtime.GC()
	ctx, cancel := context.WithCancel(context.Background())
	Keep(ctx, Default, 10*time.Millisecond)
	if got := gogc(); got <= 100 {
		t.Errorf("GOGC %d with a small live heap, want above 100", got)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for gogc() != 100 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := gogc(); got != 100 {
		t.Errorf("GOGC %d after the context ended, want 100", got)
	}

	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	Keep(context.Background(), Default, time.Hour)
	if got := gogc(); got != 150 {
		t.Errorf("GOGC %d with GOGC=150 in the environment, want 150", got)
	}
}
