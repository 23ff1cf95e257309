package store

import (
	"cmp"
	"math/bits"
	"slices"
)

// fsTable holds the newest key pointers of one time bucket in one shard
// (signature hash → ptr), until they are packed (denseTable). Open
// addressing with linear probing in two flat arrays costs 12 bytes a slot
// (about 20 per entry at the average load), where a Go map entry cost
// about 38.
type fsTable struct {
	keys []uint64 // 0: empty slot (a signature hash of 0 is stored as 1)
	fps  []uint32
	n    int
}

const fsMinSlots = 16

func fsKey(sig uint64) uint64 {
	if sig == 0 {
		return 1
	}
	return sig
}

// fingerprint is what first sightings keep of a recipient: the low 32 bits
// of its pseudonym (Redis keeps the same).
func fingerprint(p pseudonym) uint32 { return uint32(p) }

// placeholder stands in an exact set for a first recipient known only by
// its fingerprint; pseudonyms are 48 bits, so bit 63 cannot clash.
func placeholder(fp uint32) pseudonym { return pseudonym(1<<63 | uint64(fp)) }

// slot is the home slot of k. It uses the high half of the mixed hash: the
// low bits chose the shard (mix64(sig) % 64), so within one shard they are
// all alike and would crowd a 64th of the slots.
func (t *fsTable) slot(k uint64) int {
	return int((mix64(k) >> 32) & uint64(len(t.keys)-1))
}

// get returns the fingerprint recorded for sig.
func (t *fsTable) get(sig uint64) (uint32, bool) {
	if t.n == 0 {
		return 0, false
	}
	k := fsKey(sig)
	for i := t.slot(k); ; i = (i + 1) & (len(t.keys) - 1) {
		switch t.keys[i] {
		case k:
			return t.fps[i], true
		case 0:
			return 0, false
		}
	}
}

// has reports whether sig is recorded.
func (t *fsTable) has(sig uint64) bool {
	_, ok := t.get(sig)
	return ok
}

// put records sig → fp and reports whether sig is new.
func (t *fsTable) put(sig uint64, fp uint32) bool {
	if (t.n+1)*8 > len(t.keys)*7 {
		t.grow()
	}
	k := fsKey(sig)
	for i := t.slot(k); ; i = (i + 1) & (len(t.keys) - 1) {
		switch t.keys[i] {
		case k:
			t.fps[i] = fp
			return false
		case 0:
			t.keys[i], t.fps[i] = k, fp
			t.n++
			return true
		}
	}
}

// del removes sig, shifting later entries of its probe run back so that
// lookups never stop at a hole (no tombstones).
func (t *fsTable) del(sig uint64) bool {
	if t.n == 0 {
		return false
	}
	k := fsKey(sig)
	mask := len(t.keys) - 1
	i := t.slot(k)
	for ; t.keys[i] != k; i = (i + 1) & mask {
		if t.keys[i] == 0 {
			return false
		}
	}
	for j := (i + 1) & mask; t.keys[j] != 0; j = (j + 1) & mask {
		h := t.slot(t.keys[j])
		// Move j into the hole at i unless its home h lies cyclically in
		// (i, j].
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			t.keys[i], t.fps[i] = t.keys[j], t.fps[j]
			i = j
		}
	}
	t.keys[i], t.fps[i] = 0, 0
	t.n--
	return true
}

// newFSTable returns a table sized for n entries. Loading must size the
// table up front: entries come in the slot order of the table that was
// saved, and inserting them into a small growing table would pack them into
// its first slots and make later probe runs long (10s instead of 0.5s for
// 10M entries).
func newFSTable(n int) *fsTable {
	size := fsMinSlots
	for size*7 < (n+1)*8 {
		size *= 2
	}
	return &fsTable{keys: make([]uint64, size), fps: make([]uint32, size)}
}

func (t *fsTable) grow() {
	size := max(fsMinSlots, 2*len(t.keys))
	old, oldFP := t.keys, t.fps
	t.keys, t.fps, t.n = make([]uint64, size), make([]uint32, size), 0
	for i, k := range old {
		if k != 0 {
			t.put(k, oldFP[i])
		}
	}
}

