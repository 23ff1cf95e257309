package store

import (
	"context"
	"time"
)

// Peeker reads what a store knows of keys without recording anything: the
// campaign, volumes and global vote tallies an Observe of the keys with no
// new recipient would return, as of at (zero: now). milterd explain uses
// it against the daemon's configured store, which must not change because
// somebody asked. Result.UserVotes and OwnVotes stay empty.
//
// Read-only means no data changes: counts, pointers, campaigns, votes and
// their expiry stay as they were (the embedded store may drop what left
// the window, as any read does), and Redis may refresh the cached
// cardinality PFCOUNT keeps inside a HyperLogLog.
type Peeker interface {
	Peek(ctx context.Context, keys []string, at time.Time) (Result, error)
}

// Peek implements Peeker: an observation without recipients, which the
// campaign model answers without writing (model.go: pointers, campaigns
// and counts are written only for a message with recipients).
func (e *Embedded) Peek(ctx context.Context, keys []string, at time.Time) (Result, error) {
	return e.observeAs(ctx, "peek", Observation{Keys: keys, Time: at})
}

// Peek implements Peeker as Embedded.Peek does: the script's read path,
// without recipients (on a cluster, the first round trip only).
func (r *Redis) Peek(ctx context.Context, keys []string, at time.Time) (Result, error) {
	return r.observeAs(ctx, "peek", Observation{Keys: keys, Time: at})
}
