package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
)

// The campaign model (issue 15), the one counting model both stores run;
// the Redis script repeats decide in Lua and TestStoresAgree runs the same
// random streams through both stores.
//
// Every key (signature id) points to the campaign it was last seen in
// within the window. A message reads its keys' pointers and weighs, for
// each campaign they name, the evidence: each family weighs the same
// whatever its number of keys (a key weighs evidenceUnit / the number of
// the message's keys of its family). The message joins the campaign with
// the most evidence (ties: the lower ref) when that evidence reaches
// JoinEvidence and a share JoinShare of the message's whole evidence (one
// unit per family), otherwise it starts a campaign of its own. Then every
// key of the message points to that campaign. The campaign's volume is
// its distinct recipients in the window, counted by the tiers of the
// package doc.
//
// A support family (supportFamily: the term set, whose keys survive word
// substitutions but are also shared by issues of one newsletter; the
// containment family, whose single min-hashes survive padding; the line
// family, whose lines survive padding past half) weighs like any other
// among the campaigns the other families name, but names a campaign alone
// only with SupportAlone (ContainAlone, LinesAlone) of its keys: one
// chance band of a tolerant family does not start a join (measured: a
// single term-set band joining alone tagged 64 ham messages in one window
// instead of 27). The containment and line families naming one campaign
// add up (supportAdds): each brings its keys' share of its own number (3
// of ContainAlone's 6 and 2 of LinesAlone's 3 are enough together), since
// a copy with words scattered through it keeps a few keys of each and
// seldom enough of one (measured in docs/evaluation.md, "Support families
// together").
//
// One sender's template: a join that a single key carries (fewer than
// UnionKeys voting keys) to a campaign whose only envelope sender is the
// message's is weak, whatever its share. A sender's newsletter issues and
// feed items share a frame (a masthead, a "URL: … Date:" line) whose band
// of keys is an eighth of a message's evidence: a strong join, so the
// frame alone added up every issue; weak, it merges at most WeakCap+1 of
// them. The copies of an edited campaign from one sender share a different
// key each and keep joining; a campaign with other senders (a list that
// relays a spam campaign is one of its many) is not one sender's
// (measured in docs/evaluation.md, "One sender's template").
// The campaign's only sender is read from its pointers, not from the
// campaign: a main family's pointer keeps the class of the campaign's only
// known sender (senderClass) as the message that wrote it knew it, or
// classMany, so that the pointers' read tells it and a Redis Cluster
// decides between its two round trips with no call to the campaign's slot. A
// message passes the class on (nextClass): a new campaign takes its
// sender's, a join keeps the campaign's while the sender is that one or
// unknown, and another sender makes it classMany. A key the message does
// not carry keeps the class it had, so an old key may still name one
// sender after others joined (docs/evaluation.md, "The only sender in the
// pointer").
//
// Spread lines: line keys under LinesShare of the message's count all the
// same, from LinesAlone keys and LinesSpread of them, when none of them
// was last written by a message of the message's envelope sender (its
// domain: detect), and make a strong join. A line key's pointer keeps the
// class of the sender of the message that wrote it (senderClass), so that
// the pointers' read answers (no call to the campaign's slot on a Redis
// Cluster). A mass mailing that hides a short offer inside text of its own
// per copy (a news salad) comes from a new sender each copy; a newsletter's
// template lines, the minority that LinesShare keeps out, come issue after
// issue from the one publisher, which wrote them last. No sender known: no
// spread join. (Until 2026-11 the rule asked whether the sender was among
// the campaign's senders, which a Cluster read in a third round trip:
// docs/evaluation.md, "Spread lines' sender in the line pointers".)
//
// Chaining: a key shared by unrelated mail (a footer, a disclaimer, a
// list's template) would merge campaigns. A join is weak when the
// campaign's evidence is less than WeakShare of the message's whole
// evidence (10 %, measured: 25 % cost 0.2 of recall on copies padded with
// random text) (most of its keys are new, or point elsewhere); every key that
// voted in a weak join, and every key moved from one campaign to another,
// counts one weak event, and a key with WeakCap weak events stops voting
// until it leaves the window. A footer can so merge at most WeakCap
// unrelated messages into a campaign, while the copies of an edited
// campaign, which share different keys each, keep joining.
const (
	// evidenceUnit is one family's whole evidence, in integer units so
	// that Go and Lua decide alike to the last unit.
	evidenceUnit = 1000000
	// JoinEvidence is the evidence a join needs: any. Measured with
	// bulklab eval (docs/evaluation.md): a campaign whose copies are each
	// edited differently shares only a key or two with the campaign per
	// copy, and a threshold of 0.2 of a family cost 0.15–0.25 of recall on
	// the Malkin attacks; what a shared footer does instead is bounded by
	// WeakCap and measured on the ham stream.
	JoinEvidence = 1
	// JoinShare, in percent, is the least share of the message's whole
	// evidence (one unit per family it has keys of) a join needs: none,
	// for the same reason.
	JoinShare = 0
	// WeakShare, in percent: a join with less of the message's whole
	// evidence is weak.
	WeakShare = 10
	// WeakCap is the number of weak events after which a key stops voting.
	WeakCap = 4
	// SupportAlone is the number of a support family's keys that name a
	// campaign no other family names for their evidence to count
	// (measured in docs/evaluation.md: 3 lost most of the family's gain).
	SupportAlone = 2
	// ContainAlone is SupportAlone for the containment family, whose
	// keys are single min-hashes, each shared by chance more often than
	// a term-set band (measured in docs/evaluation.md, "Padded copies").
	ContainAlone = 6
	// LinesAlone is SupportAlone for the line family: a line is shared
	// by unrelated mail now and then (a template's or a list's sentence),
	// and 2 tagged list mail in a dated world (measured in
	// docs/evaluation.md, "Minority text: line keys").
	LinesAlone = 3
	// LinesShare, in percent, is the least share of the message's line
	// keys that the keys naming a campaign must be to count at all, alone
	// or beside other families: the lines of a newsletter's template (a
	// menu, promotions, the copyright) are a minority of each issue's
	// lines, where a short offer's are most of a padded copy's own lines,
	// padding paragraphs being long lines. Counted beside a template's
	// shingle, a minority of lines made a weak join strong (measured in
	// docs/evaluation.md, "Minority text: line keys").
	LinesShare = 50
	// LinesSpread, in percent, is LinesShare for a campaign whose senders
	// do not include the message's ("Spread lines" above): a short offer
	// inside changing text of similar or larger size (a news salad), its
	// lines a fifth of the copy's, from a new sender each copy. Such a
	// join is strong, so that the offer's lines keep naming the campaign
	// (measured in docs/evaluation.md, "The news salad: spread lines").
	LinesSpread = 15
	// UnionShare (in percent), UnionKeys and UnionMax: a campaign other
	// than the joined one that holds UnionShare of a strong join's whole
	// evidence, from UnionKeys voting keys or more, is counted with it
	// (decision.union): the message's recipients are counted in each and
	// its volume is the distinct recipients of them all, while its keys
	// point to the joined campaign, so later copies converge on it. A
	// campaign that split (its first copies shared too little to find
	// each other) so counts together wherever a copy names its parts; one
	// shared key (a footer) never unions, nor a weak join, nor keys that
	// stopped voting. Measured in docs/evaluation.md (a share of 10 % or
	// a single key: half the gain; two keys are what keeps list mail
	// out).
	UnionShare = 1
	UnionKeys  = 2
	UnionMax   = 3
	// campaignSetCap bounds the exact sets of a campaign's networks and
	// senders; past it the count saturates (CampaignSetCap means "at
	// least").
	CampaignSetCap = 16
	// refBits is the size of a campaign ref: a pointer packs the ref and a
	// 3-bit switch count in 32 bits, as a first sighting packs a
	// recipient's fingerprint.
	refBits = 29
	refMask = 1<<refBits - 1
	// refProbes bounds the search for a free ref when a new campaign's
	// ref is held by a live one.
	refProbes = 8
)