// each calls fn for every entry.
func (t *fsTable) each(fn func(sig uint64, fp uint32)) {
	for i, k := range t.keys {
		if k != 0 {
			fn(k, t.fps[i])
		}
	}
}

// denseTable holds the pointers of a closed bucket, which only change in
// place: entries sorted by the key's mixed hash and grouped by its top
// gbits bits (4 to 8 a group: groupTarget), each with the next cbits bits
// of the hash (its check) and its value. A key is told apart by 6 bits
// (the shard: the low bits) + gbits + cbits: another key matches a lookup
// with probability about its group's length/2^cbits. A table of the
// families that name a campaign keeps 32 bits of check (~6/2³², as
// Redis's 32-bit record in a string of a few hundred, 1/2³² a record);
// one of the support families' keys (supportFamily), which cannot join a
// campaign alone, keeps 16 (~6/2¹⁶: the false matches are measured in
// docs/performance.md).
//
// Group g's entries are [start(g), start(g+1)): an 8-bit offset per group
// from a 32-bit base per 16 groups (about 100 entries): 10 bits a group,
// where 16-bit offsets took 16. A table one of whose blocks spans 2⁸
// entries or more (groups far fuller than packBits forecast) keeps 16-bit
// offsets from a base per 256 groups, and one that spans 2¹⁶ (never seen)
// keeps the starts themselves (idx32). About 6 bytes an entry with a
// 16-bit check, 8 with a 32-bit one, where an fsTable slot costs 15 at
// its average load.
type denseTable struct {
	idx8    []uint8  // group g starts at base[g>>idx8BlockBits] + idx8[g]
	idx     []uint16 // else at base[g>>idxBlockBits] + idx[g]
	base    []uint32
	idx32   []uint32 // else at idx32[g]
	check   []uint32 // cbits 32, else nil
	check16 []uint16 // cbits 16, else nil
	vals    bitVals
	n       int
	gbits   uint
	cbits   uint // 32 or 16
	// shift: switchBits when every value's switch count is 0 and is not
	// kept (0: kept). A table packed from an open one keeps its few
	// switched pointers open instead (packed), 3 bits an entry saved.
	shift uint
}

// A 32-bit base per 2^idx8BlockBits groups for 8-bit offsets, per
// 2^idxBlockBits for 16-bit ones.
const (
	idx8BlockBits = 4
	idxBlockBits  = 8
)

// denseBits is the number of group bits for n entries: about four a
// group.
func denseBits(n int) uint { return uint(bits.Len(uint(n / 4))) }

// groupTarget is the entries a packed group holds, about: groupBits
// gives a table of n entries 4 to 8 a group (denseBits, 2 to 4, was the
// rule before 2026-11-27; files of version 3 are still read with it). A
// lookup scans one group, so longer groups cost a few comparisons and
// double the false matches (docs/performance.md), for half the index:
// −18 B a message at 43 keys.
const groupTarget = 8

// groupBits is the number of group bits for n entries (groupTarget).
func groupBits(n int) uint { return uint(bits.Len(uint(n / groupTarget))) }

// denseHash is what a dense table keeps of a key's hash: its top
// cbits+gbits bits (gbits ≤ 26 leaves the shard's low bits out).
func denseHash(sig uint64) uint64 { return mix64(fsKey(sig)) }

func (d *denseTable) parts(h uint64) (g uint64, check uint32) {
	return h >> (64 - d.gbits), uint32(h>>(64-d.gbits-d.cbits)) & (1<<d.cbits - 1)
}

// len is the number of entries.
func (d *denseTable) len() int { return d.n }

// val is entry i's value.
func (d *denseTable) val(i int) uint32 { return d.vals.get(i) << d.shift }

// set stores v as entry i's value, unless it does not fit: wider than
// the table's values, or with a switch count where it keeps none.
func (d *denseTable) set(i int, v uint32) bool {
	return v&(1<<d.shift-1) == 0 && d.vals.set(i, v>>d.shift)
}

