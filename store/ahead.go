package store

import (
	"sync/atomic"
	"time"
)

// Times ahead of the store's clock (issue 15).
//
// A store counts an observation in the bucket of its time. The embedded
// store keeps its time buckets in rings (one slot a bucket, indexed by
// the bucket mod Buckets+1) whose slot keeps the newer bucket: an
// observation dated years ahead (a forged Date replayed by the lab or
// `milterd scan -time date`) took the present's slot in every shard its
// keys fell in, and the present's writes there were refused from then on
// (498,044 refused pointer writes in one replay of trec07p). A host clock
// stepped back (NTP step, VM restore) leaves the same thing behind: the
// buckets written before the step are ahead of the clock after it.
//
// Two rules, both against the store's own clock (Params.Now):
//
//   - An observation or vote dated more than one bucket ahead of the
//     clock is counted at the store's present: the latest time it counted
//     (so that a replay of old mail keeps counting in its own past), or
//     its clock when that is earlier or nothing was counted. It is not
//     refused: a forged future Date is a trait of spam, and refusing it
//     would let a sender opt out of counting.
//   - A bucket of a ring more than one bucket ahead of the clock is
//     invisible to reads (a read looks at the window up to the present's
//     bucket) and only blocks writes: the present takes its slot, and the
//     sweep drops it.
//
// The reference is the clock and not the latest time counted alone: a
// replay counts in the past (the lab's corpora are years old) and may jump
// ahead by days between two messages, as a daemon does after a quiet
// weekend; only the clock tells such a jump from a forged date without
// stalling the store in its past. So a replay of 2007 mail still lets a
// message dated 2020 take a slot of its present: replays clamp their Date
// clock themselves (detect.DateTime).
//
// The Redis store applies the first rule in Go before its script runs. Its
// pointer strings keep one bucket current and the window's earlier buckets
// as sections; a current string ahead of the present is not read, and the
// present's writes go to its sections (not refused, one rewrite of the
// older string each), until the string expires a window after it was
// written: its TTLs run on real time, so no bucket outlives its window.

// AheadObserver is an Observer told of times a store did not take as
// given (see above), for a metric and a debug log. what is "observation"
// or "vote" (n = 1: given is the time the caller passed, counted the time
// it was counted at) or "bucket" (n entries of buckets ahead of the clock
// dropped; given is the bucket's start, counted the clock).
type AheadObserver interface {
	ObserveAhead(what string, n int, given, counted time.Time)
}

// present is a store's latest counted time, for the first rule above.
type present struct {
	latest atomic.Int64 // unix ms of the newest time counted (0: none)
}

// note records a time counted.
func (p *present) note(t time.Time) {
	ms := t.UnixMilli()
	for {
		old := p.latest.Load()
		if old != 0 && old >= ms || p.latest.CompareAndSwap(old, ms) {
			return
		}
	}
}

// now is the store's present at clock: the latest time counted, or the
// clock when that is earlier (a clock stepped back) or none was counted.
func (p *present) now(clock time.Time) time.Time {
	l := p.latest.Load()
	if l == 0 || l > clock.UnixMilli() {
		return clock
	}
	return time.UnixMilli(l)
}

// countAt returns the time a store counts an observation or vote dated t
// at (zero: the clock), and whether t was more than a bucket ahead of the
// clock.
func (c *counting) countAt(p *present, t time.Time) (time.Time, bool) {
	clock := c.Now()
	if t.IsZero() {
		p.note(clock)
		return clock, false
	}
	if t.Sub(clock) > c.bucketLen {
		return p.now(clock), true
	}
	p.note(t)
	return t, false
}

// aheadBucket returns the last bucket that is not ahead of the clock
// (the second rule above).
func (c *counting) aheadBucket() int64 { return c.bucket(c.Now().Add(c.bucketLen)) }

// noteAhead reports to o, when it is an AheadObserver.
func noteAhead(o Observer, what string, n int, given, counted time.Time) {
	if ao, ok := o.(AheadObserver); ok && n > 0 {
		ao.ObserveAhead(what, n, given, counted)
	}
}

// written is the Redis store's image of the embedded store's rings (one
// slot a bucket, Buckets+1 of them; the message slots' ring, slots.go, is
// store-wide too): the newest bucket this store wrote in each slot. A
// bucket whose slot holds a newer one that is not ahead of the clock is
// hidden: the embedded store no longer holds its pointers, so a read
// finds none there, and a message of such a bucket (dated a window or
// more before what was written since: a wrong Date replayed, a late
// retry) writes none and keeps no first sighting, as the embedded store's
// rings refuse it. Kept per process, as the embedded store's rings are; a
// Redis string holds one key's buckets and would keep and take them.
type written []atomic.Int64

// hidden returns a '0' or '1' per bucket of the window of bucket cb (nb
// buckets, oldest first): 1 for a bucket whose slot holds a newer one that
// is not after ahead (aheadBucket).
func (w written) hidden(cb int64, nb int, ahead int64) string {
	out := make([]byte, nb)
	for i := range out {
		b := cb - int64(nb) + 1 + int64(i)
		out[i] = '0'
		if supersedes(w[mod(b, int64(len(w)))].Load(), b, ahead) {
			out[i] = '1'
		}
	}
	return string(out)
}

// note records a write in bucket cb: its slot takes it unless it holds a
// newer bucket not after ahead.
func (w written) note(cb, ahead int64) {
	s := &w[mod(cb, int64(len(w)))]
	for {
		b := s.Load()
		if b == cb || supersedes(b, cb, ahead) || s.CompareAndSwap(b, cb) {
			return
		}
	}
}

// supersedes reports whether a ring slot holding bucket held has let bucket
// b go: held is newer and not ahead of the clock (ahead is the last bucket
// that is not). The one rule of the embedded store's rings
// (slotRing.take) and of the Redis store's image of them (written).
func supersedes(held, b, ahead int64) bool { return held > b && held <= ahead }
