// Package detect is the one message and the one pipeline shared by the
// daemon and the offline commands (scan, eval, bench), so that what is
// measured offline is exactly what runs online:
//
//	MTA events or raw file → Builder → Message → mailtext.Text → signature.Doc → keys → store → verdict
//
// It owns how a message is taken in (Split, Builder, within Limits), the
// stripping of the recipient's name, and the policy that turns volumes
// and feedback votes into a verdict: a message is bulk when any enabled
// family's volume (the highest over its keys; a key that joined the
// message's campaign carries the campaign's volume) or the campaign's
// distinct sending networks reach that family's threshold, unless
// feedback overrides it; the bulk level 0–9
// grades it (level.go, docs/levels.md).
//
// It may import mailtext, signature, store, declared and internal/gopool; it
// reports through its own Observer and never imports metrics or config.
package detect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/bits"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/declared"
	"github.com/bulkmilter/bulkmilter/internal/gopool"
	"github.com/bulkmilter/bulkmilter/mailtext"
	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// Store is what the pipeline needs from a volume store.
type Store interface {
	Observe(ctx context.Context, o store.Observation) (store.Result, error)
	RecordVote(ctx context.Context, v store.Vote) error
}

// Unbudgeted is a Store that needs no per-message deadline: it answers in
// process and never waits on a network (the daemon's embedded store). Its
// calls get the caller's context as it is, without the StoreTimeout
// budget, whose timer would cost every message an allocation for nothing.
type Unbudgeted interface {
	Unbudgeted()
}

// Options configure an Engine.
type Options struct {
	// Limits bound the analysis (Limits.Text, Limits.NameWords); a
	// Builder with the same limits bounds what a message keeps.
	Limits Limits
	// Set holds the enabled signature families; its version prefixes every
	// store id, so counts never mix across canonicalisation, lexicon,
	// secret or parameter changes.
	Set   *signature.Set
	Store Store
	// Thresholds holds the bulk threshold of each enabled family; with
	// Adaptive, the ceiling.
	Thresholds map[signature.Family]int
	// Adaptive lets the thresholds follow the site's size (adaptive.go).
	Adaptive Adaptive
	// StoreTimeout bounds the store calls for one message. It starts when
	// the analysis is done: a slow analysis never eats the store's budget.
	StoreTimeout time.Duration
	// SlowAnalysis is how long an analysis may take before its verdict is
	// marked slow (Verdict.Slow); the verdict is still the store's.
	SlowAnalysis time.Duration
	// StripRecipient removes the recipients' names and addresses from the
	// text before signing.
	StripRecipient bool
	// GlobalVoters is the number of distinct voters after which a vote on a
	// key, or on a campaign, applies to every recipient.
	GlobalVoters int
	// Analyses bounds the analyses that run at once (default GOMAXPROCS):
	// an analysis is CPU work, so more at once only adds their working
	// sets (tens of MiB for the largest message) to the daemon's memory.
	// Further messages wait for a turn: back pressure, not a verdict.
	Analyses int
	// Relays are the site's own relays: a message whose SMTP client is
	// one counts, as its network, the client the relay wrote in its
	// Received field (RelayedClient), not the relay, which every message
	// it forwards would share.
	Relays   []netip.Prefix
	Observer Observer // nil observes nothing
}

// Engine runs the pipeline. It is safe for concurrent use.
type Engine struct {
	opt   Options
	turns chan struct{} // one token per analysis running (Options.Analyses)
	site  *site         // nil: fixed thresholds
}

