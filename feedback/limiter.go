package feedback

import (
	"sync"
	"time"
)

// DefaultMaxVoters bounds the voters a Limiter tracks; about 100 bytes
// each.
const DefaultMaxVoters = 50_000

// Limiter bounds the votes of each voter: a token bucket per voter holding
// at most perHour tokens, refilled at perHour per hour, so a voter can
// cast perHour votes at once and then perHour per hour.
//
// It lives in the process. Several daemons sharing one Redis store each
// allow a voter perHour votes: the limit protects each daemon and bounds
// the votes one account can add to perHour times the number of daemons
// that receive feedback (usually the one or two submission hosts, not
// every MX). Keeping it in the store would cost a store round trip and a
// key per voter for a limit whose job is to stop floods, not to count
// exactly.
//
// Memory is bounded: at most maxVoters buckets. A full bucket is the same
// as no bucket, so those go first; if every tracked voter has voted within
// the last hour, an arbitrary one is dropped (and gets a fresh bucket next
// time), which a voter cannot choose since voters are trusted accounts.
type Limiter struct {
	mu        sync.Mutex
	perHour   float64
	maxVoters int
	buckets   map[string]*bucket
	dropped   int64
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was computed
}

// NewLimiter returns a limiter allowing perHour votes per voter per hour,
// tracking at most maxVoters voters (DefaultMaxVoters when <= 0).
func NewLimiter(perHour, maxVoters int) *Limiter {
	if maxVoters <= 0 {
		maxVoters = DefaultMaxVoters
	}
	return &Limiter{perHour: float64(perHour), maxVoters: maxVoters, buckets: map[string]*bucket{}}
}

// SetRate changes the votes per hour, keeping the voters' buckets (a
// reload must not reset everybody's limit).
func (l *Limiter) SetRate(perHour int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.perHour = float64(perHour)
}

// refill brings b up to now; the caller holds the lock.
func (l *Limiter) refill(b *bucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(l.perHour, b.tokens+d.Hours()*l.perHour)
		b.at = now
	}
}

// Allow takes one vote from voter's bucket and reports whether there was
// one.
func (l *Limiter) Allow(voter string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[voter]
	if b == nil {
		if len(l.buckets) >= l.maxVoters {
			l.makeRoom(now)
		}
		b = &bucket{tokens: l.perHour, at: now}
		l.buckets[voter] = b
	}
	l.refill(b, now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Refund gives back a vote taken by Allow that was not recorded (the
// store failed and the MTA will send the report again).
func (l *Limiter) Refund(voter string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.buckets[voter]; b != nil {
		b.tokens = min(l.perHour, b.tokens+1)
	}
}

// makeRoom drops the full buckets, or one arbitrary bucket when none is
// full; the caller holds the lock.
func (l *Limiter) makeRoom(now time.Time) {
	for v, b := range l.buckets {
		l.refill(b, now)
		if b.tokens >= l.perHour {
			delete(l.buckets, v)
		}
	}
	if len(l.buckets) < l.maxVoters {
		return
	}
	for v := range l.buckets {
		delete(l.buckets, v)
		l.dropped++
		if len(l.buckets) < l.maxVoters {
			return
		}
	}
}

// Len returns the number of voters tracked.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
