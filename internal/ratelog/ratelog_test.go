package ratelog

import (
	"testing"
	"time"
)

func TestSampler(t *testing.T) {
	s := Sampler{Every: time.Minute}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		at      time.Duration
		ok      bool
		skipped int
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{30 * time.Second, false, 0},
		{61 * time.Second, true, 2},
		{62 * time.Second, false, 0},
		{3 * time.Minute, true, 1},
	} {
		skipped, ok := s.Allow(t0.Add(step.at))
		if ok != step.ok || skipped != step.skipped {
			t.Errorf("at %v: Allow = %d, %v; want %d, %v", step.at, skipped, ok, step.skipped, step.ok)
		}
	}
}