// ptr is a key's pointer: the campaign ref and the key's weak events
// (saturating at 7) in the low 32 bits, the class of the campaign's only
// sender (senderClass, classMany; 0: none known) in the 8 above. A
// support family's pointer keeps no class (0), but the line family's keeps
// the class of the sender of the message that wrote it ("Spread lines").
type ptr uint64

func makePtr(ref uint32, switches int) ptr { return ptr(ref&refMask)<<3 | ptr(min(switches, 7)) }
func (p ptr) ref() uint32                  { return uint32(p) >> 3 }
func (p ptr) switches() int                { return int(p & 7) }
func (p ptr) class() uint8                 { return uint8(p >> 32) }

// withClass returns p with class c.
func (p ptr) withClass(c uint8) ptr { return ptr(uint32(p)) | ptr(c)<<32 }

// classMany is the class of a campaign with more than one known sender.
const classMany = 255

// senderClass is the class a pointer keeps of envelope sender snd (fp16;
// 0, unknown: 0): two senders share one of 254 classes, and a join one
// key carries is then weak where it would be strong.
func senderClass(snd uint16) uint8 {
	if snd == 0 {
		return 0
	}
	return 1 + uint8(snd%(classMany-1))
}

// nextClass is the class a message of sender class sc writes for the
// campaign it joins, whose class its pointers read as c (a new campaign
// takes sc).
func nextClass(c, sc uint8) uint8 {
	switch {
	case c == 0:
		return sc
	case sc == 0 || sc == c:
		return c
	}
	return classMany
}

