// Package store keeps the volume counters and the feedback votes behind the
// bulk verdict: for each signature key, how many distinct recipients got a
// message with that key within a sliding time window, and which users voted
// a signature "bulk" or "not bulk".
//
// Two implementations share one contract (tested by one conformance suite):
// an embedded store for a single host, the zero-configuration default, and
// Redis (a single server, Sentinel or Cluster) shared by several MTAs.
//
// Keys handed to a store are opaque signature ids (for example
// "v1:imatch.3:00ab…"); the store owns how they are laid out in Redis.
package store

import (
	"context"
	"errors"
	"time"
)

// Observation is one message seen by the filter.
type Observation struct {
	Keys       []string  // signature ids of the message
	Recipients []string  // envelope recipients, normalised (lower-case address)
	Time       time.Time // when the message was seen; zero means now
}

// Result is what a store knows about an observation's keys after recording
// it.
type Result struct {
	// Volumes holds, for each key in Observation.Keys, the number of distinct
	// recipients that got a message with that key within the window,
	// including this message's recipients.
	Volumes []int64
	// Votes holds, for each key, the global feedback tallies.
	Votes []Tally
	// UserVotes holds the votes the message's own recipients cast on any of
	// its keys, by recipient. Recipients without a vote are absent.
	UserVotes map[string]VoteKind
}

// Tally counts distinct voters on one key.
type Tally struct {
	NotBulk int64
	Bulk    int64
}

// VoteKind is what a user said about a message.
type VoteKind int8

// Vote kinds.
const (
	VoteNone    VoteKind = 0
	VoteNotBulk VoteKind = 1
	VoteBulk    VoteKind = 2
)

// String returns "not-bulk", "bulk" or "none".
func (v VoteKind) String() string {
	switch v {
	case VoteNotBulk:
		return "not-bulk"
	case VoteBulk:
		return "bulk"
	}
	return "none"
}

// Vote is one user's feedback on the signatures of one message.
type Vote struct {
	Keys  []string
	Voter string // the voting user (login or address), normalised
	Kind  VoteKind
	Time  time.Time // zero means now
}

// ErrUnavailable wraps errors that mean the store cannot answer now (down,
// timed out, overloaded). Callers apply their failure policy to it.
var ErrUnavailable = errors.New("store unavailable")

// Store is the contract every implementation meets. Consumers should define
// the smaller interface they need instead of depending on this one.
type Store interface {
	// Observe records the observation and returns what is known about its
	// keys, in one round trip for network stores. Recording is idempotent
	// for a given (key, recipient) pair within a window: retrying a timed
	// out call does not count a recipient twice.
	Observe(ctx context.Context, o Observation) (Result, error)
	// RecordVote stores a user's vote on a message's keys.
	RecordVote(ctx context.Context, v Vote) error
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
	// Close releases the store's resources, persisting state where the
	// store persists.
	Close() error
}