// New returns an engine.
func New(opt Options) (*Engine, error) {
	if opt.Set == nil || len(opt.Set.Signers()) == 0 {
		return nil, errors.New("detect: no signature family enabled")
	}
	if opt.Store == nil {
		return nil, errors.New("detect: no store")
	}
	for _, s := range opt.Set.Signers() {
		if opt.Thresholds[s.Family()] <= 0 {
			return nil, fmt.Errorf("detect: no threshold for family %s", s.Family())
		}
	}
	if opt.StoreTimeout <= 0 {
		opt.StoreTimeout = 500 * time.Millisecond
	}
	if opt.GlobalVoters <= 0 {
		opt.GlobalVoters = 3
	}
	if opt.SlowAnalysis <= 0 {
		opt.SlowAnalysis = 2 * time.Second
	}
	if opt.Observer == nil {
		opt.Observer = nop{}
	}
	if opt.Analyses <= 0 {
		opt.Analyses = runtime.GOMAXPROCS(0)
	}
	opt.Limits = opt.Limits.orDefault()
	if !slices.ContainsFunc(opt.Set.Signers(), func(s signature.Signer) bool { return s.Family() == signature.FamilyAttach }) {
		opt.Limits.Text.MaxAttachments = -1 // nothing signs them: the walk skips them unread, as before
	}
	pipelines.Start()
	return &Engine{opt: opt, turns: make(chan struct{}, opt.Analyses), site: newSite(opt.Adaptive)}, nil
}

// Message is one message as the MTA handed it over.
type Message struct {
	// Header holds the top-level header fields in order.
	Header textproto.Header
	// Body is the (possibly truncated) body.
	Body io.Reader
	// Recipients are the envelope recipients.
	Recipients []string
	// Sender is the envelope sender (MAIL FROM), empty for a bounce or
	// when unknown.
	Sender string
	// Client is the SMTP client's address as the MTA reported it (or, in
	// a replay, as the site's own Received line names it); the zero
	// Addr when unknown.
	Client netip.Addr
	// Truncated reports that Body holds only the first part of the body.
	Truncated bool
	// AuthResults are the Authentication-Results values of the site's
	// own authserv-id that a verifier before the milter added (see
	// Builder.AuthservID); declared bulk is judged on them.
	AuthResults []string
	// Time is when the message arrived; zero means now. Offline replays
	// (scan, eval) set it so that the store's window applies as it would
	// have.
	Time time.Time
}

// Analysis is what the pure part of the pipeline made of a message.
type Analysis struct {
	Text     *mailtext.Text
	Doc      *signature.Doc
	Keys     []signature.Key
	Explains []signature.Explain
}

// Analyze extracts, canonicalises and signs a message. It does no I/O
// beyond reading msg.Body.
//
// With StripRecipient, the recipient's name and address are removed from
// the text first (personalWords), so that personalised copies of a
// campaign sign alike. When that removes more words than a name in a
// greeting, a subject and a footer would (maxStripped), the text is also
// signed as it is and the message counts under both sets of keys: a sender
// who names each recipient with words of the body to delete them from
// each copy differently gets copies whose unstripped text is the same.
func (e *Engine) Analyze(msg *Message) *Analysis {
	var a *Analysis
	pipelines.Run(func() { a = e.analyze(msg) })
	return a
}

// pipelines runs Check and Analyze on long-lived goroutines, whose stacks
// have grown to the pipeline's depth already: the milter's connection
// goroutines are new for most messages, and grew theirs by copying each
// time (runtime.newstack, 3–5 % of the milter process's CPU). More of them
// than cores: a check waiting for Redis or for a turn holds one.
var pipelines = gopool.New(4 * runtime.GOMAXPROCS(0))

// analyze is Analyze on the caller's goroutine, in its turn.
func (e *Engine) analyze(msg *Message) *Analysis {
	e.turns <- struct{}{}
	defer func() { <-e.turns }()
	text := mailtext.ExtractParts(msg.Header, msg.Body, e.opt.Limits.Text)
	src := signature.Source{Subject: text.Subject, Domains: text.Domains, Images: text.Images}
	for _, p := range text.Parts {
		src.Parts = append(src.Parts, p.Text)
	}
	if len(text.Attachments) > 0 {
		src.Attachments = make([]signature.Attachment, len(text.Attachments))
		for i, at := range text.Attachments {
			src.Attachments[i] = signature.Attachment{Data: at.Data}
		}
	}
	if e.opt.StripRecipient {
		src.Strip = personalWords(msg.Header, msg.Recipients, e.opt.Limits.NameWords)
	}
	doc := signature.Canonicalize(src)
	a := &Analysis{Text: text, Doc: doc}
	a.Keys, a.Explains = e.opt.Set.Sign(doc, nil, nil)
	if doc.Stats.Stripped > maxStripped {
		src.Strip = nil
		whole, wholeEx := e.opt.Set.Sign(signature.Canonicalize(src), nil, nil)
		a.Keys, a.Explains = mergeKeys(a.Keys, whole), mergeExplains(a.Explains, wholeEx)
	}
	return a
}