// campaignClass is the class the voting keys of the main families read
// for campaign ref: theirs when they agree, classMany when they differ.
func campaignClass(fams []string, ptrs []keyPtr, ref uint32) uint8 {
	var c uint8
	for i, kp := range ptrs {
		if !kp.found || kp.p.switches() >= WeakCap || kp.p.ref() != ref || supportFamily(fams[i]) {
			continue
		}
		switch k := kp.p.class(); {
		case k == 0:
		case c == 0:
			c = k
		case c != k:
			return classMany
		}
	}
	return c
}

// familyOf returns the family part of a store id ("s1a2b:imatch.3:00ab…"
// → "imatch"); an id without that shape is its own family's only kind
// ("" for every such id).
func familyOf(id string) string {
	i := strings.IndexByte(id, ':')
	if i < 0 {
		return ""
	}
	rest := id[i+1:]
	if j := strings.IndexByte(rest, '.'); j >= 0 {
		return rest[:j]
	}
	if j := strings.IndexByte(rest, ':'); j >= 0 {
		return rest[:j]
	}
	return ""
}

// FamilyOf is familyOf for the packages that name the families a
// campaign was joined through (Campaign.Joined indexes the keys).
func FamilyOf(id string) string { return familyOf(id) }

// newRef is the ref a message's own campaign starts with: a hash of its
// distinct ids in order, so that a retried call starts the same one; and
// the origin, 32 more bits of that hash, which tells a campaign started
// by the same keys (a retry, or a copy racing this one on a cluster) from
// another campaign that holds the ref.
//
// The ids are sorted in an array on the stack and hashed in one call over
// a stack buffer (the same hash as writing them one by one): a message's
// ids rarely pass 64 or 4 KiB, and beyond that append moves to the heap.
func newRef(ids []string) (ref, origin uint32) {
	var sorted [64]string
	var buf [4096]byte
	s := append(sorted[:0], ids...)
	slices.Sort(s)
	b := buf[:0]
	for _, id := range s {
		b = append(append(b, id...), 0)
	}
	h := xxhash.Sum64(b)
	return uint32(h >> (64 - refBits)), uint32(h)
}

// keyPtr is what a store read of one distinct key: its pointer, if any.
type keyPtr struct {
	found bool
	p     ptr
}

// decision is the outcome of decide.
type decision struct {
	ref    uint32
	cls    uint8 // the class its main families' pointers get (nextClass)
	sc     uint8 // the message's sender's class, which its line keys get
	join   bool
	weak   bool     // a weak join (WeakShare)
	union  []uint32 // other campaigns counted with ref (UnionShare), ascending
	voters []bool   // per distinct key: its pointer named ref (or a union) and voted
}

