package store

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
)

// Message slots (issue 15): the embedded store's pointers name their
// campaign by a slot of their time bucket, not by its ref. A message
// takes one slot of the bucket it writes in and stores its campaign's
// ref there once; its 43 or so keys keep the slot, as many bits as the
// bucket has messages (bitVals), where each kept the 29-bit ref. About
// 4 bytes a message for the slot against 1.6 saved on each key at
// 62,500 messages a bucket (docs/performance.md).
//
// The slots are store-wide, one ring of buckets beside the pointer
// shards' rings, under a lock of its own taken after theirs: once a
// message for its reads, once for its writes. A pointer of bucket b is
// read through the slots of bucket b only: a ring slot that holds
// another bucket (one that left the window, or one ahead of the clock
// that the present took over, ahead.go) resolves none of its pointers,
// which are then as absent. Nor does a later incarnation of the same
// bucket: each bucket's slots get a generation when made, a pointer table
// keeps the generation of its bucket's slots when made (fsBucket.gen), and
// a table of another generation (left behind by a clock stepped back, or
// forward, between sweeps) is as absent and is replaced by the next write.
// The slots are not counted in MaxEntries (one a message, against its
// 43 or so pointers): they leave with their bucket, at the sweep.

// slotPageBits: slots are kept in pages of 4,096 refs, so that a
// bucket's table grows without copying and without the spare half a
// doubled slice keeps.
const slotPageBits = 12

// maxSlots bounds a bucket's slots: a pointer value keeps a slot and a
// 3-bit switch count in 32 bits.
const maxSlots = 1 << (32 - switchBits)

type slotRing struct {
	mu   sync.RWMutex
	b    []slotBucket // ring of nb buckets
	gens uint64       // generations given
}

type slotBucket struct {
	id    int64
	gen   uint64 // 0: none
	n     uint32
	pages [][]uint32
	cls   [][]uint8 // the class its main keys keep (ptr.class), per slot
}

// fresh makes the ring's slot of bucket id a new generation of it.
func (r *slotRing) fresh(sb *slotBucket, id int64) {
	r.gens++
	*sb = slotBucket{id: id, gen: r.gens}
}

// gen returns the generation of bucket b's slots (0: none); the caller
// holds r.mu.
func (r *slotRing) gen(b int64) uint64 {
	if sb := &r.b[mod(b, int64(len(r.b)))]; sb.id == b {
		return sb.gen
	}
	return 0
}

func (r *slotRing) init(nb int) { r.b = make([]slotBucket, nb) }

// ref returns the ref and class in slot s of bucket b's slots of
// generation gen; the caller holds r.mu.
func (r *slotRing) ref(b int64, gen uint64, s uint32) (uint32, uint8, bool) {
	sb := &r.b[mod(b, int64(len(r.b)))]
	if sb.id != b || sb.gen != gen || s >= sb.n {
		return 0, 0, false
	}
	pg, i := s>>slotPageBits, s&(1<<slotPageBits-1)
	return sb.pages[pg][i], sb.cls[pg][i], true
}

// take returns a new slot of bucket cb holding ref and class c, and the generation of
// cb's slots, or false when the
// ring's slot holds a newer bucket that is not ahead of the clock (cb
// has left the window held here: its pointers would be refused too);
// aheadOf is the last bucket not ahead. The caller holds r.mu.
func (r *slotRing) take(cb, aheadOf int64, ref uint32, c uint8) (uint32, uint64, bool) {
	sb := &r.b[mod(cb, int64(len(r.b)))]
	if sb.id != cb || sb.gen == 0 {
		if sb.gen != 0 && supersedes(sb.id, cb, aheadOf) {
			return 0, 0, false
		}
		r.fresh(sb, cb)
	}
	if sb.n >= maxSlots {
		return 0, 0, false
	}
	s := sb.n
	if s&(1<<slotPageBits-1) == 0 {
		sb.pages = append(sb.pages, make([]uint32, 0, 1<<slotPageBits))
		sb.cls = append(sb.cls, make([]uint8, 0, 1<<slotPageBits))
	}
	p := &sb.pages[len(sb.pages)-1]
	*p = append(*p, ref)
	pc := &sb.cls[len(sb.cls)-1]
	*pc = append(*pc, c)
	sb.n++
	return s, sb.gen, true
}

// sweep drops the buckets outside [oldest, ahead].
func (r *slotRing) sweep(oldest, ahead int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.b {
		if sb := &r.b[i]; sb.gen != 0 && (sb.id < oldest || sb.id > ahead) {
			r.b[i] = slotBucket{}
		}
	}
}

// slotGens gives the pointer tables read from a file the generation of
// their bucket's slots, read from the same file (after the pointers; a
// bucket without slots keeps 0, and its pointers name none).
func (e *Embedded) slotGens() {
	for i := range e.ptrs {
		ps := &e.ptrs[i]
		ps.mu.Lock() // a pointer shard's lock before the slots' (campaign)
		e.slots.mu.RLock()
		for _, ring := range [][]fsBucket{ps.tabs, ps.stabs} {
			for j := range ring {
				if b := &ring[j]; !b.empty() {
					b.gen = e.slots.gen(b.id)
				}
			}
		}
		e.slots.mu.RUnlock()
		ps.mu.Unlock()
	}
}

