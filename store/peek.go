package store

import (
	"context"
	"time"
)

// Peeker reads what a store knows of keys without recording anything: the
// campaign, volumes and global vote tallies an Observe of the keys with no
// recipient returns (such an Observe writes no pointer and no count), as
// of at (zero: now). milterd explain uses it against the daemon's
// configured store, which must not change because somebody asked.
// Result.UserVotes and OwnVotes stay empty.
//
// Read-only means no counts, pointers or sightings change. Like Observe,
// a vote tally older than the vote horizon is rebuilt when read, and
// Redis may refresh the cached cardinality PFCOUNT keeps inside a
// HyperLogLog.
type Peeker interface {
	Peek(ctx context.Context, keys []string, at time.Time) (Result, error)
}

// Peek implements Peeker.
func (e *Embedded) Peek(ctx context.Context, keys []string, at time.Time) (Result, error) {
	return e.observeAs(ctx, "peek", Observation{Keys: keys, Time: at})
}

// Peek implements Peeker: one read-only script call on a single server
// (the observe script without recipients), the read round trip and the
// campaign's count on a cluster.
func (r *Redis) Peek(ctx context.Context, keys []string, at time.Time) (Result, error) {
	return r.observeAs(ctx, "peek", Observation{Keys: keys, Time: at})
}
