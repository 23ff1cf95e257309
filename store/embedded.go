package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for EmbeddedOptions.
const (
	DefaultMaxEntries   = 8 << 20
	DefaultSaveInterval = 5 * time.Minute
)

const embeddedShards = 64

// A bucket's pointers are packed as they come (ptrPut) once it holds
// packAheadMin in a shard, packStep at a time or more.
const (
	packAheadMin = 1024
	packStep     = 256
)

// EmbeddedOptions configures OpenEmbedded.
type EmbeddedOptions struct {
	// Path is the state file (counts and votes). Empty: nothing persists.
	Path string
	// SaveInterval is how often the state is written to Path; it is also
	// written on Close. Default 5 minutes; negative: only on Close and Save.
	SaveInterval time.Duration
	// MaxEntries bounds memory: key pointers, plus the campaigns' first
	// sightings, recipients held by exact counters and 1024 per
	// HyperLogLog bucket (16 KiB); each half of it. Past it the
	// oldest first sightings, then the least recently written counters are
	// evicted (counted in Stats). Votes are never evicted. Default 8Mi.
	MaxEntries int
	Observer   Observer // may be nil
	Params
}

// Embedded is the in-process store for a single host, the default when no
// Redis is configured. It is safe for concurrent use: counters are sharded
// by signature, each shard under its own lock.
type Embedded struct {
	c        counting
	path     string
	maxShard int
	observer Observer
	interval time.Duration

	shards [embeddedShards]eshard // campaign counters
	ptrs   [embeddedShards]pshard // key pointers
	slots  slotRing               // the refs the pointers name (slots.go)
	votes  voteBook
	// aliases: the stored merge of split campaigns (model.go, alias.go)
	aliases aliasBook
	noMerge bool // the model a Redis Cluster runs: no stored merge (TestStoresAgree)
	// mixedUpTo: the buckets up to it, read from a file of version 4 or
	// before, hold the support families' pointers in the main ring too
	// (math.MinInt64: none).
	mixedUpTo atomic.Int64

	evicted atomic.Int64
	present present    // the latest time counted (ahead.go)
	saveMu  sync.Mutex // one save at a time
	// afterChunk, if set, runs after Save writes each chunk, no lock
	// held: a test's observations land between chunks there.
	afterChunk func(kind byte)
	lastErr    atomic.Pointer[error]
	lastAt     atomic.Int64 // unix ms of the last successful save

	closeOnce sync.Once
	closed    atomic.Bool
	stop      chan struct{}
	done      chan struct{}
}

// eshard holds the campaigns: those of one message as first sightings
// (fsRec), the others as a record (cmeta) and a counter (by campaignSig).
type eshard struct {
	mu      sync.Mutex
	fs      []recTable // ring of nb buckets, indexed by bucket mod nb
	ctr     map[uint64]*ecounter
	camps   map[uint32]cmeta  // campaigns of two or more messages
	sets    map[uint32]*csets // of the campaigns with several networks or senders
	entries int
	scratch *hll
}

// cmeta is the record of a campaign of two or more messages beside its
// recipient counter, held by value (24 bytes). Its first
// network and sender are inline; the sets of the few campaigns with more
// are in eshard.sets.
type cmeta struct {
	first    int64  // unix s of its first message
	last     int64  // newest bucket written
	origin   uint32 // of the message that started it (newRef)
	net, snd uint16 // fp16 of its first network and sender, 0: none
}

// csets are a campaign's networks and senders as fp16 sets (fpSetAdd).
type csets struct{ nets, snds string }

// setsOf returns campaign ref's networks and senders (fpSetAdd form).
func (sh *eshard) setsOf(ref uint32, m cmeta) (nets, snds string) {
	if s := sh.sets[ref]; s != nil {
		return s.nets, s.snds
	}
	return fpSetAdd("", m.net), fpSetAdd("", m.snd)
}

// setCounts returns the sizes of campaign ref's sets.
func (sh *eshard) setCounts(ref uint32, m cmeta) (nets, snds int64) {
	if s := sh.sets[ref]; s != nil {
		return int64(len(s.nets) / 2), int64(len(s.snds) / 2)
	}
	if m.net != 0 {
		nets = 1
	}
	if m.snd != 0 {
		snds = 1
	}
	return nets, snds
}

// addSets adds a network and a sender (fp16, 0: unknown) to campaign
// ref's sets; the caller stores m back.
func (sh *eshard) addSets(ref uint32, m *cmeta, net, snd uint16) {
	if s := sh.sets[ref]; s != nil {
		s.nets, s.snds = fpSetAdd(s.nets, net), fpSetAdd(s.snds, snd)
		return
	}
	if m.net == 0 {
		m.net = net
	}
	if m.snd == 0 {
		m.snd = snd
	}
	if (net != 0 && net != m.net) || (snd != 0 && snd != m.snd) {
		sh.sets[ref] = &csets{nets: fpSetAdd(fpSetAdd("", m.net), net), snds: fpSetAdd(fpSetAdd("", m.snd), snd)}
	}
}

// pshard holds key pointers: per time bucket, signature hash → ptr; the
// support families' keys (supportFamily) in a ring of their own, whose
// packed tables keep 16 bits of check instead of 32 (denseTable).
type pshard struct {
	mu      sync.Mutex
	tabs    []fsBucket // ring of nb buckets
	stabs   []fsBucket // the support families' ring
	entries int
}

// Rings of a pointer shard: the families that name campaigns, and the
// support families.
const (
	ringMain = iota
	ringSupport
)

// ring returns ring r (ringMain, ringSupport).
func (ps *pshard) ring(r int) []fsBucket {
	if r == ringSupport {
		return ps.stabs
	}
	return ps.tabs
}

// ringCheckBits is the check a ring's packed tables keep.
func ringCheckBits(r int) uint {
	if r == ringSupport {
		return 16
	}
	return 32
}

// ringOf returns the ring of a key of family f.
func ringOf(f string) int {
	if supportFamily(f) {
		return ringSupport
	}
	return ringMain
}

// fsBucket holds the pointers of one time bucket (t and d nil: none):
// packed in d, the newest in t. Once the bucket is large, t is merged
// into d an eighth at a time as the bucket fills (ptrPut); t is merged
// when a newer bucket is written, and then holds only what arrives late.
type fsBucket struct {
	id  int64
	gen uint64 // of the bucket's message slots its values name (slots.go)
	t   *fsTable
	d   *denseTable
}

func (b *fsBucket) size() int {
	n := 0
	if b.t != nil {
		n = b.t.n
	}
	if b.d != nil {
		n += b.d.len()
	}
	return n
}