// slotVal is a pointer's stored value: slot s and p's switch count in
// the low switchBits.
func slotVal(s uint32, p ptr) uint32 { return s<<switchBits | uint32(p.switches()) }

// switchBits: a stored value's switch count (ptr.switches).
const switchBits = 3

// msgSlots are the slots one message took, by ref and class (nearly
// always one), and their bucket's generation.
type msgSlots struct {
	gen  uint64
	refs []msgSlot
}

type msgSlot struct {
	ref, slot uint32
	cls       uint8
}

// valueOf returns the value to store for pointer p of a key in bucket
// cb, and the generation of cb's slots: the key's stored value old (here:
// it has one in cb, naming stored pointer oldp's campaign, of generation
// gen) keeps its slot when p names the same campaign and class (anyClass:
// a support key's, which keeps none); otherwise a slot this message took
// for p's ref, taking one. False: no slot (the key is not written).
func (e *Embedded) valueOf(ms *msgSlots, cb int64, p ptr, old uint32, oldp ptr, gen uint64, here, anyClass bool) (uint32, uint64, bool) {
	if here && oldp.ref() == p.ref() && (anyClass || oldp.class() == p.class()) {
		return slotVal(old>>switchBits, p), gen, true
	}
	for _, m := range ms.refs {
		if m.ref == p.ref() && (anyClass || m.cls == p.class()) {
			return slotVal(m.slot, p), ms.gen, true
		}
	}
	e.slots.mu.Lock()
	s, g, ok := e.slots.take(cb, e.c.aheadBucket(), p.ref(), p.class())
	e.slots.mu.Unlock()
	if !ok {
		return 0, 0, false
	}
	if g != ms.gen {
		ms.gen, ms.refs = g, ms.refs[:0]
	}
	ms.refs = append(ms.refs, msgSlot{p.ref(), s, p.class()})
	return slotVal(s, p), g, true
}

// appendSlots appends the slots of the live buckets: i64 bucket, u32
// first slot, u32 n, n × (u32 ref, u8 class), at most 2¹⁶ slots a record; flush takes
// each record, and the lock is not held while it writes.
func (r *slotRing) appendSlots(b []byte, oldest int64, flush func([]byte) []byte) []byte {
	for i := range r.b {
		r.mu.RLock()
		id, gen := r.b[i].id, r.b[i].gen
		r.mu.RUnlock()
		for s := uint32(0); ; {
			r.mu.RLock()
			sb := &r.b[i]
			if gen == 0 || sb.id < oldest || sb.id != id || sb.gen != gen || s >= sb.n {
				r.mu.RUnlock()
				break
			}
			n := min(sb.n-s, 1<<16)
			b = le64(b, uint64(sb.id))
			b = le32(b, s)
			b = le32(b, n)
			for j := s; j < s+n; j++ {
				b = le32(b, sb.pages[j>>slotPageBits][j&(1<<slotPageBits-1)])
				b = append(b, sb.cls[j>>slotPageBits][j&(1<<slotPageBits-1)])
			}
			r.mu.RUnlock()
			s += n
			b = flush(b)
		}
	}
	return b
}

// loadSlots reads slots (chunk 14) of a file of the given version (before
// 7: no class, read as none known): each record continues its bucket's
// slots where the last one ended.
func (e *Embedded) loadSlots(b []byte, version uint32) error {
	size := 5
	if version < 7 {
		size = 4
	}
	d := &decoder{b: b}
	r := &e.slots
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(d.b) > 0 && !d.bad {
		id, first := int64(d.u64()), d.u32()
		n := d.count(size)
		if d.bad {
			break
		}
		refs := d.take(size * n)
		sb := &r.b[mod(id, int64(len(r.b)))]
		if sb.gen == 0 || sb.id < id {
			r.fresh(sb, id)
		}
		if sb.id != id {
			continue // a newer bucket holds the ring's slot
		}
		if first != sb.n {
			d.bad = true
			break
		}
		for j := 0; j < len(refs) && !d.bad; j += size {
			ref, c := binary.LittleEndian.Uint32(refs[j:]), uint8(0)
			if size == 5 {
				c = refs[j+4]
			}
			// A ref wider than a pointer holds is damage, found before
			// its slot is taken: a slot taken would be saved again.
			if ref > refMask {
				d.bad = true
			} else if _, _, ok := r.take(id, math.MaxInt64, ref, c); !ok {
				d.bad = true
			}
		}
	}
	if d.bad {
		return fmt.Errorf("message slots: %w", errRecord)
	}
	return nil
}

// legacySlots converts the pointers of a file of version 5 or before,
// which kept the ref itself, to slots: one a campaign and bucket.
type legacySlots struct {
	e    *Embedded
	seen map[int64]map[uint32]uint32
}

func (l *legacySlots) value(id int64, v uint32) (uint32, bool) {
	p := ptr(v)
	if l.seen == nil {
		l.seen = map[int64]map[uint32]uint32{}
	}
	m := l.seen[id]
	if m == nil {
		m = map[uint32]uint32{}
		l.seen[id] = m
	}
	if s, ok := m[p.ref()]; ok {
		return slotVal(s, p), true
	}
	l.e.slots.mu.Lock()
	s, _, ok := l.e.slots.take(id, math.MaxInt64, p.ref(), 0)
	l.e.slots.mu.Unlock()
	if !ok {
		return 0, false
	}
	m[p.ref()] = s
	return slotVal(s, p), true
}