// supportAlone returns, for a support family (the package doc above),
// the number of its keys that must name a campaign no other family names
// for their evidence to count; 0 for a family that names campaigns alone.
// The term set (10 bands of 4 min-hashes) takes SupportAlone keys, the
// containment family (single min-hashes) ContainAlone, the line family
// LinesAlone.
func supportAlone(f string) int {
	switch f {
	case "terms":
		return SupportAlone
	case "contain":
		return ContainAlone
	case "lines":
		return LinesAlone
	}
	return 0
}

// supportShare returns, for a support family, the least share (percent)
// of the message's keys of the family that its keys naming a campaign
// must be to count for it, whether other families name it or not.
func supportShare(f string) int {
	if f == "lines" {
		return LinesShare
	}
	return 0
}

// supportWhole is one support family's keys naming a campaign alone
// (supportAlone) in decide's integer shares: divisible by every
// supportAlone up to 16.
const supportWhole = 720720

// supportAdds reports a support family whose keys add up with another's
// that does (decide): the containment family's single min-hashes and the
// line family's lines, of which a copy with words scattered through it
// keeps a few each. Not the term set: its bands are shared by the issues
// of one newsletter, and added to a few containment keys they tagged list
// mail (measured in docs/evaluation.md, "Support families together").
func supportAdds(f string) bool { return f == "contain" || f == "lines" }

// supportSpread returns, for a support family, the least share (percent)
// of the message's keys of the family that its keys naming a campaign of
// other senders must be to count for it (LinesSpread); 0: no such share.
func supportSpread(f string) int {
	if f == "lines" {
		return LinesSpread
	}
	return 0
}

// keepsClass reports a family whose pointers keep a class (ptr): the
// main families and the line family.
func keepsClass(f string) bool { return !supportFamily(f) || supportSpread(f) > 0 }

// supportFamily reports a family whose keys only support a join.
func supportFamily(f string) bool { return supportAlone(f) > 0 }

// famCounts is the number of a message's keys of each family and its
// whole evidence in units: the families that can name a campaign alone.
// Counted once a message (familyCounts), for decide and the merge guard.
type famCounts struct {
	n     map[string]int
	whole int
}

func familyCounts(fams []string) famCounts {
	c := famCounts{n: map[string]int{}}
	for _, f := range fams {
		if c.n[f] == 0 && !supportFamily(f) {
			c.whole++
		}
		c.n[f]++
	}
	return c
}

