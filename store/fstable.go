package store

// fsTable holds the embedded store's first sightings of one time bucket in
// one shard: signature hash → 32-bit fingerprint of the one recipient seen
// so far. Open addressing with linear probing in two flat arrays costs 12
// bytes a slot (about 20 per entry at the average load), where a Go map
// entry cost about 38.
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

func (t *fsTable) slot(k uint64) int {
	return int(mix64(k) & uint64(len(t.keys)-1))
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
