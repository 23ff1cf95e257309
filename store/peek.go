package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Peeker reads what a store knows of keys without recording anything: the
// volumes and global vote tallies an Observe of the keys with no new
// recipient would return, as of at (zero: now). milterd explain uses it
// against the daemon's configured store, which must not change because
// somebody asked. Result.UserVotes, OwnVotes and Campaign stay empty.
//
// Read-only means no data changes: counts, sightings, votes and their
// expiry stay as they were. Stale vote tallies are reported as stored,
// not rebuilt (Observe rebuilds them), and Redis may refresh the cached
// cardinality PFCOUNT keeps inside a HyperLogLog.
type Peeker interface {
	Peek(ctx context.Context, keys []string, at time.Time) (Result, error)
}

// Peek implements Peeker.
func (e *Embedded) Peek(ctx context.Context, keys []string, at time.Time) (res Result, err error) {
	start := time.Now()
	defer func() { e.observeOp("peek", start, err) }()
	if e.closed.Load() {
		return Result{}, fmt.Errorf("peek: %w", errClosed)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("peek: %w: %w", ErrUnavailable, err)
	}
	if err := checkKeys(keys); err != nil {
		return Result{}, fmt.Errorf("peek: %w", err)
	}
	if at.IsZero() {
		at = e.c.Now()
	}
	cb := e.c.bucket(at)
	res = Result{Volumes: make([]int64, len(keys)), Votes: make([]Tally, len(keys))}
	for i, k := range keys {
		h := sigHash(k)
		sh := e.shard(h)
		sh.mu.Lock()
		res.Volumes[i] = e.peekKey(sh, h, cb)
		sh.mu.Unlock()
	}
	vb := &e.votes
	vb.mu.RLock()
	for i, k := range keys {
		if sv := vb.bySig[k]; sv != nil {
			res.Votes[i] = Tally{NotBulk: sv.nb, Bulk: sv.b}
		}
	}
	vb.mu.RUnlock()
	return res, nil
}

// peekKey is observeKey without recipients and without its housekeeping;
// the caller holds sh.mu.
func (e *Embedded) peekKey(sh *eshard, sig uint64, cb int64) int64 {
	nb := int64(e.c.nb)
	oldest := cb - nb + 1
	if ctr := sh.ctr[sig]; ctr != nil && ctr.last >= oldest {
		if ctr.exact == nil {
			return e.hllCount(sh, ctr, oldest) // writes sh.scratch only
		}
		live := 0
		for _, c := range ctr.counts {
			if c.id >= oldest {
				live += c.n
			}
		}
		return int64(live)
	}
	for b := cb; b >= oldest; b-- {
		slot := &sh.fs[mod(b, nb)]
		if slot.id != b || slot.t == nil {
			continue
		}
		if _, ok := slot.t.get(sig); ok {
			return 1
		}
	}
	return 0
}

// Peek implements Peeker with read commands only, in one pipeline: per
// key, the exact set's counts or the HyperLogLog marker, the
// first-sighting strings, the HyperLogLogs' count and the vote tally (the
// script's observe path read without recipients).
func (r *Redis) Peek(ctx context.Context, keys []string, at time.Time) (res Result, err error) {
	start := time.Now()
	defer func() { r.observe("peek", start, err) }()
	if err := checkKeys(keys); err != nil {
		return Result{}, fmt.Errorf("peek: %w", err)
	}
	res = Result{Volumes: make([]int64, len(keys)), Votes: make([]Tally, len(keys))}
	if len(keys) == 0 {
		return res, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	lim, err := r.limits(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("peek: %w", err)
	}
	if at.IsZero() {
		at = r.c.Now()
	}
	cb := r.c.bucket(at)
	nb := r.c.nb
	type reads struct {
		sk    sigKeys
		mode  *redis.SliceCmd
		fs    *redis.SliceCmd
		count *redis.IntCmd
		tally *redis.StringCmd
	}
	rs := make([]reads, len(keys))
	// A missing vote hash answers redis.Nil: each command's own error is
	// checked below, not the pipeline's first.
	r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range keys {
			sk := r.sigKeys(id, cb, uint64(lim.FirstSightSplit))
			rs[i] = reads{sk: sk,
				mode:  p.HMGet(ctx, sk.keys[nb], "#", "h"),
				fs:    p.MGet(ctx, sk.keys[:nb]...),
				count: p.PFCount(ctx, sk.keys[nb+1:2*nb+1]...),
				tally: p.HGet(ctx, sk.keys[2*nb+1], "#"),
			}
		}
		return nil
	})
	for _, rd := range rs {
		for _, c := range []redis.Cmder{rd.mode, rd.fs, rd.count, rd.tally} {
			if err := c.Err(); err != nil && err != redis.Nil {
				return Result{}, fmt.Errorf("peek %d keys: %w", len(keys), classify(err))
			}
		}
	}
	oldest := cb - int64(nb) + 1
	for i, rd := range rs {
		mode := rd.mode.Val()
		switch {
		case len(mode) == 2 && mode[1] != nil:
			res.Volumes[i] = rd.count.Val()
		case len(mode) == 2 && mode[0] != nil:
			s, _ := mode[0].(string)
			res.Volumes[i] = exactLive(s, oldest)
		default:
			for _, v := range rd.fs.Val() {
				if s, _ := v.(string); hasRecord(s, rd.sk.field) {
					res.Volumes[i] = 1
					break
				}
			}
		}
		res.Votes[i] = parseTally(rd.tally.Val())
	}
	return res, nil
}

// exactLive sums the exact set's per-bucket counts ("bucket:count ...")
// over the window, as the script's exact_live does.
func exactLive(s string, oldest int64) int64 {
	var live int64
	for _, f := range strings.Fields(s) {
		b, c, ok := strings.Cut(f, ":")
		bk, err1 := strconv.ParseInt(b, 10, 64)
		n, err2 := strconv.ParseInt(c, 10, 64)
		if ok && err1 == nil && err2 == nil && bk >= oldest {
			live += n
		}
	}
	return live
}

// hasRecord reports whether a first-sighting string holds a record of the
// signature (its 4-byte field at an 8-byte record boundary).
func hasRecord(s, field string) bool {
	for i := 0; i+8 <= len(s); i += 8 {
		if s[i:i+4] == field {
			return true
		}
	}
	return false
}

// parseTally reads a vote hash's "notbulk,bulk,oldest" field.
func parseTally(s string) Tally {
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return Tally{}
	}
	n, _ := strconv.ParseInt(parts[0], 10, 64)
	b, _ := strconv.ParseInt(parts[1], 10, 64)
	return Tally{NotBulk: n, Bulk: b}
}