// decide chooses the campaign of a message from its distinct keys'
// families (fams, counted in fc) and pointers. fresh is the ref a new
// campaign takes; snd is the message's envelope sender (fp16, 0:
// unknown), whose class the pointers compare ("One sender's template",
// "Spread lines").
func decide(fams []string, fc famCounts, ptrs []keyPtr, fresh uint32, snd uint16) decision {
	n, whole := fc.n, fc.whole
	sc := senderClass(snd)
	ev, keys := map[uint32]int{}, map[uint32]int{} // evidence and voting keys per campaign
	type famRef struct {
		f   string
		ref uint32
	}
	sup := map[famRef]int{}   // a support family's keys naming each campaign
	mine := map[uint32]bool{} // campaigns a spread family's key names that the message's sender wrote
	for i, kp := range ptrs {
		if !kp.found || kp.p.switches() >= WeakCap {
			continue
		}
		if supportFamily(fams[i]) {
			sup[famRef{fams[i], kp.p.ref()}]++
			if supportSpread(fams[i]) > 0 && sc != 0 && kp.p.class() == sc {
				mine[kp.p.ref()] = true
			}
			continue
		}
		ev[kp.p.ref()] += evidenceUnit / n[fams[i]]
		keys[kp.p.ref()]++
	}
	named := map[uint32]bool{} // the campaigns the other families name
	for ref := range ev {
		named[ref] = true
	}
	// The support families that add up (supportAdds) count together on
	// a campaign no other family names: each brings its keys' share of
	// its supportAlone, and their evidence counts when the shares sum to
	// one (supportWhole).
	alone := map[uint32]int{}
	for fr, k := range sup {
		if supportAdds(fr.f) && 100*k >= supportShare(fr.f)*n[fr.f] {
			alone[fr.ref] += k * (supportWhole / supportAlone(fr.f))
		}
	}
	var spread map[uint32]bool // campaigns spread lines name
	for fr, k := range sup {
		ok := (named[fr.ref] || k >= supportAlone(fr.f) || supportAdds(fr.f) && alone[fr.ref] >= supportWhole) &&
			100*k >= supportShare(fr.f)*n[fr.f]
		if !ok && supportSpread(fr.f) > 0 && sc != 0 && !mine[fr.ref] && k >= supportAlone(fr.f) && 100*k >= supportSpread(fr.f)*n[fr.f] {
			if spread == nil {
				spread = map[uint32]bool{}
			}
			ok, spread[fr.ref] = true, true
		}
		if ok {
			ev[fr.ref] += k * (evidenceUnit / n[fr.f])
			keys[fr.ref] += k
		}
	}
	best, bestEv := uint32(0), -1
	for ref, e := range ev {
		if e > bestEv || (e == bestEv && ref < best) {
			best, bestEv = ref, e
		}
	}
	d := decision{ref: fresh, cls: sc, sc: sc, voters: make([]bool, len(ptrs))}
	if bestEv >= JoinEvidence && 100*bestEv >= JoinShare*evidenceUnit*whole {
		c := campaignClass(fams, ptrs, best)
		d.ref, d.join, d.cls = best, true, nextClass(c, sc)
		d.weak = (100*bestEv < WeakShare*evidenceUnit*whole && !spread[best]) ||
			(keys[best] < UnionKeys && sc != 0 && c == sc)
		if !d.weak {
			d.union = unionOf(ev, keys, best, whole)
		}
		for i, kp := range ptrs {
			d.voters[i] = kp.found && kp.p.switches() < WeakCap && (kp.p.ref() == best || slices.Contains(d.union, kp.p.ref()))
		}
	}
	return d
}

// unionOf returns the campaigns besides best that a message's evidence
// names strongly enough to be counted with it: UnionShare of the whole
// evidence from UnionKeys keys or more; at most UnionMax, the most
// evidence first (ties: the lower ref), returned in ascending order.
func unionOf(ev, keys map[uint32]int, best uint32, whole int) []uint32 {
	var out []uint32
	for ref, e := range ev {
		if ref != best && keys[ref] >= UnionKeys && 100*e >= UnionShare*evidenceUnit*whole {
			out = append(out, ref)
		}
	}
	slices.SortFunc(out, func(a, b uint32) int {
		if ev[a] != ev[b] {
			return ev[b] - ev[a]
		}
		return int(a) - int(b)
	})
	out = out[:min(len(out), UnionMax)]
	slices.Sort(out)
	return out
}

// union counts the distinct recipients of campaigns counted together
// (decision.union): exactly, by the recipients' 32-bit fingerprints
// (what a first sighting keeps), while every campaign is in an exact
// tier; once one counts by HyperLogLog, the largest count (a lower bound:
// past ExactLimit a campaign is above any threshold that matters).
type union struct {
	fps map[uint32]bool
	hll int64 // the largest HyperLogLog count, -1: none
}

// add adds one campaign's live recipients: fingerprints, or a
// HyperLogLog count (hll >= 0).
func (u *union) add(fps []uint32, hll int64) {
	if u.fps == nil {
		u.fps, u.hll = map[uint32]bool{}, -1
	}
	u.hll = max(u.hll, hll)
	for _, fp := range fps {
		u.fps[fp] = true
	}
}

func (u *union) count() int64 {
	if u.hll >= 0 {
		return max(u.hll, int64(len(u.fps)))
	}
	return int64(len(u.fps))
}

// repoint returns the pointer a key of family f gets once its message
// went to d.ref (weak: the key voted in a weak join), and whether it
// changed: a line key's class is its writer's sender's (d.sc), so that a
// line rewritten by another sender is rewritten.
func repoint(kp keyPtr, d decision, f string, weak bool) (ptr, bool) {
	var c uint8
	switch {
	case !supportFamily(f):
		c = d.cls
	case supportSpread(f) > 0:
		c = d.sc
	}
	np := makePtr(d.ref, 0)
	switch {
	case !kp.found:
	case kp.p.ref() != d.ref || weak:
		np = makePtr(d.ref, kp.p.switches()+1)
	default:
		np = kp.p
	}
	np = np.withClass(c)
	return np, !kp.found || np != kp.p
}

