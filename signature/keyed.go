package signature

import (
	"fmt"
	"sync"
)

// tokenHasher gives every token one keyed 64-bit hash, shared by all
// families of a Set: each message's tokens are SipHashed once, and each
// family re-keys the results with its own subkeys.
type tokenHasher struct {
	key      sipKey
	boundary uint64 // the document start/end symbol of context hardening
}

func newTokenHasher(s Secret) tokenHasher {
	k := s.derive("token/hash")
	// "\xff" never occurs in valid UTF-8, so no token hashes like this.
	return tokenHasher{key: k, boundary: nonZero(k.str("\xffboundary"))}
}

func (t tokenHasher) hash(tok string) uint64 { return nonZero(t.key.str(tok)) }

// nonZero keeps 0 free as the empty marker of the open-addressing tables.
func nonZero(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

// keyedLexicon indexes a Lexicon by keyed token hash, so a message's terms
// are looked up with the hash every family needs anyway instead of by
// string. It is built once per secret and lexicon.
//
// A slot is a 16-byte record: the top 40 bits of the hash with the term
// index + 1 (24 bits), then termInfo, what the families read about the
// term in signing. Four slots fill a cache line and the table's lines
// are aligned (a large allocation starts on a page), so a token's lookup
// reads one line where it read the slot and then the class, keep, rank and
// df tables apart, and I-Match's context filter for most terms: those were
// half of a message's simulated L2 misses
// (docs/performance.md, "Fifteenth pass"). The load is at most 2/3. Two
// tokens whose keyed hashes share the slot position and those 40 bits
// (probability about 2⁻⁴⁰ per lookup) would be confused.
type keyedLexicon struct {
	lex   *Lexicon
	slots []lexSlot
	mask  uint64
	keep  keepRule // the randomization the records' keep masks are for
}

type lexSlot struct {
	key  uint64 // hash&^(1<<24-1) | term index + 1; 0 = empty
	info termInfo
}

// termInfo packs what the families read about a lexicon term:
//
//	bits  0–1   class
//	bits  2–17  I-Match's keep mask (bit i set = kept in lexicon i)
//	bits 18–33  secondary rank, saturated at rankSaturated
//	bits 34–45  document frequency, saturated at dfSaturated
//	bits 46–53  the term's preceding contexts: bit ctxBit(c) for each
//	bits 54–61  the term's following contexts, likewise
//
// A saturated field is read from the Lexicon (keyedLexicon.rank, .df);
// the bundled lexicon saturates neither. The context bits are a filter
// without false negatives in front of I-Match's set of context pairs (a
// pair counts for both its terms): 33,830 of the bundled lexicon's 40,994
// L and B terms are in none, and a check of such a term reads no table.
type termInfo uint64

const (
	rankSaturated = 1<<16 - 1
	dfSaturated   = 1<<12 - 1
)

func (t termInfo) class() uint8 { return uint8(t & 3) }
func (t termInfo) keep() uint16 { return uint16(t >> 2) }

// mayFollow reports whether the term may have been seen after the token
// of keyed hash prev in training; mayPrecede, before the token of hash next.
func (t termInfo) mayFollow(prev uint64) bool  { return t>>46&ctxBit(prev) != 0 }
func (t termInfo) mayPrecede(next uint64) bool { return t>>54&ctxBit(next) != 0 }

// ctxBit is a context's bit in a term's 8-bit filter: the top 3 bits of
// its keyed hash.
func ctxBit(h uint64) termInfo { return 1 << (h >> 61) }

func newTermInfo(class uint8, keep uint16, rank, df uint32) termInfo {
	return termInfo(class) | termInfo(keep)<<2 | termInfo(min(rank, rankSaturated))<<18 | termInfo(min(df, dfSaturated))<<34
}

// rank returns the secondary rank of term i, whose record is t.
func (k *keyedLexicon) rank(i int32, t termInfo) uint32 {
	if r := uint32(t>>18) & rankSaturated; r != rankSaturated {
		return r
	}
	return k.lex.rank[i]
}

// df returns the document frequency of term i, whose record is t.
func (k *keyedLexicon) df(i int32, t termInfo) uint32 {
	if d := uint32(t>>34) & dfSaturated; d != dfSaturated {
		return d
	}
	return k.lex.df[i]
}

// keepRule is I-Match's lexicon randomization: a term is removed from
// randomized lexicon i when a keyed hash of (term, i) falls below p·2⁶⁴,
// independent Bernoulli(p) removals, the model behind Kolcz's
// 1 − (1 − pⁿ)ᴷ. The zero rule keeps no masks (no I-Match signer).
type keepRule struct {
	member     sipKey
	randomized int
	cut        uint64
}

func newKeepRule(s Secret, p IMatchParams) keepRule {
	return keepRule{member: s.derive("imatch/randomize"), randomized: p.Randomized, cut: uint64(p.RemoveFraction * (1 << 64))}
}

// mask returns the lexicons that keep the term of keyed hash h (bit 0:
// the primary one, which keeps every term).
func (r keepRule) mask(h uint64) uint16 {
	if r == (keepRule{}) {
		return 0
	}
	m := uint16(1)
	for j := 1; j <= r.randomized; j++ {
		if r.member.words(h, uint64(j)) >= r.cut {
			m |= 1 << j
		}
	}
	return m
}

// maxKeyedTerms is the most terms a keyed table can index (24-bit index).
const maxKeyedTerms = 1<<24 - 2

// keyedFor checks what a lexicon-based signer's constructor is given and
// keys the lexicon with s; what names the signer in errors; lexNote says
// which lexicon it needs. It returns the keyed hash of every term too, by
// term index, for the constructor's own tables.
func keyedFor(what string, s Secret, lex *Lexicon, lexNote string, keep keepRule) (tokenHasher, *keyedLexicon, []uint64, error) {
	if s.IsZero() {
		return tokenHasher{}, nil, nil, fmt.Errorf("%s: zero secret", what)
	}
	if lex == nil {
		return tokenHasher{}, nil, nil, fmt.Errorf("%s: no lexicon%s", what, lexNote)
	}
	th := newTokenHasher(s)
	kl, termHash, err := newKeyedLexicon(lex, th, keep)
	if err != nil {
		return tokenHasher{}, nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return th, kl, termHash, nil
}

// newKeyedLexicon keys lex; it returns the keyed hash of every term too, by
// term index, which only constructors need (the table keeps 40 bits).
func newKeyedLexicon(lex *Lexicon, th tokenHasher, keep keepRule) (*keyedLexicon, []uint64, error) {
	n := len(lex.terms)
	if n > maxKeyedTerms {
		return nil, nil, fmt.Errorf("lexicon has %d terms, at most %d supported", n, maxKeyedTerms)
	}
	size := 1
	for size < n+n/2+2 {
		size <<= 1
	}
	k := &keyedLexicon{lex: lex, slots: make([]lexSlot, size), mask: uint64(size - 1), keep: keep}
	termHash := make([]uint64, n)
	at := make([]uint32, n) // each term's slot, for the context bits below
	for i, t := range lex.terms {
		h := th.hash(t)
		termHash[i] = h
		j := h & k.mask
		for k.slots[j].key != 0 {
			j = (j + 1) & k.mask
		}
		at[i] = uint32(j)
		var m uint16
		if lex.class[i] != classDict {
			m = keep.mask(h)
		}
		k.slots[j] = lexSlot{key: h&^(1<<24-1) | uint64(i+1), info: newTermInfo(lex.class[i], m, lex.rank[i], lex.df[i])}
	}
	// A pair (a, b) is a valid context of both its terms: b stored with a
	// before it, or a with b after it, so each term's filter takes the pair.
	pair := func(a, b uint32) {
		if a != 0 {
			k.slots[at[a-1]].info |= ctxBit(contextHash(th, termHash, b)) << 54
		}
		if b != 0 {
			k.slots[at[b-1]].info |= ctxBit(contextHash(th, termHash, a)) << 46
		}
	}
	for _, e := range lex.ctx {
		for _, id := range e.left {
			pair(id, e.term+1)
		}
		for _, id := range e.right {
			pair(e.term+1, id)
		}
	}
	return k, termHash, nil
}

// contextHash is the keyed hash of a stored context: term id − 1, or the
// text's boundary for id 0.
func contextHash(th tokenHasher, termHash []uint64, id uint32) uint64 {
	if id == 0 {
		return th.boundary
	}
	return termHash[id-1]
}

// lookup returns the term index and record of a keyed token hash, or -1.
func (k *keyedLexicon) lookup(h uint64) (int32, termInfo) {
	tag := h &^ (1<<24 - 1)
	j := h & k.mask
	for {
		s := &k.slots[j]
		if s.key == 0 {
			return -1, 0
		}
		if s.key&^(1<<24-1) == tag {
			return int32(s.key&(1<<24-1)) - 1, s.info
		}
		j = (j + 1) & k.mask
	}
}

// prepared is the per-message work shared by the families of a Set.
type prepared struct {
	th    []uint64   // keyed hash per token
	lex   []int32    // lexicon term index per token, or -1
	info  []termInfo // lexicon record per token (valid when lex >= 0)
	kolcz []bool     // IMatchTerm per token
}

var preparedPool = sync.Pool{New: func() any { return new(prepared) }}

// prepare hashes the tokens of d (and looks them up in kl when it is not
// nil). Release the result with release.
func prepare(d *Doc, th tokenHasher, kl *keyedLexicon) *prepared {
	p := preparedPool.Get().(*prepared)
	n := len(d.Tokens)
	p.th = grow(p.th, n)
	p.kolcz = grow(p.kolcz, n)
	for i, t := range d.Tokens {
		p.th[i] = th.hash(t)
		p.kolcz[i] = IMatchTerm(t)
	}
	if kl != nil {
		p.lex = grow(p.lex, n)
		p.info = grow(p.info, n)
		for i, h := range p.th {
			p.lex[i], p.info[i] = kl.lookup(h)
		}
	} else {
		p.lex, p.info = p.lex[:0], p.info[:0]
	}
	return p
}

func (p *prepared) release() { recycle(&preparedPool, p, cap(p.th)) }

// grow returns s resized to n elements, reusing its storage when possible.
func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n, n+n/4)
}