// bitVals holds values of w bits each (w ≤ 32) back to back in 64-bit
// words. A pointer's value is a slot of its bucket's message slots
// (slots.go) and a 3-bit switch count: as many bits as the bucket has
// messages, 16 at 62,500 a bucket (19 in a table that keeps the counts),
// where a ref took 32.
type bitVals struct {
	w     uint
	words []uint64
}

func newBitVals(n int, w uint) bitVals {
	return bitVals{w: w, words: make([]uint64, (n*int(w)+63)/64)}
}

func (b *bitVals) get(i int) uint32 {
	if b.w == 0 {
		return 0
	}
	at := uint(i) * b.w
	k, off := at/64, at%64
	v := b.words[k] >> off
	if off+b.w > 64 {
		v |= b.words[k+1] << (64 - off)
	}
	return uint32(v & (1<<b.w - 1))
}

// set stores v at i, unless it is wider than w.
func (b *bitVals) set(i int, v uint32) bool {
	if uint64(v)>>b.w != 0 {
		return false
	}
	if b.w == 0 {
		return true
	}
	at := uint(i) * b.w
	k, off := at/64, at%64
	mask := uint64(1)<<b.w - 1
	b.words[k] = b.words[k]&^(mask<<off) | uint64(v)<<off
	if off+b.w > 64 {
		s := 64 - off
		b.words[k+1] = b.words[k+1]&^(mask>>s) | uint64(v)>>s
	}
	return true
}

// start is the index of group g's first entry (g ≤ 1<<gbits: the last is
// the end).
func (d *denseTable) start(g uint64) uint32 {
	switch {
	case d.idx8 != nil:
		return d.base[g>>idx8BlockBits] + uint32(d.idx8[g])
	case d.idx32 != nil:
		return d.idx32[g]
	}
	return d.base[g>>idxBlockBits] + uint32(d.idx[g])
}

// hv is a hash (denseHash, or its top cbits+gbits bits as saved) and its
// value.
type hv struct {
	h uint64
	v uint32
}

// newDense builds a dense table of gbits group bits (≤ 26) and cbits bits
// of check (32 or 16) from the entries of d (nil: none; a packed table
// keeps no more of its hashes than its bits allow, so they stay, and so
// do its check bits) and add, whose order it changes. An entry of add
// replaces d's of the same saved hash: it is the newer value of the key,
// too wide to be set in place (ptrPut). Its values take the bits of the
// widest, without the switch count when every one's is 0.
func newDense(d *denseTable, add []hv, gbits, cbits uint) *denseTable {
	slices.SortFunc(add, func(a, b hv) int { return cmp.Compare(a.h, b.h) })
	n := len(add)
	var widest, counts uint32
	for _, a := range add {
		widest, counts = max(widest, a.v), counts|a.v
	}
	if d != nil {
		n += d.len()
		cbits = d.cbits
		widest = max(widest, uint32(uint64(1)<<(d.vals.w+d.shift)-1))
		counts |= 1<<(switchBits-d.shift) - 1
	}
	var shift uint
	if counts&(1<<switchBits-1) == 0 {
		shift = switchBits
	}
	out := &denseTable{gbits: gbits, cbits: cbits, shift: shift, vals: newBitVals(n, uint(bits.Len32(widest>>shift)))}
	if cbits == 16 {
		out.check16 = make([]uint16, n)
	} else {
		out.cbits, out.check = 32, make([]uint32, n)
	}
	starts := make([]uint32, 1<<gbits+1)
	k := 0
	emit := func(h uint64, v uint32) {
		g, c := out.parts(h)
		if out.check != nil {
			out.check[k] = c
		} else {
			out.check16[k] = uint16(c)
		}
		out.vals.set(k, v>>out.shift)
		starts[g+1]++
		k++
	}
	j := 0
	if d != nil {
		// Both in hash order: merge.
		sh := 64 - d.gbits - d.cbits
		d.each(func(h uint64, v uint32) {
			for ; j < len(add) && add[j].h < h; j++ {
				emit(add[j].h, add[j].v)
			}
			if j < len(add) && add[j].h>>sh == h>>sh {
				return // replaced
			}
			emit(h, v)
		})
	}
	for ; j < len(add); j++ {
		emit(add[j].h, add[j].v)
	}
	out.n = k
	if out.check != nil {
		out.check = out.check[:k:k]
	} else {
		out.check16 = out.check16[:k:k]
	}
	for g := 1; g < len(starts); g++ {
		starts[g] += starts[g-1]
	}
	out.setIndex(starts)
	return out
}

