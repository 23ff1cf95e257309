package store

import (
	"cmp"
	"slices"
)

// fsRec is a campaign's first sighting: all a campaign of one message
// knows, in 20 bytes as Redis's record. Most campaigns are one message
// (every ham message is one); the full record (cmeta and a counter) is made
// only from a campaign's second message.
type fsRec struct {
	key      uint32 // ref | recUsed; without recUsed: an empty slot or a removed record
	fp       uint32 // the recipient's fingerprint
	first    uint32 // unix s
	origin   uint32
	net, snd uint16 // fp16 of the network and the sender, 0: none
}

const recUsed = 1 << 31

func (r fsRec) ref() uint32 { return r.key &^ recUsed }
func (r fsRec) used() bool  { return r.key&recUsed != 0 }

// recTable holds the first sightings of one time bucket in one shard: a
// slice sorted by ref (packed), where a record costs its 20 bytes, and an
// open-addressed table (linear probing) beside it for the newest, merged
// into the slice when it holds an eighth as many (recPut) and when a newer
// bucket is written. Removed records (a campaign's second message) stay as
// holes until the next merge.
type recTable struct {
	id     int64
	t      []fsRec // open addressing; len a power of two, or nil
	tn     int
	packed []fsRec // sorted by ref
	pn     int     // used records in packed
}

func (b *recTable) size() int       { return b.tn + b.pn }
func (b *recTable) empty() bool     { return b.t == nil && b.packed == nil }
func (b *recTable) drop()           { b.t, b.tn, b.packed, b.pn = nil, 0, nil, 0 }
func recSlot(ref uint32, n int) int { return int(mix64(uint64(ref))>>32) & (n - 1) }

// get returns campaign ref's record.
func (b *recTable) get(ref uint32) (fsRec, bool) {
	if b.tn > 0 {
		mask := len(b.t) - 1
		for i := recSlot(ref, len(b.t)); b.t[i].used(); i = (i + 1) & mask {
			if b.t[i].ref() == ref {
				return b.t[i], true
			}
		}
	}
	if i, ok := b.find(ref); ok {
		return b.packed[i], true
	}
	return fsRec{}, false
}

func (b *recTable) find(ref uint32) (int, bool) {
	if b.pn == 0 {
		return 0, false
	}
	i, ok := slices.BinarySearchFunc(b.packed, ref, func(r fsRec, ref uint32) int { return cmp.Compare(r.ref(), ref) })
	return i, ok && b.packed[i].used()
}

// put records r (r.key set) and reports whether its ref is new.
func (b *recTable) put(r fsRec) bool {
	if i, ok := b.find(r.ref()); ok {
		b.packed[i] = r
		return false
	}
	if (b.tn+1)*8 > len(b.t)*7 {
		old := b.t
		b.t, b.tn = make([]fsRec, max(fsMinSlots, 2*len(old))), 0
		for _, o := range old {
			if o.used() {
				b.put(o)
			}
		}
	}
	mask := len(b.t) - 1
	i := recSlot(r.ref(), len(b.t))
	for ; b.t[i].used(); i = (i + 1) & mask {
		if b.t[i].ref() == r.ref() {
			b.t[i] = r
			return false
		}
	}
	b.t[i] = r
	b.tn++
	return true
}

// del removes campaign ref's record.
func (b *recTable) del(ref uint32) bool {
	if i, ok := b.find(ref); ok {
		b.packed[i].key &^= recUsed
		b.pn--
		return true
	}
	if b.tn == 0 {
		return false
	}
	mask := len(b.t) - 1
	i := recSlot(ref, len(b.t))
	for ; b.t[i].ref() != ref; i = (i + 1) & mask {
		if !b.t[i].used() {
			return false
		}
	}
	if !b.t[i].used() {
		return false
	}
	// Shift later records of the probe run back (no tombstones), as
	// fsTable.del does.
	for j := (i + 1) & mask; b.t[j].used(); j = (j + 1) & mask {
		h := recSlot(b.t[j].ref(), len(b.t))
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			b.t[i] = b.t[j]
			i = j
		}
	}
	b.t[i] = fsRec{}
	b.tn--
	return true
}

// pack moves the open table's records into the sorted slice, dropping
// removed ones.
func (b *recTable) pack() {
	add := make([]fsRec, 0, b.tn)
	for _, r := range b.t {
		if r.used() {
			add = append(add, r)
		}
	}
	slices.SortFunc(add, func(x, y fsRec) int { return cmp.Compare(x.ref(), y.ref()) })
	recs := make([]fsRec, 0, b.pn+b.tn)
	for _, r := range b.packed {
		if !r.used() {
			continue
		}
		for ; len(add) > 0 && add[0].ref() < r.ref(); add = add[1:] {
			recs = append(recs, add[0])
		}
		recs = append(recs, r)
	}
	recs = append(recs, add...)
	b.packed, b.pn, b.t, b.tn = recs, len(recs), nil, 0
}

// each calls fn for every record.
func (b *recTable) each(fn func(fsRec)) {
	for _, s := range [][]fsRec{b.packed, b.t} {
		for _, r := range s {
			if r.used() {
				fn(r)
			}
		}
	}
}
