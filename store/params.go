package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/dchest/siphash"
)

// Defaults for Params.
const (
	DefaultWindow      = 24 * time.Hour
	DefaultBuckets     = 4
	DefaultVoteHorizon = 180 * 24 * time.Hour
	DefaultExactLimit  = 100
)

// Limits on one call, so a hostile or broken message cannot make a store
// call unbounded.
const (
	MaxKeys       = 256    // keys per Observation or Vote
	MaxRecipients = 100000 // recipients per Observation: the daemon's default limits.max_recipients
	MaxKeyLen     = 512    // bytes per signature id
)

// Params are the counting and voting parameters every implementation
// shares. All processes sharing one store must use the same Window, Buckets
// and Secret (the Redis store checks this, see the package doc).
type Params struct {
	// Window is the sliding window volumes are counted over. Default 24h.
	Window time.Duration
	// Buckets splits the window into time buckets; old buckets fall out of
	// the count as a whole. More buckets make the window sharper and cost
	// more keys per counted signature. Default 4, at most 24.
	Buckets int
	// VoteHorizon is how long a vote counts after it was cast. Default 180
	// days.
	VoteHorizon time.Duration
	// ExactLimit is the number of distinct recipients per campaign counted
	// exactly before the count switches to HyperLogLog. Default 100 (the
	// Redis store lowers it to fit the server's listpack limit; the embedded
	// store allows up to 100000).
	ExactLimit int
	// Secret keys the pseudonyms of recipients and voters (SipHash-2-4), so
	// the store never holds an address and a reader of the store cannot test
	// a guessed address. Empty means a built-in constant key: addresses are
	// still not stored in clear, but a guess can be checked. Changing it
	// makes existing votes unreachable and recounts recipients for one
	// window.
	Secret []byte
	// Now is the clock used when an Observation or Vote has a zero Time.
	// Default time.Now.
	Now func() time.Time
}

// counting holds Params resolved into what the implementations use.
type counting struct {
	Params
	bucketLen time.Duration
	nb        int    // buckets read per count: Buckets + 1
	k0, k1    uint64 // SipHash key of recipient pseudonyms
	keyID     string // fingerprint of the key, safe to store
}