// fp16 is the fingerprint a campaign keeps of a sending network or an
// envelope sender; 0 stands for unknown and is not counted.
func fp16(s string) uint16 {
	if s == "" {
		return 0
	}
	return uint16(xxhash.Sum64String(s)) | 1
}

// fpSetHas reports whether set (fpSetAdd's form) holds fp.
func fpSetHas(set string, fp uint16) bool {
	for i := 0; i+1 < len(set); i += 2 {
		if binary.BigEndian.Uint16([]byte(set[i:i+2])) == fp {
			return true
		}
	}
	return false
}

// fpSet adds fp to a small set kept as packed big-endian uint16s (the
// form Redis stores), up to CampaignSetCap members.
func fpSetAdd(set string, fp uint16) string {
	if fp == 0 || len(set) >= 2*CampaignSetCap || fpSetHas(set, fp) {
		return set
	}
	return set + string(binary.BigEndian.AppendUint16(nil, fp))
}

// campaignSig is the counter hash under which the embedded store counts a
// campaign's recipients.
func campaignSig(ref uint32) uint64 { return mix64(uint64(ref) | 0xca<<56) }

// campaignVotePrefix starts the id under which the votes on a campaign are
// stored and listed (Admin): "campaign:" and the campaign's ID in 8 hex
// digits, as the verdict header shows it. Signature ids never start so.
const campaignVotePrefix = "campaign:"

// CampaignVoteKey is the vote id of campaign ref: what ListVotes shows for
// a vote on a campaign and what RemoveVotes takes to remove it.
func CampaignVoteKey(ref uint32) string { return fmt.Sprintf("%s%08x", campaignVotePrefix, ref) }

// campaignOfVoteKey returns the campaign of a campaign vote id.
func campaignOfVoteKey(id string) (uint32, bool) {
	h, ok := strings.CutPrefix(id, campaignVotePrefix)
	if !ok || len(h) != 8 {
		return 0, false
	}
	v, err := strconv.ParseUint(h, 16, 32)
	return uint32(v) & refMask, err == nil
}

// withCampaign adds to a vote's distinct ids the vote id of the campaign
// they belong to, found by a read-only observation at t (peek: a Peek
// without the metrics of one); ids are returned as they are when the keys
// are in no live campaign. A campaign vote lives until VoteHorizon like
// any vote, or until a new campaign takes the campaign's ref (the ref is
// free only once the campaign left the window).
func withCampaign(ctx context.Context, peek func(context.Context, string, Observation) (Result, error), ids []string, t time.Time) ([]string, error) {
	keys := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return strings.HasPrefix(id, campaignVotePrefix) })
	if len(keys) == 0 {
		return ids, nil
	}
	res, err := peek(ctx, "peek", Observation{Keys: keys, Time: t})
	if err != nil {
		return nil, fmt.Errorf("find the campaign: %w", err)
	}
	if len(res.Campaign.Joined) == 0 {
		return ids, nil
	}
	if k := CampaignVoteKey(res.Campaign.ID); !slices.Contains(ids, k) {
		ids = append(ids, k)
	}
	return ids, nil
}