// StoreID returns the id a key is counted under in the store.
func (e *Engine) StoreID(k signature.Key) string { return e.opt.Set.StoreID(k) }

// Verdict is the pipeline's answer for one message.
type Verdict struct {
	// Bulk is true when the message is bulk for at least one recipient.
	Bulk bool
	// Base is the verdict for recipients without a vote of their own on
	// the message's keys or campaign: volume and global feedback.
	Base bool
	// Family is the family that decided a bulk verdict, or the family with
	// the highest volume relative to its threshold otherwise.
	Family signature.Family
	// Volume is that family's volume.
	Volume int64
	// Volumes holds every signing family's volume.
	Volumes map[signature.Family]int64
	// Threshold is Family's threshold in effect; below the configured one
	// when the adaptive threshold lowered it (Lowered).
	Threshold int
	Lowered   bool
	// Networks is the campaign's distinct sending networks when they, not
	// the recipients, reached the threshold; 0 otherwise.
	Networks int64
	// Override says when feedback changed what volume alone decided:
	// "not-bulk" or "bulk", for everyone ("global") or for some recipients
	// ("user").
	Override string
	// NotBulkFor lists recipients whose own "not bulk" votes exempt them
	// from a bulk Base verdict; BulkFor lists those whose "bulk" votes make
	// a message that is not bulk for others bulk for them.
	NotBulkFor, BulkFor []string
	// Unsigned is true when no family could sign the message.
	Unsigned bool
	// Slow is true when the analysis took longer than
	// Options.SlowAnalysis; the verdict is still the store's.
	Slow bool
	// Err is set when the store failed; the caller applies its failure
	// policy. Bulk is false then.
	Err error
	// Level grades the verdict from 0 (not bulk) to 9; LevelBulk and
	// above mean Bulk for recipients without votes of their own (see
	// level). LevelWhy says why, in words.
	Level    int
	LevelWhy []string
	// Declared is whether the message declares itself as bulk, with a
	// verified signature covering the declaration (declared.Judge).
	Declared declared.Judgement
	// Campaign is the campaign the store counted the message in (issue
	// 15); the zero value when the store counts none.
	Campaign store.Campaign
	// Via lists the families whose keys joined the message to its
	// campaign, in the set's order; empty for a new campaign.
	Via []signature.Family
	// Analysis is what the verdict was computed from.
	Analysis *Analysis
	// IDs are the store ids of Analysis.Keys.
	IDs []string
}

// Check runs the whole pipeline for one message: analysis, one store round
// trip and the policy. A store failure is reported in Verdict.Err, never as
// a panic or a hang: the store calls are bounded by the store timeout.
//
// The store's budget (Options.StoreTimeout) starts after the analysis: a
// message that was slow to analyse (a busy machine, a large message) is
// still counted and judged, its verdict marked Slow, and never taken for
// a store failure.
func (e *Engine) Check(ctx context.Context, msg *Message) Verdict {
	j := checkJobs.Get().(*checkJob)
	j.e, j.ctx, j.msg = e, ctx, msg
	pipelines.Run(j.run)
	v := j.v
	*j = checkJob{run: j.run}
	checkJobs.Put(j)
	return v
}

// checkJob is a Check handed to the pipeline pool, reused: a closure
// over the verdict moved the verdict to the heap, two allocations a
// message.
type checkJob struct {
	e   *Engine
	ctx context.Context
	msg *Message
	v   Verdict
	run func() // do, bound once
}

var checkJobs = sync.Pool{New: func() any {
	j := &checkJob{}
	j.run = j.do
	return j
}}

func (j *checkJob) do() { j.v = j.e.check(j.ctx, j.msg) }