func (p Params) resolve() (counting, error) {
	if p.Window == 0 {
		p.Window = DefaultWindow
	}
	if p.Buckets == 0 {
		p.Buckets = DefaultBuckets
	}
	if p.VoteHorizon == 0 {
		p.VoteHorizon = DefaultVoteHorizon
	}
	if p.ExactLimit == 0 {
		p.ExactLimit = DefaultExactLimit
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	var errs []error
	if p.Window < time.Second {
		errs = append(errs, fmt.Errorf("window %v: must be at least 1s", p.Window))
	}
	if p.Buckets < 1 || p.Buckets > 24 {
		errs = append(errs, fmt.Errorf("buckets %d: must be between 1 and 24", p.Buckets))
	}
	if p.VoteHorizon < time.Second {
		errs = append(errs, fmt.Errorf("vote horizon %v: must be at least 1s", p.VoteHorizon))
	}
	if p.ExactLimit < 1 || p.ExactLimit > 100000 {
		errs = append(errs, fmt.Errorf("exact limit %d: must be between 1 and 100000", p.ExactLimit))
	}
	if len(errs) > 0 {
		return counting{}, errors.Join(errs...)
	}
	c := counting{Params: p, nb: p.Buckets + 1}
	c.bucketLen = p.Window / time.Duration(p.Buckets)
	if c.bucketLen < time.Millisecond {
		return counting{}, fmt.Errorf("window %v over %d buckets: bucket shorter than 1ms", p.Window, p.Buckets)
	}
	// Whole milliseconds, because Redis TTLs are in milliseconds.
	c.bucketLen = c.bucketLen.Truncate(time.Millisecond)
	key := p.Secret
	if len(key) == 0 {
		key = []byte("bulkmilter store v1 default pseudonym key")
	}
	sum := sha256.Sum256(append([]byte("bulkmilter store pseudonym key\x00"), key...))
	c.k0 = binary.LittleEndian.Uint64(sum[0:8])
	c.k1 = binary.LittleEndian.Uint64(sum[8:16])
	id := sha256.Sum256(append([]byte("bulkmilter store key id\x00"), sum[:16]...))
	c.keyID = hex.EncodeToString(id[:8])
	return c, nil
}

// bucket returns the index of the time bucket t falls in.
func (c *counting) bucket(t time.Time) int64 {
	n := t.UnixMilli()
	l := c.bucketLen.Milliseconds()
	b := n / l
	if n < 0 && n%l != 0 {
		b-- // floor, not truncation, for times before 1970
	}
	return b
}

// ttl is how long the keys of bucket b must live, seen from time t: until
// the end of the last window that includes b (bucket b+Buckets), plus a
// grace period for clock skew between hosts.
func (c *counting) ttl(t time.Time, b int64) time.Duration {
	end := time.UnixMilli((b + int64(c.nb)) * c.bucketLen.Milliseconds())
	grace := min(c.bucketLen/8, 5*time.Minute)
	return end.Sub(t) + grace
}

// pseudonym is the 48-bit keyed hash standing for a recipient or voter.
// 48 bits keep the first-sighting records small; two distinct recipients
// of one signature collide with probability n²/2⁴⁹.
type pseudonym uint64

const pseudonymLen = 6

func (c *counting) pseudonym(who string) pseudonym {
	s := normalise(who)
	return pseudonym(siphash.Hash(c.k0, c.k1, []byte(s)) >> 16)
}

// bytes returns the pseudonym as the 6-byte big-endian string used in
// Redis and in files.
func (p pseudonym) bytes() string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(p))
	return string(b[2:])
}

func (p pseudonym) String() string { return hex.EncodeToString([]byte(p.bytes())) }

func pseudonymFromBytes(s string) (pseudonym, bool) {
	if len(s) != pseudonymLen {
		return 0, false
	}
	var b [8]byte
	copy(b[2:], s)
	return pseudonym(binary.BigEndian.Uint64(b[:])), true
}

// ParsePseudonym parses the 12-hex-digit form of a voter pseudonym as
// listed in VoteEntry.VoterID.
func parsePseudonymHex(s string) (pseudonym, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != pseudonymLen {
		return 0, fmt.Errorf("voter id %q: want %d hex digits", s, 2*pseudonymLen)
	}
	p, _ := pseudonymFromBytes(string(b))
	return p, nil
}

// normalise is applied to recipients and voters before hashing, so both
// paths agree even if a caller forgets: surrounding space and case do not
// make a different person.
func normalise(s string) string {
	return strings.ToLower(strings.TrimSpace(s))
}

// sigHash is the unkeyed 64-bit hash of a signature id (ids are already
// keyed hashes). Its top 14 bits choose the Redis hash tag, its low 48 bits
// are the first-sighting field.
func sigHash(id string) uint64 { return xxhash.Sum64String(id) }

// uniq returns the first of each id, in order.
func uniq(keys []string) []string {
	ids, _ := uniqSigs(keys, nil, nil)
	return ids
}