// The stored merge of split campaigns (issue 15; measured in
// docs/evaluation.md, "A stored merge of split campaigns"). A union
// (decision.union) counts a split campaign's parts together only for the
// copy that names them. When a strong join, written, unions another
// campaign and the guard passes (aliasGuard), that campaign becomes a part
// of the joined one, its root, for as long as the part lives: every later
// pointer naming the part is read as the root before the vote
// (resolveAliases), and the root's volume is the distinct recipients of
// the root and its live parts (the union's count) for a strong join. A
// weak join counts the root alone, as it counts no union, unless a voting
// key of its own still names a part (namesPart): a merge is an inference
// from one copy's strong evidence, and a message naming the root through
// a footer-sized share of its keys (a newsletter's frame, a list's
// template) is no evidence that it belongs to the parts (measured:
// two newsletter issues, joined weakly to a list thread's merged campaign,
// were tagged at seed 1 in one window; docs/evaluation.md, "Weak joins
// and stored parts"). A part's own parts move to the root. The alias and
// the part's entry carry the bucket of the merge; the part, counted with
// that message, is written no more (its pointers are read as the root), so
// both leave the window with the part's record, never after the root
// (written by the same message), and a ref a live alias names is never
// taken by a new campaign (freeRef): a freed ref never inherits an alias.
// A retried call finds the message's keys on the root already, merges
// nothing more and counts the same recipients by their fingerprints.
const (
	// AliasFamily is the family one voting key of which passes the guard
	// (aliasGuard).
	AliasFamily = "imatch"
	// AliasParts bounds a root's live parts, so that the members read for
	// its volume stay bounded; a merge that would pass it is not made
	// (the union still counts the campaign for the copy naming it).
	AliasParts = 8
)

// aliasGuard reports whether campaign other, in a strong join's union,
// may become a part of the joined campaign. Two classes of evidence that a
// template does not give:
//   - a voting key naming it is of AliasFamily: an I-Match key is a digest
//     of the whole text's lexicon terms, which a newsletter's issues,
//     sharing a template (header, footer, layout), do not share, and a
//     campaign's copies do (measured: with no guard the alias chained
//     template mail, 29 → 40 tagged in one window, 3 personal);
//   - voting keys of two resemblance families (aliasPair) name it with
//     WeakShare of the message's whole evidence, as a join must be
//     strong: an edit that moves every I-Match key (words changed, text
//     added) leaves much of a copy's shingles, sifted clusters and term
//     bands in place, while what a footer, a list's frame or a quoted
//     thread moves is a key or two of each family, a small share
//     (measured: two families at any share chained list mail, 83 → 95
//     tagged in one window at seed 2; at WeakShare none did).
func aliasGuard(fams []string, fc famCounts, kps []keyPtr, other uint32) bool {
	one, two, ev := "", false, 0
	for i, kp := range kps {
		if !kp.found || kp.p.switches() >= WeakCap || kp.p.ref() != other {
			continue
		}
		f := fams[i]
		if f == AliasFamily {
			return true
		}
		if !aliasPair(f) {
			continue
		}
		ev += evidenceUnit / fc.n[f]
		two = two || (one != "" && one != f)
		if one == "" {
			one = f
		}
	}
	return two && 100*ev >= WeakShare*evidenceUnit*fc.whole
}

// namesPart reports whether a voting key of the message was read through
// an alias: its stored pointer (raw) names a part of the joined root.
func namesPart(raw, kps []keyPtr, d decision) bool {
	for i, v := range d.voters {
		if v && raw[i].p.ref() != kps[i].p.ref() {
			return true
		}
	}
	return false
}

// aliasPair reports a family two of which can pass the guard together: the
// text's resemblance families. Not the attachments: a logo is a
// template's.
func aliasPair(f string) bool {
	switch f {
	case "shingle", "charshingle", "sift", "terms", "contain":
		return true
	}
	return false
}

// part is a campaign merged into a root, with the bucket of the merge.
type part struct {
	ref uint32
	at  int64
}

// mergeParts returns a root's parts after merging the refs of merged (in
// order), each with its own live parts (partsOf); a ref is merged only if
// the root's parts stay within AliasParts. added are the parts new to the
// root.
func mergeParts(root uint32, have []part, merged []uint32, cb int64, partsOf func(uint32) []part) (out, added []part) {
	out = slices.Clone(have)
	in := func(ref uint32) bool {
		return ref == root || slices.ContainsFunc(out, func(p part) bool { return p.ref == ref })
	}
	for _, r := range merged {
		if in(r) {
			continue
		}
		add := []part{{r, cb}}
		for _, q := range partsOf(r) {
			if !in(q.ref) && q.ref != r {
				add = append(add, q)
			}
		}
		if len(out)+len(add) > AliasParts {
			continue
		}
		out = append(out, add...)
		added = append(added, add...)
	}
	return out, added
}