func (e *Engine) check(ctx context.Context, msg *Message) Verdict {
	start := time.Now()
	a := e.analyze(msg)
	slow := time.Since(start) > e.opt.SlowAnalysis
	decl := declared.Judge(&msg.Header, msg.AuthResults)
	rcpts := normaliseAll(msg.Recipients)
	v := e.decide(ctx, a, store.Observation{Recipients: rcpts, Time: msg.Time,
		Network: Network(e.Client(msg)), Sender: senderDomain(msg.Sender)}, decl.Declared, e.opt.Store.Observe, e.thresholds(ctx, rcpts, msg.Time))
	v.Declared = decl
	v.Slow = slow
	e.record(v, msg, time.Since(start))
	return v
}

// Client is the client msg's network is counted by: its SMTP client, or
// the one a relay of the site wrote (Options.Relays).
func (e *Engine) Client(msg *Message) netip.Addr {
	return RelayedClient(msg.Header, msg.Client, e.opt.Relays)
}

// ErrNoPeek is the verdict's error when the store cannot be read without
// recording (it is no store.Peeker).
var ErrNoPeek = errors.New("the store cannot be read without recording")

// Peek is Check without recording anything: the verdict the message would
// get from what the store holds now, its own recipients not added, and
// what the store answered (per-key volumes and tallies). Nothing is
// observed by the engine's Observer. milterd explain uses it.
func (e *Engine) Peek(ctx context.Context, msg *Message) (Verdict, store.Result) {
	a := e.Analyze(msg)
	decl := declared.Judge(&msg.Header, msg.AuthResults)
	var res store.Result
	peek := func(ctx context.Context, o store.Observation) (store.Result, error) {
		p, ok := e.opt.Store.(store.Peeker)
		if !ok {
			return store.Result{}, ErrNoPeek
		}
		var err error
		res, err = p.Peek(ctx, o.Keys, o.Time)
		return res, err
	}
	v := e.decide(ctx, a, store.Observation{Time: msg.Time}, decl.Declared, peek, e.thresholds(ctx, nil, msg.Time))
	v.Declared = decl
	return v, res
}

// Threshold returns a family's configured bulk threshold (with the
// adaptive threshold, its ceiling), 0 for a family not enabled.
func (e *Engine) Threshold(f signature.Family) int { return e.opt.Thresholds[f] }

// observeFunc is how decide asks the store: Store.Observe, or a Peek.
type observeFunc func(context.Context, store.Observation) (store.Result, error)

// observeAll counts a message to more recipients than one store call
// takes (store.MaxRecipients) in as many calls as needed, within the one
// store budget: every call after the first finds the keys pointing to the
// campaign the first chose, and the last call's answer holds the whole
// volume. Recipients' own votes are gathered from every call. Ordinary
// mail takes one call.
func observeAll(ctx context.Context, observe observeFunc, o store.Observation) (store.Result, error) {
	rs := o.Recipients
	if len(rs) <= store.MaxRecipients {
		return observe(ctx, o)
	}
	var res store.Result
	users, own, camp := map[string]store.VoteKind{}, map[string][]store.VoteKind{}, map[string]store.VoteKind{}
	for start := 0; start < len(rs); start += store.MaxRecipients {
		o.Recipients = rs[start:min(start+store.MaxRecipients, len(rs))]
		r, err := observe(ctx, o)
		if err != nil {
			return store.Result{}, fmt.Errorf("recipients %d-%d of %d: %w", start+1, start+len(o.Recipients), len(rs), err)
		}
		maps.Copy(users, r.UserVotes)
		maps.Copy(own, r.OwnVotes)
		maps.Copy(camp, r.CampaignOwn)
		res = r
	}
	res.UserVotes, res.OwnVotes, res.CampaignOwn = nil, nil, nil
	if len(users) > 0 {
		res.UserVotes = users
	}
	if len(own) > 0 {
		res.OwnVotes = own
	}
	if len(camp) > 0 {
		res.CampaignOwn = camp
	}
	return res, nil
}

// Network groups a client address into the sending network a campaign
// counts: its /24 (IPv4) or /48 (IPv6); "" when unknown.
func Network(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	a = a.Unmap()
	bits := 48
	if a.Is4() {
		bits = 24
	}
	p, _ := a.Prefix(bits)
	return p.String()
}

