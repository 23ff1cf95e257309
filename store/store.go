package store

import (
	"context"
	"errors"
	"time"
)

// Observation is one message seen by the filter.
type Observation struct {
	Keys       []string  // signature ids of the message
	Recipients []string  // envelope recipients (the store trims and lower-cases them again)
	Time       time.Time // when the message was seen; zero means now
	// Network is the sending network of the MTA's client, grouped
	// ("192.0.2.0/24", "2001:db8:1::/48"); "" when unknown.
	Network string
	// Sender is the envelope sender's domain, lower-cased (detect: a VERP
	// address is one publisher); "" for the null sender.
	Sender string
}

// Campaign is what a store knows of the campaign a message joined: every
// copy of a mass mailing, however edited, adds to one campaign's volume
// (issue 15). The zero value means the store does not count campaigns.
type Campaign struct {
	// ID names the campaign for its life in the window; it reveals no key.
	ID uint32
	// Recipients, Networks and Senders are the campaign's distinct
	// recipients, sending networks and envelope senders in the window,
	// this message's included.
	Recipients, Networks, Senders int64
	// First is when the campaign was first seen.
	First time.Time
	// Joined lists the indexes in Observation.Keys of the keys whose
	// evidence joined the message to the campaign; empty for a new one.
	Joined []int
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
	// its keys, by recipient as given in Observation.Recipients; when a
	// recipient voted differently on several keys, the most recent vote.
	// Recipients without a vote are absent; nil when nobody voted.
	UserVotes map[string]VoteKind
	// OwnVotes holds, for each recipient in UserVotes, that recipient's
	// vote on each key, aligned with Observation.Keys (VoteNone where she
	// did not vote), so that a vote applies to the keys it was cast on
	// without another store call. nil when nobody voted.
	OwnVotes map[string][]VoteKind
	// Campaign is the campaign the message joined or started.
	Campaign Campaign
	// CampaignVotes is the tally of the votes cast on the campaign the
	// message joined (a vote also covers the campaign of the voted
	// message: package doc, Votes); zero for a new campaign.
	CampaignVotes Tally
	// CampaignOwn holds the campaign votes of the message's own
	// recipients, by recipient as given in Observation.Recipients; nil
	// when none of them voted on the campaign.
	CampaignOwn map[string]VoteKind
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

// Vote is one user's feedback on the signatures of one message. The store
// also records it on the campaign the keys belong to when they were
// observed (CampaignVoteKey), so that it covers the campaign's later,
// edited copies.
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
//
// Errors: every error is wrapped with what was being done; errors that mean
// "cannot answer now" (timeouts, connection errors, a server loading or
// failing over, a closed store) also wrap ErrUnavailable. Other errors
// (invalid input, a server refusing the schema) do not; callers should apply
// their failure policy to any error and use errors.Is(err, ErrUnavailable)
// to tell the kinds apart in metrics.
type Store interface {
	// Observe records the observation and returns what is known about its
	// keys, in one round trip for network stores. Recording is idempotent
	// for a given (key, recipient) pair within a window: retrying a timed
	// out call does not count a recipient twice.
	Observe(ctx context.Context, o Observation) (Result, error)
	// RecordVote stores a user's vote on a message's keys, replacing that
	// user's earlier vote on them; VoteNone retracts it. Idempotent.
	RecordVote(ctx context.Context, v Vote) error
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
	// Close releases the store's resources, persisting state where the
	// store persists.
	Close() error
}

// Admin is implemented by every store for the votes command: listing and
// removing stored votes. It is not on the hot path.
type Admin interface {
	// ListVotes returns the votes matching q, at most q.Limit when set.
	ListVotes(ctx context.Context, q VoteQuery) ([]VoteEntry, error)
	// RemoveVotes deletes the votes matching q and returns how many it
	// removed. q must name at least a key, a key prefix or a voter.
	RemoveVotes(ctx context.Context, q VoteQuery) (int, error)
}

// VoteQuery selects votes for Admin. Conditions combine with AND; the zero
// value matches every vote (ListVotes only).
type VoteQuery struct {
	Keys      []string // exact signature ids
	KeyPrefix string   // signature ids starting with this
	Voter     string   // the voter's identity, normalised like recipients
	VoterID   string   // or the voter's pseudonym as listed in VoteEntry.VoterID
	Limit     int      // ListVotes: at most this many entries; 0 means no limit
}

// forRemoval checks that q selects something, as RemoveVotes requires,
// and returns it without a limit: removal takes every match.
func (q VoteQuery) forRemoval() (VoteQuery, error) {
	if len(q.Keys) == 0 && q.KeyPrefix == "" && q.Voter == "" && q.VoterID == "" {
		return q, errors.New("remove votes: name a key, a key prefix or a voter")
	}
	q.Limit = 0
	return q, nil
}

// VoteEntry is one stored vote.
type VoteEntry struct {
	Key string // signature id
	// VoterID is the voter's pseudonym (12 hex digits): stores keep a keyed
	// hash of the voter, never the identity.
	VoterID string
	// Voter is the identity when the query named it, else empty.
	Voter string
	Kind  VoteKind
	Time  time.Time // when the vote was cast, to the second
}

// Observer receives one call per store operation, for metrics and logs. It
// must be safe for concurrent use and return quickly. Operations: "observe",
// "vote", "ping", "list_votes", "remove_votes", and for the embedded store
// "save" (a periodic or final write of its file). The store package never
// imports a metrics library; the daemon plugs one in here.
type Observer interface {
	ObserveRequest(op string, d time.Duration, err error)
}

// ClusterObserver is an Observer told of each script call of a Cluster's
// primary that the server refused (a slot moved or being migrated, a node
// that will not run it) and that was sent again one call a slot: call is
// "read" or "write".
type ClusterObserver interface {
	ObserveClusterFallback(call string)
}