// u64set is an immutable open-addressing set of non-zero 64-bit values,
// with a one-bit-per-value filter in front: most lookups (I-Match's
// context pairs) miss, and the filter, 16 bits a value, answers nearly all
// of them from a table a quarter of the slots' size, where a probe of the
// slots went to memory (docs/performance.md, "Sixth pass, the analysis").
// The filter has no false negatives, so the answers are the slots'. The
// slots are loaded up to 3/4: behind the terms' own context filters
// (termInfo) few lookups reach them, and at 1/2 the bundled lexicon's
// pairs took 1 MB for no fewer misses ("Fifteenth pass").
type u64set struct {
	slots  []uint64
	mask   uint64
	filter []uint64 // bit (v>>32)&fmask set for every value v
	fmask  uint64
}

func newU64set(vals []uint64) u64set {
	size := 1
	for 3*size < 4*len(vals)+2 {
		size <<= 1
	}
	s := u64set{slots: make([]uint64, size), mask: uint64(size - 1)}
	bits := 64
	for bits < 16*len(vals) {
		bits <<= 1
	}
	s.filter, s.fmask = make([]uint64, bits/64), uint64(bits-1)
	for _, v := range vals {
		v = nonZero(v)
		j := v & s.mask
		for s.slots[j] != 0 && s.slots[j] != v {
			j = (j + 1) & s.mask
		}
		s.slots[j] = v
		f := (v >> 32) & s.fmask
		s.filter[f>>6] |= 1 << (f & 63)
	}
	return s
}

func (s u64set) has(v uint64) bool {
	v = nonZero(v)
	if f := (v >> 32) & s.fmask; s.filter[f>>6]&(1<<(f&63)) == 0 {
		return false
	}
	j := v & s.mask
	for {
		switch s.slots[j] {
		case v:
			return true
		case 0:
			return false
		}
		j = (j + 1) & s.mask
	}
}

// maxPooled is the largest scratch slice (in elements) kept in a pool: a
// rare huge message must not pin its buffers for the life of the process.
const maxPooled = 1 << 18

// recycle returns a scratch value to its pool unless it grew too large.
func recycle[T any](pool *sync.Pool, v *T, size int) {
	if size <= maxPooled {
		pool.Put(v)
	}
}