func (e *Engine) decide(ctx context.Context, a *Analysis, o store.Observation, decl bool, observe observeFunc, in inEffect) Verdict {
	th := in.volumes
	rcpts := o.Recipients
	v := Verdict{Analysis: a, Volumes: map[signature.Family]int64{}}
	if len(a.Keys) == 0 {
		v.Unsigned = true
		return v
	}
	ids := e.opt.Set.StoreIDs(a.Keys)
	v.IDs = ids
	if _, ok := e.opt.Store.(Unbudgeted); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.opt.StoreTimeout)
		defer cancel()
	}
	o.Keys = ids
	res, err := observeAll(ctx, observe, o)
	if err == nil && len(res.Volumes) != len(ids) {
		err = fmt.Errorf("store returned %d volumes for %d keys", len(res.Volumes), len(ids))
	}
	if err != nil {
		v.Err = err
		return v
	}
	for i, k := range a.Keys {
		if vol := res.Volumes[i]; vol > v.Volumes[k.Family] {
			v.Volumes[k.Family] = vol
		}
	}
	v.Campaign = res.Campaign
	var via famSet
	for _, i := range res.Campaign.Joined {
		if i >= 0 && i < len(a.Keys) {
			via.add(a.Keys[i].Family)
		}
	}
	for _, s := range e.opt.Set.Signers() {
		if via.has(s.Family()) {
			v.Via = append(v.Via, s.Family())
		}
	}

	// Volume alone, then the global votes, then each voting recipient's
	// own (see marks).
	global := make([]effect, len(ids))
	for i := range ids {
		if i < len(res.Votes) {
			global[i] = globalEffect(res.Votes[i], int64(e.opt.GlobalVoters))
		}
	}
	byVolume := e.judge(a.Keys, res.Volumes, th)
	// The same message from many networks to a few users is a campaign
	// too: its distinct sending networks count against the same threshold
	// (measured on a real site's stream, docs/evaluation.md; envelope
	// senders are not counted: lists write one per copy).
	if n := res.Campaign.Networks; !byVolume.bulk && n > 0 && n >= int64(in.networks[byVolume.family]) {
		byVolume.bulk, v.Networks = true, n
	}
	base := byVolume
	if j, ok := e.marked(a.Keys, res.Volumes, global); ok {
		base = j
	} else if eff := globalEffect(res.CampaignVotes, int64(e.opt.GlobalVoters)); eff != effNone {
		base = byCampaign(byVolume, eff)
	}
	v.Base = base.bulk
	switch {
	case base.bulk:
		v.Family, v.Volume = base.family, base.volume
	default:
		v.Family, v.Volume = byVolume.family, byVolume.volume
	}
	v.Threshold = th[v.Family]
	if v.Networks > 0 {
		v.Threshold = in.networks[v.Family]
	}
	v.Lowered = v.Threshold < e.opt.Thresholds[v.Family]
	switch {
	case byVolume.bulk && !base.bulk:
		v.Override = "global not-bulk"
	case !byVolume.bulk && base.bulk:
		v.Override = "global bulk"
	}
	v.Level, v.LevelWhy = level(levelInputOf(v.Volumes, th, res.Campaign, o.Time, levelInput{
		bulk: base.bulk, declared: decl,
		cleared: v.Override == "global not-bulk", forced: v.Override == "global bulk",
	}))
	// A recipient's own votes come with the store's answer, per key: a vote
	// counts for the keys it was cast on and no others, without a second
	// store call; where they decide nothing, her vote on the campaign does.
	if len(res.OwnVotes) > 0 || len(res.CampaignOwn) > 0 {
		eff := make([]effect, len(ids))
		for _, r := range rcpts {
			var mine judgement
			ok := false
			if kinds, voted := res.OwnVotes[r]; voted && len(kinds) == len(ids) {
				for i, k := range kinds {
					eff[i] = effectOf(k)
				}
				mine, ok = e.marked(a.Keys, res.Volumes, eff)
			}
			if k, voted := res.CampaignOwn[r]; !ok && voted && effectOf(k) != effNone {
				mine, ok = byCampaign(byVolume, effectOf(k)), true
			}
			switch {
			case !ok:
			case base.bulk && !mine.bulk:
				v.NotBulkFor = append(v.NotBulkFor, r)
			case !base.bulk && mine.bulk:
				v.BulkFor = append(v.BulkFor, r)
			}
		}
	}
	v.Bulk = base.bulk
	if len(v.NotBulkFor) > 0 {
		v.Override = "user not-bulk"
		if len(v.NotBulkFor) == len(rcpts) {
			v.Bulk = false
		}
	}
	if len(v.BulkFor) > 0 {
		v.Override, v.Bulk = "user bulk", true
	}
	return v
}