// setIndex keeps the groups' starts in 8 bits from a base per block of
// 16, else in 16 from a base per 256, else in 32.
func (d *denseTable) setIndex(starts []uint32) {
	if idx, base, ok := blockIndex[uint8](starts, idx8BlockBits); ok {
		d.idx8, d.base = idx, base
	} else if idx, base, ok := blockIndex[uint16](starts, idxBlockBits); ok {
		d.idx, d.base = idx, base
	} else {
		d.idx32 = starts
	}
}

// blockIndex returns starts as offsets of type T from a base per
// 2^blockBits groups, or false when a block spans more than T holds.
func blockIndex[T uint8 | uint16](starts []uint32, blockBits uint) ([]T, []uint32, bool) {
	base := make([]uint32, (len(starts)-1)>>blockBits+1)
	idx := make([]T, len(starts))
	for g, s := range starts {
		b := g >> blockBits
		if g&(1<<blockBits-1) == 0 {
			base[b] = s
		}
		if uint32(T(s-base[b])) != s-base[b] {
			return nil, nil, false
		}
		idx[g] = T(s - base[b])
	}
	return idx, base, true
}

// packed returns d (nil: none) with t's entries added, in d's group and
// check bits (cbits for a new table), and what stays open (nil: none):
// the pointers with a switch count, when they are at most one in
// switchedOpen of the table and d keeps no counts, so that the packed
// values need no bits for them. An open entry costs about 15 bytes
// against the 3 bits an entry saved, so past a few in a hundred the
// counts are packed.
func packed(d *denseTable, t *fsTable, cbits uint) (*denseTable, *fsTable) {
	n, switched := t.n, 0
	if d != nil {
		n += d.len()
	}
	t.each(func(_ uint64, v uint32) {
		if v&(1<<switchBits-1) != 0 {
			switched++
		}
	})
	open := switched > 0 && switched <= n/switchedOpen && (d == nil || d.shift == switchBits)
	var left *fsTable
	add := make([]hv, 0, t.n)
	t.each(func(sig uint64, v uint32) {
		if open && v&(1<<switchBits-1) != 0 {
			if left == nil {
				left = newFSTable(switched)
			}
			left.put(sig, v)
			return
		}
		add = append(add, hv{denseHash(sig), v})
	})
	if d == nil {
		return newDense(nil, add, min(groupBits(t.n), 26), cbits), left
	}
	return newDense(d, add, d.gbits, cbits), left
}

// switchedOpen: a packed table keeps its switched pointers open while
// they are at most one in switchedOpen of it (packed).
const switchedOpen = 64

// find returns the index of sig's entry.
func (d *denseTable) find(sig uint64) (int, bool) {
	g, c := d.parts(denseHash(sig))
	i, end := d.start(g), d.start(g+1)
	if d.check != nil {
		for ; i < end; i++ {
			if d.check[i] == c {
				return int(i), true
			}
		}
		return 0, false
	}
	for ; i < end; i++ {
		if uint32(d.check16[i]) == c {
			return int(i), true
		}
	}
	return 0, false
}

// each calls fn for every entry with the saved form of its hash: the top
// cbits+gbits bits.
func (d *denseTable) each(fn func(h uint64, v uint32)) {
	sh := 64 - d.gbits - d.cbits
	for g := range uint64(1) << d.gbits {
		for i := d.start(g); i < d.start(g+1); i++ {
			c := uint64(0)
			if d.check != nil {
				c = uint64(d.check[i])
			} else {
				c = uint64(d.check16[i])
			}
			fn(g<<(64-d.gbits)|c<<sh, d.val(int(i)))
		}
	}
}
