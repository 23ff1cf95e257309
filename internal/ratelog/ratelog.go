// Package ratelog keeps repeated log lines from flooding the log: during a
// Redis outage or under a stream of forged headers, one line per period
// says what happens and how often.
//
// It imports nothing of bulkmilter.
package ratelog

import (
	"sync"
	"time"
)

// Sampler lets one line through per period and counts the others. The zero
// value lets every line through; set Every.
type Sampler struct {
	Every time.Duration

	mu     sync.Mutex
	last   time.Time
	missed int
}

// Allow reports whether to log now, and how many lines were held back since
// the last one that was let through.
func (s *Sampler) Allow(now time.Time) (skipped int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.last.IsZero() && now.Sub(s.last) < s.Every {
		s.missed++
		return 0, false
	}
	skipped = s.missed
	s.last, s.missed = now, 0
	return skipped, true
}