// levelInputOf completes in with the volumes: the highest volume and ratio
// over the families and the campaign (measured against the lowest of the
// thresholds in effect), and whether the campaign reached that threshold
// within fastInterval of its first copy.
func levelInputOf(volumes map[signature.Family]int64, thresholds map[signature.Family]int, c store.Campaign, at time.Time, in levelInput) levelInput {
	lowest := 0
	for f, vol := range volumes {
		th := thresholds[f]
		in.seen = max(in.seen, vol)
		in.ratio = max(in.ratio, float64(vol)/float64(th))
		if lowest == 0 || th < lowest {
			lowest = th
		}
	}
	if c.Recipients > 0 && lowest > 0 {
		in.seen = max(in.seen, c.Recipients)
		in.ratio = max(in.ratio, float64(c.Recipients)/float64(lowest))
		if at.IsZero() {
			at = time.Now()
		}
		in.fast = !c.First.IsZero() && c.Recipients >= int64(lowest) && at.Sub(c.First) < fastInterval
	}
	return in
}

// effect is what feedback marks a key with: "not bulk" (clear) or
// "bulk" (force).
type effect int8

const (
	effNone effect = iota
	effClear
	effForce
)

func effectOf(k store.VoteKind) effect {
	switch k {
	case store.VoteNotBulk:
		return effClear
	case store.VoteBulk:
		return effForce
	}
	return effNone
}

// byCampaign is the verdict a mark on the message's campaign gives: the
// campaign's votes cover every copy that joined it, however edited, where
// the keys' own marks decided nothing.
func byCampaign(byVolume judgement, eff effect) judgement {
	if eff == effClear {
		return judgement{}
	}
	byVolume.bulk = true
	return byVolume
}

// globalEffect applies the global tally of one key (or of the campaign):
// a kind marks the key when at least quorum distinct users voted it and
// more voted it than the other kind; a tie marks nothing. Tallies count
// distinct voters per key, so one user's vote on all 22 keys of a message
// counts once on each and never reaches a quorum of 2 or more by itself.
func globalEffect(t store.Tally, quorum int64) effect {
	switch {
	case t.NotBulk >= quorum && t.NotBulk > t.Bulk:
		return effClear
	case t.Bulk >= quorum && t.Bulk > t.NotBulk:
		return effForce
	}
	return effNone
}

// marked applies one scope's marks (the global ones, or one recipient's
// own votes) to a message. Two messages that share a key are near
// duplicates for that key's family (Kolcz: overlap on one coordinate); a
// message is a copy of what was voted on when it shares a marked key in
// more than half of the families that signed it. Then the mark decides:
// not bulk (cleared) or bulk (forced), whatever the volume. Most families,
// not all: a copy that varies (personal data, a randomised word) shares
// some keys in most families, rarely all; and not one: a message that
// merely quotes a voted one (a shared footer, a paragraph) shares keys in
// one family at most, and must not inherit its verdict. ok is false when
// the marks decide nothing (no majority, or a majority for both kinds):
// the next scope, or the volume, decides. The containment and line
// families take no part: their single min-hashes and lines are what a
// message that quotes a voted one shares with it (signature/contain.go).
func (e *Engine) marked(keys []signature.Key, volumes []int64, eff []effect) (j judgement, ok bool) {
	// Families are a handful of small numbers: sets of them are bit sets.
	var signed, cleared, forced famSet
	var top judgement // the forced key with the highest volume
	for i, k := range keys {
		if k.Family == signature.FamilyContain || k.Family == signature.FamilyLines {
			continue
		}
		signed.add(k.Family)
		switch eff[i] {
		case effClear:
			cleared.add(k.Family)
		case effForce:
			forced.add(k.Family)
			if !top.bulk || volumes[i] > top.volume {
				top = judgement{bulk: true, family: k.Family, volume: volumes[i]}
			}
		}
	}
	copyOfCleared := 2*cleared.len() > signed.len()
	copyOfForced := 2*forced.len() > signed.len()
	switch {
	case copyOfForced && !copyOfCleared:
		return top, true
	case copyOfCleared && !copyOfForced:
		return judgement{}, true
	}
	return judgement{}, false
}