func (b *fsBucket) empty() bool { return b.t == nil && b.d == nil }

func (b *fsBucket) drop() { b.t, b.d = nil, nil }

// get returns the value recorded for sig.
func (b *fsBucket) get(sig uint64) (uint32, bool) {
	if b.t != nil {
		if v, ok := b.t.get(sig); ok {
			return v, true
		}
	}
	if b.d != nil {
		if i, ok := b.d.find(sig); ok {
			return b.d.val(i), true
		}
	}
	return 0, false
}

// ecounter counts a signature seen by two or more distinct recipients:
// exactly (recipient → last bucket seen) up to the exact limit, then with
// one HyperLogLog per bucket.
type ecounter struct {
	exact  map[pseudonym]int64
	counts []bucketCount // live recipients per bucket, exact mode
	hlls   []hllBucket
	last   int64 // newest bucket written
}

type bucketCount struct {
	id int64
	n  int
}

type hllBucket struct {
	id int64
	h  *hll
}

const hllEntryWeight = hllM / 16

func (e *ecounter) weight() int {
	if e.exact != nil {
		return len(e.exact)
	}
	return len(e.hlls) * hllEntryWeight
}

// OpenEmbedded opens the embedded store, loading Path if it exists.
//
// If the file is corrupt or unreadable it is renamed to
// Path+".corrupt-<unix time>", whatever could be read before the damage is
// kept (votes are written first), and OpenEmbedded returns a usable store
// together with a *CorruptFileError: log it as an error and carry on.
// Any other error means no store.
func OpenEmbedded(o EmbeddedOptions) (*Embedded, error) {
	c, err := o.Params.resolve()
	if err != nil {
		return nil, fmt.Errorf("embedded store: %w", err)
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.SaveInterval == 0 {
		o.SaveInterval = DefaultSaveInterval
	}
	e := &Embedded{
		c:        c,
		path:     o.Path,
		maxShard: max(1, o.MaxEntries/(2*embeddedShards)), // pointers and campaigns
		observer: o.Observer,
		interval: o.SaveInterval,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	for i := range e.shards {
		e.shards[i].fs = make([]recTable, c.nb)
		e.shards[i].ctr = map[uint64]*ecounter{}
		e.shards[i].camps = map[uint32]cmeta{}
		e.shards[i].sets = map[uint32]*csets{}
		e.ptrs[i].tabs = make([]fsBucket, c.nb)
		e.ptrs[i].stabs = make([]fsBucket, c.nb)
	}
	e.slots.init(c.nb)
	e.mixedUpTo.Store(math.MinInt64)
	e.votes.init()
	var warn error
	if e.path != "" {
		if err := e.load(); err != nil {
			var ce *CorruptFileError
			if !errors.As(err, &ce) {
				return nil, err
			}
			warn = err
		}
	}
	go e.background()
	return e, warn
}

func (e *Embedded) shard(sig uint64) *eshard {
	return &e.shards[mix64(sig)%embeddedShards]
}

func (e *Embedded) ptrShardOf(sig uint64) int { return int(mix64(sig) % embeddedShards) }

// ptrPut records a key's pointer, value v naming a slot of generation gen,
// in ring r's bucket cb for a message at t (here: the key has one there);
// the caller holds ps.mu.
func (e *Embedded) ptrPut(ps *pshard, r int, cb int64, sig uint64, v uint32, gen uint64, here bool, t time.Time) {
	nb := int64(e.c.nb)
	tabs, cbits := ps.ring(r), ringCheckBits(r)
	slot := &tabs[mod(cb, nb)]
	if slot.id != cb || slot.empty() || slot.gen != gen {
		if !slot.empty() && slot.id > cb && !e.aheadDrop(slot.id, slot.size()) {
			return // older than the window held here
		}
		ps.entries -= slot.size()
		slot.id, slot.gen, slot.t, slot.d = cb, gen, &fsTable{}, nil
		// The bucket before is closed: its pointers only change in place
		// from now on, and take about 9 bytes each packed instead of 15.
		if prev := &tabs[mod(cb-1, nb)]; prev.id == cb-1 && prev.t != nil && packable(prev.d, prev.t.n) {
			prev.d, prev.t = packed(prev.d, prev.t, cbits)
		}
	}
	if here && slot.d != nil {
		// A value wider than the table's, or with a switch count it keeps
		// none of, goes to the open table, which reads first and replaces
		// it when merged (newDense); a key held open stays there.
		if i, ok := slot.d.find(sig); ok && (slot.t == nil || !slot.t.has(sig)) && slot.d.set(i, v) {
			return
		}
	}
	if slot.t == nil {
		slot.t = &fsTable{}
	}
	if slot.t.put(sig, v) {
		ps.entries++
		// A large bucket is packed as it fills: its groups sized for what
		// it will hold, the new pointers packed once they are an eighth
		// of the packed ones.
		if slot.d == nil && slot.t.n >= packAheadMin {
			slot.d = newDense(nil, nil, e.packBits(tabs, cb, slot.t.n, t), cbits)
		}
		if d := slot.d; d != nil && slot.t.n >= max(packStep, d.len()/8) && packable(d, slot.t.n) {
			slot.d, slot.t = packed(d, slot.t, cbits)
		}
	}
	// Over its share: the oldest buckets go first, the current one last.
	for b := cb - nb + 1; b <= cb && ps.entries > e.maxShard; b++ {
		for _, ring := range [][]fsBucket{ps.tabs, ps.stabs} {
			if old := &ring[mod(b, nb)]; !old.empty() && old.id <= b {
				e.evicted.Add(int64(old.size()))
				ps.entries -= old.size()
				old.drop()
			}
		}
	}
}

// ptrHit is where a key's pointer was found: bucket b, whose tables
// name slots of generation gen, value v, in the main ring although of a
// support family (a bucket read from a file of version 4 or before).
type ptrHit struct {
	found, inMain bool
	b             int64
	gen           uint64
	v             uint32
}

// ptrAt returns the newest pointer of key sig, of ring r, in buckets from
// down to oldest; a support key's in the main ring too, in the buckets up
// to mixedUpTo. The caller holds ps.mu.
func (e *Embedded) ptrAt(ps *pshard, r int, sig uint64, from, oldest, mixedUpTo int64) ptrHit {
	nb := int64(e.c.nb)
	tabs := ps.ring(r)
	for b := from; b >= oldest; b-- {
		if slot := &tabs[mod(b, nb)]; slot.id == b && !slot.empty() {
			if v, ok := slot.get(sig); ok {
				return ptrHit{found: true, b: b, gen: slot.gen, v: v}
			}
		}
		if r == ringMain || b > mixedUpTo {
			continue
		}
		if slot := &ps.tabs[mod(b, nb)]; slot.id == b && !slot.empty() {
			if v, ok := slot.get(sig); ok {
				return ptrHit{found: true, inMain: true, b: b, gen: slot.gen, v: v}
			}
		}
	}
	return ptrHit{}
}

// aheadDrop reports whether a ring's bucket b, newer than the bucket a
// write is for, is ahead of the clock (ahead.go: a clock stepped back),
// so that the write takes its slot; it counts the n entries dropped.
func (e *Embedded) aheadDrop(b int64, n int) bool {
	if b <= e.c.aheadBucket() {
		return false
	}
	e.noteBucketAhead(b, n)
	return true
}

func (e *Embedded) noteBucketAhead(b int64, n int) {
	noteAhead(e.observer, "bucket", n, time.UnixMilli(b*e.c.bucketLen.Milliseconds()), e.c.Now())
}

// packBits returns the group bits of bucket cb's packed pointers once it
// holds n at t: groupTarget pointers a group for as many as it will hold
// at this rate by its end (the first 64th of the bucket counts as a 64th),
// or as the bucket before held, whichever is more.
func (e *Embedded) packBits(tabs []fsBucket, cb int64, n int, t time.Time) uint {
	l := e.c.bucketLen.Milliseconds()
	frac := float64(t.UnixMilli()-cb*l) / float64(l)
	want := int(float64(n) / min(max(frac, 1.0/64), 1))
	if prev := &tabs[mod(cb-1, int64(e.c.nb))]; prev.id == cb-1 {
		want = max(want, prev.size())
	}
	return min(groupBits(want), 26)
}

// packable reports whether n more pointers can be packed into d (nil:
// none) while its groups stay short: a lookup scans a group, and another
// key matches it with probability about its length/2^cbits. Past 4 ×
// groupTarget a group on average (a bucket several times the one before
// or its forecast) they stay in the open table.
func packable(d *denseTable, n int) bool {
	return n > 0 && (d == nil || d.len()+n <= 4*groupTarget<<d.gbits)
}

// freeRef returns ref, or the next ref no live campaign of another origin
// holds (at most refProbes tries), so that a new campaign never counts
// into another.
func (e *Embedded) freeRef(ref, origin uint32, cb int64) uint32 {
	oldest := cb - int64(e.c.nb) + 1
	for range refProbes {
		sh := e.shard(campaignSig(ref))
		sh.mu.Lock()
		m, ok := sh.camps[ref]
		ok = ok && m.last >= oldest
		if !ok {
			var r fsRec
			r, _, ok = sh.firstSighting(ref, cb, oldest)
			m.origin = r.origin
		}
		sh.mu.Unlock()
		if (!ok || m.origin == origin) && !e.aliases.live(ref, oldest) {
			return ref
		}
		ref = (ref + 1) & refMask
	}
	return ref
}

func (e *Embedded) observeOp(op string, start time.Time, err error) {
	if e.observer != nil {
		e.observer.ObserveRequest(op, time.Since(start), err)
	}
}

// errClosed is returned by calls on a closed store.
var errClosed = fmt.Errorf("%w: store closed", ErrUnavailable)

// Observe records the observation in its campaign (model.go) and
// returns the campaign and its keys' volumes and votes.
func (e *Embedded) Observe(ctx context.Context, o Observation) (Result, error) {
	return e.observeAs(ctx, "observe", o)
}

// observeAs is Observe reported as op ("observe", or "peek" for Peek).
func (e *Embedded) observeAs(ctx context.Context, op string, o Observation) (res Result, err error) {
	start := time.Now()
	defer func() { e.observeOp(op, start, err) }()
	if e.closed.Load() {
		return Result{}, fmt.Errorf("observe: %w", errClosed)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("observe: %w: %w", ErrUnavailable, err)
	}
	if err := checkKeys(o.Keys); err != nil {
		return Result{}, fmt.Errorf("observe: %w", err)
	}
	rc, err := e.c.recipients(o.Recipients)
	if err != nil {
		return Result{}, fmt.Errorf("observe: %w", err)
	}
	t, ahead := e.c.countAt(&e.present, o.Time)
	if ahead {
		noteAhead(e.observer, "observation", 1, o.Time, t)
	}
	cb := e.c.bucket(t)
	res = Result{Volumes: make([]int64, len(o.Keys)), Votes: make([]Tally, len(o.Keys))}
	var d decision
	if len(o.Keys) > 0 {
		res.Campaign, d = e.campaign(o, rc, t, cb, res.Volumes)
	}
	e.votes.lookup(&e.c, o.Keys, rc, t, &res)
	// Campaign votes (withCampaign): a campaign joined strongly has its
	// read; a new campaign drops those a dead one that held its ref left.
	switch c := res.Campaign; {
	case len(c.Joined) > 0 && !d.weak:
		e.votes.lookupCampaign(&e.c, CampaignVoteKey(c.ID), rc, t, &res)
	case !d.join && c.Recipients > 0 && len(rc.ids) > 0:
		e.votes.clear(CampaignVoteKey(c.ID))
	}
	return res, nil
}

// campaign runs the campaign model for one observation with keys and fills
// vols. Pointer shards are locked in index order, then one campaign shard
// at a time: no other path takes a pointer shard while holding a campaign
// shard, so the order cannot deadlock, and the message's decision and
// writes are one step for every message sharing a key.
func (e *Embedded) campaign(o Observation, rc rcptSet, t time.Time, cb int64, vols []int64) (Campaign, decision) {
	sc := campaignScratches.Get().(*campaignScratch)
	defer sc.put()
	sc.ids, sc.sigs = uniqSigs(o.Keys, sc.ids, sc.sigs)
	ids, sigs := sc.ids, sc.sigs
	sc.fams = sized(sc.fams, len(ids))
	fams := sc.fams
	var locked [embeddedShards]bool
	for i, id := range ids {
		fams[i] = familyOf(id)
		locked[e.ptrShardOf(sigs[i])] = true
	}
	for i := range locked {
		if locked[i] {
			e.ptrs[i].mu.Lock()
		}
	}
	// One defer for all of them: a defer inside the loop was a heap
	// allocated record for each shard locked.
	defer func() {
		for i := range locked {
			if locked[i] {
				e.ptrs[i].mu.Unlock()
			}
		}
	}()
	nb := int64(e.c.nb)
	oldest := cb - nb + 1
	sc.kps, sc.at, sc.vals = sized(sc.kps, len(ids)), sized(sc.at, len(ids)), sized(sc.vals, len(ids))
	kps := sc.kps
	at := sc.at     // bucket the pointer was found in
	vals := sc.vals // its stored value (slot and switches)
	var gen uint64  // of bucket cb's slots, where found there
	// A support key's pointer in the main ring: a bucket read from an old
	// file (mixedUpTo); it is rewritten to its own ring.
	mixedUpTo := e.mixedUpTo.Load()
	var inMain []bool
	// The pointers first, then the slots they name (slots.go) under one
	// short read lock: a pointer that names none is as absent, and the
	// key's older buckets are searched (rare: a stale bucket).
	sc.hits = sized(sc.hits, len(ids))
	hits := sc.hits
	for i, sig := range sigs {
		hits[i] = e.ptrAt(&e.ptrs[e.ptrShardOf(sig)], ringOf(fams[i]), sig, cb, oldest, mixedUpTo)
	}
	e.slots.mu.RLock()
	for i, h := range hits {
		for ; h.found; h = e.ptrAt(&e.ptrs[e.ptrShardOf(sigs[i])], ringOf(fams[i]), sigs[i], h.b-1, oldest, mixedUpTo) {
			ref, cls, ok := e.slots.ref(h.b, h.gen, h.v>>switchBits)
			if !ok {
				continue
			}
			if !keepsClass(fams[i]) {
				cls = 0 // a support key keeps no class (model.go)
			}
			kps[i], at[i], vals[i] = keyPtr{found: true, p: makePtr(ref, int(h.v&(1<<switchBits-1))).withClass(cls)}, h.b, h.v
			if h.b == cb {
				gen = h.gen
			}
			if h.inMain {
				if inMain == nil {
					inMain = make([]bool, len(ids))
				}
				inMain[i] = true
			}
			break
		}
	}
	e.slots.mu.RUnlock()
	// The stored merge (model.go): a pointer naming a merged campaign is
	// read as its root; raw keeps what is stored, so that such a key is
	// rewritten to the root.
	sc.raw = append(sc.raw[:0], kps...)
	raw := sc.raw
	if !e.noMerge {
		e.aliases.resolve(kps, oldest)
	}
	fc := familyCounts(fams)
	d := decide(fams, fc, kps, 0, fp16(o.Sender))
	fresh, origin := newRef(ids)
	write := len(rc.ids) > 0
	if !d.join {
		if !write {
			return Campaign{}, d
		}
		d.ref = e.freeRef(fresh, origin, cb)
	}
	if write {
		var ms msgSlots
		for i, sig := range sigs {
			np, changed := repoint(kps[i], d, fams[i], d.weak && d.voters[i])
			changed = changed || (raw[i].found && np != raw[i].p)
			moved := inMain != nil && inMain[i]
			if changed || at[i] != cb || moved {
				here := kps[i].found && at[i] == cb && !moved
				if v, g, ok := e.valueOf(&ms, cb, np, vals[i], raw[i].p, gen, here, !keepsClass(fams[i])); ok {
					e.ptrPut(&e.ptrs[e.ptrShardOf(sig)], ringOf(fams[i]), cb, sig, v, g, here, t)
				}
			}
		}
	}
	sh := e.shard(campaignSig(d.ref))
	sh.mu.Lock()
	out, ok := e.count(sh, d.ref, origin, o, rc.ids, t, cb)
	if !ok {
		sh.mu.Unlock()
		return Campaign{}, d
	}
	// The root's live parts, after merging the union's campaigns that
	// pass the guard (a strong join, written).
	var merged []uint32
	if write && d.join && !d.weak {
		for _, ref := range d.union {
			if aliasGuard(fams, fc, kps, ref) {
				merged = append(merged, ref)
			}
		}
	}
	// A weak join counts the campaign alone, without its parts, unless a
	// voting key of its own named a part (model.go).
	var parts, added []part
	if d.join && (!d.weak || namesPart(raw, kps, d)) && !e.noMerge {
		parts, added = e.aliases.merge(d.ref, merged, cb, oldest)
	}
	var u union
	if len(d.union) > 0 || len(parts) > 0 {
		u.add(e.members(sh, d.ref, cb))
	}
	sh.mu.Unlock()
	// Votes cast on a new part before its merge now cover the root.
	for _, p := range added {
		e.votes.carry(CampaignVoteKey(p.ref), CampaignVoteKey(d.ref), t.Unix()-int64(e.c.VoteHorizon.Seconds()))
	}
	// One campaign lock at a time (see above).
	for _, ref := range d.union {
		csh := e.shard(campaignSig(ref))
		csh.mu.Lock()
		e.count(csh, ref, origin, o, rc.ids, t, cb)
		u.add(e.members(csh, ref, cb))
		csh.mu.Unlock()
	}
	for _, p := range parts {
		if slices.Contains(d.union, p.ref) {
			continue
		}
		csh := e.shard(campaignSig(p.ref))
		csh.mu.Lock()
		u.add(e.members(csh, p.ref, cb))
		csh.mu.Unlock()
	}
	if len(d.union) > 0 || len(parts) > 0 {
		out.count = u.count()
	}
	out.d = d
	return out.assemble(o.Keys, ids, int64(len(rc.ids)), vols), d
}

// campaignScratch holds campaign's slices of one element a key between
// calls: they were eight objects an observation (uniqSigs' two, the
// families, the pointers and their copy, where and what each was found).
type campaignScratch struct {
	ids, fams []string
	sigs      []uint64
	kps, raw  []keyPtr
	at        []int64
	vals      []uint32
	hits      []ptrHit
}

var campaignScratches = sync.Pool{New: func() any { return new(campaignScratch) }}

// put returns the scratch to the pool, holding no message's strings.
func (sc *campaignScratch) put() {
	clear(sc.ids)
	clear(sc.fams)
	campaignScratches.Put(sc)
}

// sized returns s with n zero elements, in its own array when it has room.
func sized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// members returns the 32-bit fingerprints of campaign ref's recipients
// live at cb, or, when it counts them by HyperLogLog, their count (hll,
// else -1): what the union rule (model.go) needs. The caller holds sh.mu.
func (e *Embedded) members(sh *eshard, ref uint32, cb int64) (fps []uint32, hll int64) {
	oldest := cb - int64(e.c.nb) + 1
	if ctr := sh.ctr[campaignSig(ref)]; ctr != nil && ctr.last >= oldest {
		if ctr.exact == nil {
			return nil, e.hllCount(sh, ctr, oldest)
		}
		for p, b := range ctr.exact {
			if b >= oldest {
				fps = append(fps, uint32(p)) // a placeholder's low bits are its fingerprint
			}
		}
		return fps, -1
	}
	if rec, _, ok := sh.firstSighting(ref, cb, oldest); ok {
		return []uint32{rec.fp}, -1
	}
	return nil, -1
}

// count is the embedded twin of the Redis script's count path: it adds
// recipients rs (none: a read) seen at t to campaign ref and returns what
// the campaign knows; ok is false when a read finds no campaign. A new
// campaign of one recipient is only a first sighting (fsRec); its second
// message makes the full record (cmeta) and a counter. The caller holds
// sh.mu.
func (e *Embedded) count(sh *eshard, ref, origin uint32, o Observation, rs []pseudonym, t time.Time, cb int64) (campaignOutcome, bool) {
	oldest := cb - int64(e.c.nb) + 1
	sig := campaignSig(ref)
	ctr := sh.ctr[sig]
	if ctr != nil && ctr.last < oldest {
		sh.entries -= ctr.weight()
		delete(sh.ctr, sig)
		ctr = nil
	}
	m, multi := sh.camps[ref]
	multi = multi && m.last >= oldest
	var rec fsRec
	var rb int64
	single := false
	if !multi {
		rec, rb, single = sh.firstSighting(ref, cb, oldest)
	}
	one := func(fp uint16) int64 {
		if fp != 0 {
			return 1
		}
		return 0
	}
	if len(rs) == 0 { // a read
		switch {
		case multi:
			var n int64
			if ctr != nil {
				n = e.counterAdd(sh, ctr, nil, nil, cb)
			}
			nets, snds := sh.setCounts(ref, m)
			return campaignOutcome{known: true, count: n, nets: nets, snds: snds, first: m.first}, true
		case single:
			return campaignOutcome{known: true, count: 1, nets: one(rec.net), snds: one(rec.snd), first: int64(rec.first)}, true
		}
		return campaignOutcome{}, false
	}
	net, snd := fp16(o.Network), fp16(o.Sender)
	if !multi && !single && ctr == nil && len(rs) == 1 {
		e.recPut(sh, cb, fsRec{key: ref | recUsed, fp: fingerprint(rs[0]), first: uint32(t.Unix()), origin: origin, net: net, snd: snd})
		return campaignOutcome{known: true, count: 1, nets: one(net), snds: one(snd), first: t.Unix()}, true
	}
	var seed []entryAt
	switch {
	case single:
		// Its second message. The first recipient is known by its
		// fingerprint only; it is matched to its pseudonym if it comes back.
		e.recDel(sh, ref, cb, oldest)
		m = cmeta{first: int64(rec.first), last: rb, origin: rec.origin, net: rec.net, snd: rec.snd}
		delete(sh.sets, ref)
		seed = []entryAt{{placeholder(rec.fp), rb}}
	case !multi:
		m = cmeta{first: t.Unix(), last: cb, origin: origin}
		delete(sh.sets, ref)
	}
	m.last = max(m.last, cb)
	m.first = min(m.first, t.Unix())
	sh.addSets(ref, &m, net, snd)
	sh.camps[ref] = m
	if ctr == nil {
		ctr = &ecounter{exact: map[pseudonym]int64{}, last: cb}
		sh.ctr[sig] = ctr
	}
	n := e.counterAdd(sh, ctr, seed, rs, cb)
	e.evictIfNeeded(sh, cb)
	nets, snds := sh.setCounts(ref, m)
	return campaignOutcome{known: true, count: n, nets: nets, snds: snds, first: m.first}, true
}

// firstSighting returns campaign ref's first sighting and its bucket, the
// newest from cb back to oldest; the caller holds sh.mu.
func (sh *eshard) firstSighting(ref uint32, cb, oldest int64) (fsRec, int64, bool) {
	nb := int64(len(sh.fs))
	for b := cb; b >= oldest; b-- {
		if slot := &sh.fs[mod(b, nb)]; slot.id == b {
			if r, ok := slot.get(ref); ok {
				return r, b, true
			}
		}
	}
	return fsRec{}, 0, false
}

type entryAt struct {
	p  pseudonym
	at int64
}

func mod(b, n int64) int64 { return ((b % n) + n) % n }

// recPut records a first sighting in bucket cb; a newer bucket packs the
// one before.
func (e *Embedded) recPut(sh *eshard, cb int64, r fsRec) {
	nb := int64(e.c.nb)
	slot := &sh.fs[mod(cb, nb)]
	if slot.id != cb || slot.empty() {
		if !slot.empty() && slot.id > cb && !e.aheadDrop(slot.id, slot.size()) {
			return // an observation older than the window held here: count it, keep nothing
		}
		sh.entries -= slot.size()
		slot.drop()
		slot.id = cb
		if prev := &sh.fs[mod(cb-1, nb)]; prev.id == cb-1 && prev.t != nil {
			prev.pack()
		}
	}
	if slot.put(r) {
		sh.entries++
		if slot.tn >= max(packStep/4, slot.pn/8) {
			slot.pack()
		}
	}
	e.evictIfNeeded(sh, cb)
}

// recDel removes campaign ref's first sightings.
func (e *Embedded) recDel(sh *eshard, ref uint32, cb, oldest int64) {
	for b := oldest; b <= cb; b++ {
		if slot := &sh.fs[mod(b, int64(e.c.nb))]; slot.id == b && slot.del(ref) {
			sh.entries--
		}
	}
}

// counterAdd adds seed entries and recipients rs (seen in bucket cb) to a
// counter and returns its count over the window.
func (e *Embedded) counterAdd(sh *eshard, ctr *ecounter, seed []entryAt, rs []pseudonym, cb int64) int64 {
	oldest := cb - int64(e.c.nb) + 1
	if len(rs) > 0 || len(seed) > 0 {
		ctr.last = max(ctr.last, cb)
	}
	if ctr.exact != nil {
		before := len(ctr.exact)
		// Drop recipients whose bucket left the window.
		if slices.ContainsFunc(ctr.counts, func(c bucketCount) bool { return c.id < oldest }) {
			for p, b := range ctr.exact {
				if b < oldest {
					delete(ctr.exact, p)
				}
			}
			ctr.counts = slices.DeleteFunc(ctr.counts, func(c bucketCount) bool { return c.id < oldest })
		}
		add := func(p pseudonym, b int64) {
			old, ok := ctr.exact[p]
			if !ok && p < 1<<63 {
				// The first recipient, known by its fingerprint?
				if pb, found := ctr.exact[placeholder(fingerprint(p))]; found {
					delete(ctr.exact, placeholder(fingerprint(p)))
					ctr.exact[p] = pb
					old, ok = pb, true
				}
			}
			switch {
			case !ok:
				ctr.exact[p] = b
				ctr.bump(b, 1)
			case old < b:
				ctr.exact[p] = b
				ctr.bump(old, -1)
				ctr.bump(b, 1)
			}
		}
		for _, s := range seed {
			add(s.p, s.at)
		}
		for _, r := range rs {
			add(r, cb)
		}
		sh.entries += len(ctr.exact) - before
		live := 0
		for _, c := range ctr.counts {
			if c.id >= oldest {
				live += c.n
			}
		}
		if live <= e.c.ExactLimit {
			return int64(live)
		}
		// Outgrew the exact tier: one HyperLogLog per bucket.
		sh.entries -= len(ctr.exact)
		for p, b := range ctr.exact {
			if b >= oldest {
				ctr.hllFor(min(b, cb), oldest).add(p)
			}
		}
		ctr.exact, ctr.counts = nil, nil
		sh.entries += ctr.weight()
		return e.hllCount(sh, ctr, oldest)
	}
	before := ctr.weight()
	for _, s := range seed {
		if s.at >= oldest {
			ctr.hllFor(min(s.at, cb), oldest).add(s.p)
		}
	}
	if len(rs) > 0 {
		h := ctr.hllFor(cb, oldest)
		for _, r := range rs {
			h.add(r)
		}
	}
	sh.entries += ctr.weight() - before
	return e.hllCount(sh, ctr, oldest)
}

func (c *ecounter) bump(b int64, d int) {
	for i := range c.counts {
		if c.counts[i].id == b {
			c.counts[i].n += d
			return
		}
	}
	c.counts = append(c.counts, bucketCount{b, d})
}

// hllFor returns the HyperLogLog of bucket b, reusing one that left the
// window.
func (c *ecounter) hllFor(b, oldest int64) *hll {
	for i := range c.hlls {
		if c.hlls[i].id == b {
			return c.hlls[i].h
		}
	}
	for i := range c.hlls {
		if c.hlls[i].id < oldest {
			c.hlls[i].id = b
			clear(c.hlls[i].h[:])
			return c.hlls[i].h
		}
	}
	h := new(hll)
	c.hlls = append(c.hlls, hllBucket{b, h})
	return h
}

func (e *Embedded) hllCount(sh *eshard, ctr *ecounter, oldest int64) int64 {
	var live []*hll
	for _, hb := range ctr.hlls {
		if hb.id >= oldest {
			live = append(live, hb.h)
		}
	}
	switch len(live) {
	case 0:
		return 0
	case 1:
		return live[0].count()
	}
	if sh.scratch == nil {
		sh.scratch = new(hll)
	}
	*sh.scratch = *live[0]
	for _, h := range live[1:] {
		sh.scratch.merge(h)
	}
	return sh.scratch.count()
}

// evictIfNeeded keeps a shard under its share of MaxEntries: first the
// oldest first-sighting buckets, then the counters written least recently,
// then the current bucket's first sightings.
func (e *Embedded) evictIfNeeded(sh *eshard, cb int64) {
	if sh.entries <= e.maxShard {
		return
	}
	nb := int64(e.c.nb)
	drop := func(slot *recTable) {
		e.evicted.Add(int64(slot.size()))
		sh.entries -= slot.size()
		slot.drop()
	}
	for b := cb - nb + 1; b < cb && sh.entries > e.maxShard; b++ {
		if slot := &sh.fs[mod(b, nb)]; !slot.empty() && slot.id <= b {
			drop(slot)
		}
	}
	for sh.entries > e.maxShard && len(sh.ctr) > 0 {
		oldest := int64(1<<63 - 1)
		for _, c := range sh.ctr {
			oldest = min(oldest, c.last)
		}
		for sig, c := range sh.ctr {
			if c.last == oldest {
				w := c.weight()
				e.evicted.Add(int64(max(w, 1)))
				sh.entries -= w
				delete(sh.ctr, sig)
			}
		}
	}
	if sh.entries > e.maxShard {
		if slot := &sh.fs[mod(cb, nb)]; !slot.empty() {
			drop(slot)
		}
	}
}

// sweep drops what left the window everywhere, so idle shards do not keep
// expired data (and the file does not carry it).
func (e *Embedded) sweep(now time.Time) {
	cb := e.c.bucket(now)
	oldest := cb - int64(e.c.nb) + 1
	ahead := e.c.bucket(now.Add(e.c.bucketLen)) // later buckets: a clock stepped back (ahead.go)
	for i := range e.shards {
		sh := &e.shards[i]
		sh.mu.Lock()
		for j := range sh.fs {
			if slot := &sh.fs[j]; !slot.empty() && (slot.id < oldest || slot.id > ahead) {
				if slot.id > ahead {
					e.noteBucketAhead(slot.id, slot.size())
				}
				sh.entries -= slot.size()
				slot.drop()
			}
		}
		for sig, c := range sh.ctr {
			if c.last < oldest {
				sh.entries -= c.weight()
				delete(sh.ctr, sig)
			}
		}
		for ref, m := range sh.camps {
			if m.last < oldest {
				delete(sh.camps, ref)
				delete(sh.sets, ref)
			}
		}
		sh.mu.Unlock()
		ps := &e.ptrs[i]
		ps.mu.Lock()
		for _, ring := range [][]fsBucket{ps.tabs, ps.stabs} {
			for j := range ring {
				if slot := &ring[j]; !slot.empty() && (slot.id < oldest || slot.id > ahead) {
					if slot.id > ahead {
						e.noteBucketAhead(slot.id, slot.size())
					}
					ps.entries -= slot.size()
					slot.drop()
				}
			}
		}
		ps.mu.Unlock()
	}
	e.slots.sweep(oldest, ahead)
	e.votes.sweep(now.Unix() - int64(e.c.VoteHorizon.Seconds()))
	e.aliases.sweep(oldest)
}

// RecordVote stores the vote on each of v.Keys and on their campaign;
// VoteNone retracts it.
func (e *Embedded) RecordVote(ctx context.Context, v Vote) (err error) {
	start := time.Now()
	defer func() { e.observeOp("vote", start, err) }()
	if e.closed.Load() {
		return fmt.Errorf("record vote: %w", errClosed)
	}
	code, err := v.check()
	if err != nil {
		return fmt.Errorf("record vote: %w", err)
	}
	t, ahead := e.c.countAt(&e.present, v.Time)
	if ahead {
		noteAhead(e.observer, "vote", 1, v.Time, t)
	}
	ids, err := withCampaign(ctx, e.observeAs, uniq(v.Keys), t)
	if err != nil {
		return fmt.Errorf("record vote: %w", err)
	}
	e.votes.set(e.c.pseudonym(v.Voter), ids, code, t.Unix(), int64(e.c.VoteHorizon.Seconds()))
	return nil
}

// Ping reports whether the store is open.
func (e *Embedded) Ping(ctx context.Context) error {
	if e.closed.Load() {
		return fmt.Errorf("ping: %w", errClosed)
	}
	return nil
}

// Stats describes the embedded store's contents.
type Stats struct {
	Pointers       int   // keys pointing to a campaign
	Campaigns      int   // campaigns in the window
	FirstSightings int   // campaigns seen by one recipient so far
	Counters       int   // campaigns seen by two or more
	Entries        int   // the unit MaxEntries bounds
	Evicted        int64 // entries evicted since start
	VotedKeys      int   // signatures with votes
	Votes          int   // votes held
	Aliases        int   // campaigns merged into another (model.go's stored merge)
	LastSave       time.Time
	LastSaveError  error
}

// Stats returns counts of what the store holds.
func (e *Embedded) Stats() Stats {
	var s Stats
	for i := range e.shards {
		sh := &e.shards[i]
		sh.mu.Lock()
		fs := 0
		for i := range sh.fs {
			fs += sh.fs[i].size()
		}
		s.FirstSightings += fs
		s.Counters += len(sh.ctr)
		s.Campaigns += len(sh.camps) + fs
		s.Entries += sh.entries
		sh.mu.Unlock()
		ps := &e.ptrs[i]
		ps.mu.Lock()
		for j := range ps.tabs {
			s.Pointers += ps.tabs[j].size() + ps.stabs[j].size()
		}
		s.Entries += ps.entries
		ps.mu.Unlock()
	}
	s.Evicted = e.evicted.Load()
	s.VotedKeys, s.Votes = e.votes.size()
	s.Aliases = e.aliases.size()
	if ms := e.lastAt.Load(); ms != 0 {
		s.LastSave = time.UnixMilli(ms)
	}
	if p := e.lastErr.Load(); p != nil {
		s.LastSaveError = *p
	}
	return s
}

// background saves periodically and sweeps expired data.
func (e *Embedded) background() {
	defer close(e.done)
	sweepEvery := max(e.c.bucketLen/4, time.Second)
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	var save <-chan time.Time
	if e.path != "" && e.interval > 0 {
		t := time.NewTicker(e.interval)
		defer t.Stop()
		save = t.C
	}
	for {
		select {
		case <-e.stop:
			return
		case <-sweep.C:
			e.sweep(e.c.Now())
		case <-save:
			e.Save()
		}
	}
}

// Close stops the background work and writes the state file one last time.
func (e *Embedded) Close() error {
	var err error
	e.closeOnce.Do(func() {
		close(e.stop)
		<-e.done
		if e.path != "" {
			err = e.Save()
		}
		e.closed.Store(true)
	})
	return err
}

// ListVotes lists stored votes.
func (e *Embedded) ListVotes(ctx context.Context, q VoteQuery) (out []VoteEntry, err error) {
	start := time.Now()
	defer func() { e.observeOp("list_votes", start, err) }()
	voter, byVoter, err := q.voter(&e.c)
	if err != nil {
		return nil, err
	}
	horizon := e.c.Now().Unix() - int64(e.c.VoteHorizon.Seconds())
	return e.votes.list(q, voter, byVoter, horizon), nil
}

// RemoveVotes deletes the votes q selects; q must name a key, a key prefix
// or a voter.
func (e *Embedded) RemoveVotes(ctx context.Context, q VoteQuery) (n int, err error) {
	start := time.Now()
	defer func() { e.observeOp("remove_votes", start, err) }()
	if q, err = q.forRemoval(); err != nil {
		return 0, err
	}
	entries, err := e.ListVotes(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("remove votes: %w", err)
	}
	now := e.c.Now().Unix()
	hz := int64(e.c.VoteHorizon.Seconds())
	for _, en := range entries {
		p, _ := parsePseudonymHex(en.VoterID)
		e.votes.set(p, []string{en.Key}, 0, now, hz)
	}
	return len(entries), nil
}

// voteBook holds the votes: per signature the voters and their votes, and
// per voter the signatures they voted on.
type voteBook struct {
	mu      sync.RWMutex
	bySig   map[string]*sigVotes
	byVoter map[pseudonym]map[string]struct{}
	n       atomic.Int64 // signatures with votes, read without the lock
}

type sigVotes struct {
	voters map[pseudonym]voteVal
	nb, b  int64
	oldest int64
}

type voteVal struct {
	kind byte // 'n' or 'b'
	at   int64
}

func (vb *voteBook) init() {
	vb.bySig = map[string]*sigVotes{}
	vb.byVoter = map[pseudonym]map[string]struct{}{}
}

// rebuild drops votes at or before cutoff and recounts; the caller holds
// the write lock.
func (vb *voteBook) rebuild(key string, sv *sigVotes, cutoff int64) {
	sv.nb, sv.b, sv.oldest = 0, 0, 1<<63-1
	for p, v := range sv.voters {
		if v.at <= cutoff {
			delete(sv.voters, p)
			vb.unindex(p, key)
			continue
		}
		if v.kind == 'n' {
			sv.nb++
		} else {
			sv.b++
		}
		sv.oldest = min(sv.oldest, v.at)
	}
	if len(sv.voters) == 0 {
		delete(vb.bySig, key)
		vb.n.Store(int64(len(vb.bySig)))
	}
}

// index records that voter p has a vote on key; the caller holds the
// write lock.
func (vb *voteBook) index(p pseudonym, key string) {
	m := vb.byVoter[p]
	if m == nil {
		m = map[string]struct{}{}
		vb.byVoter[p] = m
	}
	m[key] = struct{}{}
}

func (vb *voteBook) unindex(p pseudonym, key string) {
	if m := vb.byVoter[p]; m != nil {
		delete(m, key)
		if len(m) == 0 {
			delete(vb.byVoter, p)
		}
	}
}

// set writes (code != 0) or retracts (code == 0) one voter's votes.
func (vb *voteBook) set(p pseudonym, keys []string, code byte, now, hz int64) {
	vb.mu.Lock()
	defer vb.mu.Unlock()
	for _, k := range keys {
		sv := vb.bySig[k]
		if sv != nil {
			delete(sv.voters, p)
			vb.unindex(p, k)
			vb.rebuild(k, sv, now-hz)
		}
		if code == 0 {
			continue
		}
		if sv = vb.bySig[k]; sv == nil {
			sv = &sigVotes{voters: map[pseudonym]voteVal{}, oldest: now}
			vb.bySig[k] = sv
		}
		sv.voters[p] = voteVal{kind: code, at: now}
		if code == 'n' {
			sv.nb++
		} else {
			sv.b++
		}
		sv.oldest = min(sv.oldest, now)
		vb.index(p, k)
	}
	vb.n.Store(int64(len(vb.bySig)))
}

// carry copies the live votes on a merged part's campaign (from) to its
// root's (to), so that they cover the root's later copies (model.go's
// stored merge); a voter who voted on both keeps the later vote.
func (vb *voteBook) carry(from, to string, cutoff int64) {
	if vb.n.Load() == 0 {
		return
	}
	vb.mu.Lock()
	defer vb.mu.Unlock()
	src := vb.bySig[from]
	if src == nil {
		return
	}
	dst := vb.bySig[to]
	if dst == nil {
		dst = &sigVotes{voters: map[pseudonym]voteVal{}}
		vb.bySig[to] = dst
	}
	for p, v := range src.voters {
		if old, ok := dst.voters[p]; v.at > cutoff && (!ok || old.at < v.at) {
			dst.voters[p] = v
			vb.index(p, to)
		}
	}
	vb.rebuild(to, dst, cutoff)
	vb.n.Store(int64(len(vb.bySig)))
}

// lookup fills the tallies and the recipients' own votes for an
// observation.
func (vb *voteBook) lookup(c *counting, keys []string, rc rcptSet, t time.Time, res *Result) {
	if vb.n.Load() == 0 {
		return
	}
	cutoff := t.Unix() - int64(c.VoteHorizon.Seconds())
	vb.mu.RLock()
	stale := false
	for _, k := range keys {
		if sv := vb.bySig[k]; sv != nil && sv.oldest <= cutoff {
			stale = true
		}
	}
	if stale {
		vb.mu.RUnlock()
		vb.mu.Lock()
		for _, k := range keys {
			if sv := vb.bySig[k]; sv != nil && sv.oldest <= cutoff {
				vb.rebuild(k, sv, cutoff)
			}
		}
		vb.mu.Unlock()
		vb.mu.RLock()
	}
	defer vb.mu.RUnlock()
	when := map[string]int64{}
	for i, k := range keys {
		sv := vb.bySig[k]
		if sv == nil {
			continue
		}
		res.Votes[i] = Tally{NotBulk: sv.nb, Bulk: sv.b}
		for j, p := range rc.ids {
			if v, ok := sv.voters[p]; ok && v.at > cutoff {
				if res.UserVotes == nil {
					res.UserVotes = map[string]VoteKind{}
					res.OwnVotes = map[string][]VoteKind{}
				}
				kind := voteFromCode(v.kind)
				mergeUserVotes(res.UserVotes, when, rc.names[j], userVote{kind: kind, at: v.at})
				setOwnVote(res.OwnVotes, rc.names[j], len(keys), i, kind)
			}
		}
	}
}

// lookupCampaign fills the campaign's tally and the recipients' campaign
// votes from the votes on key (CampaignVoteKey).
func (vb *voteBook) lookupCampaign(c *counting, key string, rc rcptSet, t time.Time, res *Result) {
	one := Result{Votes: make([]Tally, 1)}
	vb.lookup(c, []string{key}, rc, t, &one)
	res.CampaignVotes = one.Votes[0]
	for name, kinds := range one.OwnVotes {
		if res.CampaignOwn == nil {
			res.CampaignOwn = map[string]VoteKind{}
		}
		res.CampaignOwn[name] = kinds[0]
	}
}

// clear drops every vote on key.
func (vb *voteBook) clear(key string) {
	if vb.n.Load() == 0 {
		return
	}
	vb.mu.RLock()
	_, ok := vb.bySig[key]
	vb.mu.RUnlock()
	if !ok {
		return
	}
	vb.mu.Lock()
	defer vb.mu.Unlock()
	if sv := vb.bySig[key]; sv != nil {
		for p := range sv.voters {
			vb.unindex(p, key)
		}
		delete(vb.bySig, key)
		vb.n.Store(int64(len(vb.bySig)))
	}
}

func (vb *voteBook) sweep(cutoff int64) {
	vb.mu.Lock()
	defer vb.mu.Unlock()
	for k, sv := range vb.bySig {
		if sv.oldest <= cutoff {
			vb.rebuild(k, sv, cutoff)
		}
	}
}

func (vb *voteBook) size() (keys, votes int) {
	vb.mu.RLock()
	defer vb.mu.RUnlock()
	for _, sv := range vb.bySig {
		votes += len(sv.voters)
	}
	return len(vb.bySig), votes
}

func (vb *voteBook) list(q VoteQuery, voter pseudonym, byVoter bool, cutoff int64) []VoteEntry {
	vb.mu.RLock()
	defer vb.mu.RUnlock()
	var keys []string
	switch {
	case byVoter:
		for k := range vb.byVoter[voter] {
			keys = append(keys, k)
		}
	case len(q.Keys) > 0:
		keys = uniq(q.Keys)
	default:
		for k := range vb.bySig {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []VoteEntry
	for _, k := range keys {
		if !strings.HasPrefix(k, q.KeyPrefix) || (len(q.Keys) > 0 && !slices.Contains(q.Keys, k)) {
			continue
		}
		sv := vb.bySig[k]
		if sv == nil {
			continue
		}
		var ps []pseudonym
		if byVoter {
			ps = []pseudonym{voter}
		} else {
			for p := range sv.voters {
				ps = append(ps, p)
			}
			slices.Sort(ps)
		}
		for _, p := range ps {
			v, ok := sv.voters[p]
			if !ok || v.at <= cutoff {
				continue
			}
			e := VoteEntry{Key: k, VoterID: p.String(), Kind: voteFromCode(v.kind), Time: time.Unix(v.at, 0)}
			if byVoter {
				e.Voter = q.Voter
			}
			out = append(out, e)
			if q.Limit > 0 && len(out) >= q.Limit {
				return out
			}
		}
	}
	return out
}