// uniqSigs returns the first of each id, in order, with each id's sigHash
// beside it: the hash the embedded store's pointer tables need anyway
// finds the duplicates, through a small table on the stack, instead of a
// map of the strings (a message has ~40 keys; the map was two allocations
// and a second hash of every id). They are appended to ids[:0] and
// sigs[:0], whose arrays are reused when they have room.
func uniqSigs(keys []string, ids []string, sigs []uint64) ([]string, []uint64) {
	ids = slices.Grow(ids[:0], len(keys))
	sigs = slices.Grow(sigs[:0], len(keys))
	var small [128]int32 // index+1 into ids; 0 is empty
	size := len(small)
	for size < 2*len(keys) {
		size *= 2
	}
	tab := small[:]
	if size > len(small) {
		tab = make([]int32, size)
	}
	mask := uint64(size - 1)
next:
	for _, k := range keys {
		h := sigHash(k)
		for i := h & mask; ; i = (i + 1) & mask {
			j := tab[i]
			if j == 0 {
				tab[i] = int32(len(ids) + 1)
				ids = append(ids, k)
				sigs = append(sigs, h)
				continue next
			}
			if sigs[j-1] == h && ids[j-1] == k {
				continue next
			}
		}
	}
	return ids, sigs
}

// checkKeys validates the signature ids of a call.
func checkKeys(keys []string) error {
	if len(keys) > MaxKeys {
		return fmt.Errorf("%d keys: at most %d per call", len(keys), MaxKeys)
	}
	for i, k := range keys {
		if k == "" {
			return fmt.Errorf("key %d is empty", i)
		}
		if len(k) > MaxKeyLen {
			return fmt.Errorf("key %d: %d bytes, at most %d", i, len(k), MaxKeyLen)
		}
	}
	return nil
}

// recipients turns an observation's recipients into distinct pseudonyms,
// remembering which recipient strings map to each (for UserVotes).
type rcptSet struct {
	ids   []pseudonym
	names [][]string // names[i]: the recipient strings of ids[i]
}

func (c *counting) recipients(rs []string) (rcptSet, error) {
	if len(rs) > MaxRecipients {
		return rcptSet{}, fmt.Errorf("%d recipients: at most %d per call", len(rs), MaxRecipients)
	}
	var set rcptSet
	idx := make(map[pseudonym]int, len(rs))
	for j, r := range rs {
		if normalise(r) == "" {
			continue
		}
		p := c.pseudonym(r)
		i, ok := idx[p]
		if !ok {
			idx[p] = len(set.ids)
			set.ids = append(set.ids, p)
			// Most ids have one string: rs's own, capped so that an
			// append copies (a slice of its own was an object each).
			set.names = append(set.names, rs[j:j+1:j+1])
			continue
		}
		set.names[i] = append(set.names[i], r)
	}
	return set, nil
}

// voteCode is how a vote kind is written in stores and files.
func voteCode(k VoteKind) (byte, error) {
	switch k {
	case VoteNotBulk:
		return 'n', nil
	case VoteBulk:
		return 'b', nil
	case VoteNone:
		return 0, nil
	}
	return 0, fmt.Errorf("unknown vote kind %d", k)
}

// check validates a vote as both stores take it and returns its code.
func (v Vote) check() (byte, error) {
	if err := checkKeys(v.Keys); err != nil {
		return 0, err
	}
	code, err := voteCode(v.Kind)
	if err != nil {
		return 0, err
	}
	if normalise(v.Voter) == "" {
		return 0, errors.New("empty voter")
	}
	return code, nil
}

func voteFromCode(b byte) VoteKind {
	switch b {
	case 'n':
		return VoteNotBulk
	case 'b':
		return VoteBulk
	}
	return VoteNone
}

// mergeUserVote keeps the most recent of a recipient's votes over several
// keys.
type userVote struct {
	kind VoteKind
	at   int64 // unix seconds
}

// setOwnVote records names' vote on the key at position i of n keys.
func setOwnVote(dst map[string][]VoteKind, names []string, n, i int, k VoteKind) {
	for _, name := range names {
		ks := dst[name]
		if ks == nil {
			ks = make([]VoteKind, n)
			dst[name] = ks
		}
		ks[i] = k
	}
}

func mergeUserVotes(dst map[string]VoteKind, when map[string]int64, names []string, v userVote) {
	for _, n := range names {
		if t, ok := when[n]; ok && t > v.at {
			continue
		}
		when[n] = v.at
		dst[n] = v.kind
	}
}