// famSet is a set of families.
type famSet [4]uint64

func (s *famSet) add(f signature.Family)      { s[f>>6] |= 1 << (f & 63) }
func (s *famSet) has(f signature.Family) bool { return s[f>>6]&(1<<(f&63)) != 0 }

func (s *famSet) len() int {
	return bits.OnesCount64(s[0]) + bits.OnesCount64(s[1]) + bits.OnesCount64(s[2]) + bits.OnesCount64(s[3])
}

// judgement is a verdict for one scope.
type judgement struct {
	bulk   bool
	family signature.Family
	volume int64
}

// judge applies the thresholds: a family's volume is the highest volume
// of its keys; a message is bulk when a family's volume reaches its
// threshold. Family and volume are the deciding family, or the family
// closest to its threshold.
func (e *Engine) judge(keys []signature.Key, volumes []int64, thresholds map[signature.Family]int) judgement {
	var vols [256]int64 // by family; -1: no key of that family
	for i := range vols {
		vols[i] = -1
	}
	for i, k := range keys {
		vols[k.Family] = max(vols[k.Family], volumes[i])
	}
	var j judgement
	best := -1.0
	for _, s := range e.opt.Set.Signers() {
		f := s.Family()
		vol := vols[f]
		if vol < 0 {
			continue
		}
		th := thresholds[f]
		if vol >= int64(th) && !j.bulk {
			j = judgement{bulk: true, family: f, volume: vol}
		} else if ratio := float64(vol) / float64(th); !j.bulk && ratio > best {
			j.family, j.volume, best = f, vol, ratio
		}
	}
	return j
}

func (e *Engine) record(v Verdict, msg *Message, d time.Duration) {
	m := e.opt.Observer
	for _, ex := range v.Analysis.Explains {
		outcome := "signed"
		if ex.Keys == 0 {
			outcome = declineCode(ex.Declined)
		}
		m.Signature(ex.Family.String(), outcome)
	}
	for f, vol := range v.Volumes {
		m.Volume(f.String(), vol)
	}
	if scope, kind, ok := strings.Cut(v.Override, " "); ok {
		m.Override(scope, strings.ReplaceAll(kind, "-", "_"))
	}
	for _, d := range v.Analysis.Text.Defects {
		m.Defect(string(d.Kind))
	}
	if msg.Truncated || v.Analysis.Text.Stats.TruncatedBytes > 0 {
		m.Truncated()
	}
	if v.Slow {
		m.SlowAnalysis()
	}
	if v.Err != nil {
		m.Error(StageStore)
	} else if !v.Unsigned {
		m.Level(v.Level, v.Kind())
	}
	m.Message(v.Outcome(), d)
}

// Outcome names the verdict in one word: OutcomeError, OutcomeUnsigned,
// OutcomeBulk or OutcomeNotBulk.
func (v Verdict) Outcome() string {
	switch {
	case v.Err != nil:
		return OutcomeError
	case v.Unsigned:
		return OutcomeUnsigned
	case v.Bulk:
		return OutcomeBulk
	}
	return OutcomeNotBulk
}

// declineCode turns a signer's reason into a bounded metric label: the
// reason's first words up to a colon.
func declineCode(reason string) string {
	if reason == "" {
		return "declined"
	}
	if i := strings.IndexAny(reason, ":(0123456789"); i > 0 {
		reason = reason[:i]
	}
	reason = strings.TrimSpace(reason)
	if len(reason) > 40 {
		reason = reason[:40]
	}
	return strings.ReplaceAll(reason, " ", "_")
}

