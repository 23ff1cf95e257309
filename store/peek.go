package store

import (
	"context"
	"time"
)

// Peeker reads what a store knows of keys without recording anything: the
// campaign the keys point to, its volume and the global vote tallies, as
// of at (zero: now). milterd explain uses it against the daemon's
// configured store, which must not change because somebody asked.
// Result.UserVotes and OwnVotes stay empty.
//
// It is Observe without recipients, which the campaign model (model.go,
// script.lua) runs without writing: no pointer, count or campaign is
// written when a message has no recipient. Housekeeping may still happen
// (a stale vote tally rebuilt, as Observe does), never a change of what
// the store holds.
type Peeker interface {
	Peek(ctx context.Context, keys []string, at time.Time) (Result, error)
}

// Peek implements Peeker.
func (e *Embedded) Peek(ctx context.Context, keys []string, at time.Time) (Result, error) {
	return e.Observe(ctx, Observation{Keys: keys, Time: at})
}

// Peek implements Peeker.
func (r *Redis) Peek(ctx context.Context, keys []string, at time.Time) (Result, error) {
	return r.Observe(ctx, Observation{Keys: keys, Time: at})
}