// LevelAs returns the level as shown beside a verdict of bulk: Level, kept
// within LevelBulk–LevelMax for "yes" and below LevelBulk for "no". The
// two differ from Level only when recipients' own votes or exemptions
// decided the header, so that a Sieve rule by level files what the
// verdict header says, never more.
func (v Verdict) LevelAs(bulk bool) int {
	if bulk {
		return max(v.Level, LevelBulk)
	}
	return min(v.Level, LevelBulk-1)
}

// Kind says whether the message declares itself as bulk: KindDeclared or
// KindUndeclared.
func (v Verdict) Kind() string {
	if v.Declared.Declared {
		return KindDeclared
	}
	return KindUndeclared
}

// Kinds of mass mail, the verdict header's kind= and the metric's label.
const (
	KindDeclared   = "declared"
	KindUndeclared = "undeclared"
)

// CampaignID is the campaign's short id as the header and the log line
// print it (8 hex digits), or "" when the store counted no campaign.
func (v Verdict) CampaignID() string {
	if v.Campaign.Recipients == 0 && v.Campaign.ID == 0 {
		return ""
	}
	var d [8]byte
	return string(appendCampaignID(d[:0], v.Campaign.ID))
}

// appendCampaignID appends a campaign's id as eight hex digits ("%08x").
func appendCampaignID(dst []byte, id uint32) []byte {
	const hex = "0123456789abcdef"
	for shift := 28; shift >= 0; shift -= 4 {
		dst = append(dst, hex[id>>shift&15])
	}
	return dst
}

// Header formats the verdict header's value: it always starts with "yes"
// or "no", then says why. Keys are listed only when revealKeys is set:
// they would tell a sender what to change.
func (v Verdict) Header(revealKeys bool) string {
	// Written piece by piece into one buffer: a concatenation for each
	// field and the buffer's doublings were 6 to 8 objects a message.
	var b strings.Builder
	b.Grow(128)
	field := func(name, value string) {
		b.WriteString(name)
		b.WriteString(value)
	}
	number := func(name string, n int64) {
		var d [20]byte
		b.WriteString(name)
		b.Write(strconv.AppendInt(d[:0], n, 10))
	}
	if v.Bulk {
		b.WriteString("yes")
	} else {
		b.WriteString("no")
	}
	switch {
	case v.Err != nil:
		b.WriteString("; error=store-unavailable")
	case v.Unsigned:
		b.WriteString("; unsigned")
	default:
		field("; family=", v.Family.String())
		number("; volume=", v.Volume)
		if v.Campaign.Recipients != 0 || v.Campaign.ID != 0 {
			var d [8]byte
			b.WriteString("; campaign=")
			b.Write(appendCampaignID(d[:0], v.Campaign.ID))
		}
		if len(v.Via) > 0 {
			b.WriteString("; via=")
			for i, f := range v.Via {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(f.String())
			}
		}
		number("; level=", int64(v.LevelAs(v.Bulk)))
		field("; kind=", v.Kind())
		if v.Networks > 0 {
			number("; networks=", v.Networks)
		}
		if v.Lowered {
			number("; threshold=", int64(v.Threshold))
		}
	}
	if v.Override != "" {
		field("; feedback=", strings.ReplaceAll(v.Override, " ", "-"))
	}
	if v.Slow {
		b.WriteString("; slow")
	}
	if revealKeys && len(v.IDs) > 0 {
		b.WriteString("; keys=")
		for i, id := range v.IDs {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(id)
		}
	}
	return b.String()
}

// senderDomain is the envelope sender as a campaign counts it: its domain,
// lower-cased. A newsletter's VERP address (a bounce address per issue and
// recipient) is one publisher, and a mass mailing's random local parts one
// sender; what tells a publisher's template from a campaign spread over
// many senders is the domain (store: "One sender's template", "Spread
// lines"). An address without a domain is kept whole.
func senderDomain(s string) string {
	s = strings.ToLower(s)
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		return s[i+1:]
	}
	return s
}
