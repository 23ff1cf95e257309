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
// A slot packs the top 40 bits of the hash with the term index + 1 (24
// bits): 8-byte slots at a load of at most 2/3 keep the table small
// enough to stay in cache. Two tokens whose keyed hashes share the slot
// position and those 40 bits (probability about 2⁻⁴⁰ per lookup) would be
// confused.
type keyedLexicon struct {
	lex   *Lexicon
	th    []uint64 // keyed hash of each term, by term index
	slots []uint64
	mask  uint64
}

// maxKeyedTerms is the most terms a keyed table can index (24-bit index).
const maxKeyedTerms = 1<<24 - 2

// keyedFor checks what a lexicon-based signer's constructor is given and
// keys the lexicon with s; what names the signer in errors; lexNote says
// which lexicon it needs.
func keyedFor(what string, s Secret, lex *Lexicon, lexNote string) (tokenHasher, *keyedLexicon, error) {
	if s.IsZero() {
		return tokenHasher{}, nil, fmt.Errorf("%s: zero secret", what)
	}
	if lex == nil {
		return tokenHasher{}, nil, fmt.Errorf("%s: no lexicon%s", what, lexNote)
	}
	th := newTokenHasher(s)
	kl, err := newKeyedLexicon(lex, th)
	if err != nil {
		return tokenHasher{}, nil, fmt.Errorf("%s: %w", what, err)
	}
	return th, kl, nil
}

func newKeyedLexicon(lex *Lexicon, th tokenHasher) (*keyedLexicon, error) {
	n := len(lex.terms)
	if n > maxKeyedTerms {
		return nil, fmt.Errorf("lexicon has %d terms, at most %d supported", n, maxKeyedTerms)
	}
	size := 1
	for size < n+n/2+2 {
		size <<= 1
	}
	k := &keyedLexicon{lex: lex, th: make([]uint64, n), slots: make([]uint64, size), mask: uint64(size - 1)}
	for i, t := range lex.terms {
		h := th.hash(t)
		k.th[i] = h
		j := h & k.mask
		for k.slots[j] != 0 {
			j = (j + 1) & k.mask
		}
		k.slots[j] = h&^(1<<24-1) | uint64(i+1)
	}
	return k, nil
}

// lookup returns the term index and class of a keyed token hash, or -1.
func (k *keyedLexicon) lookup(h uint64) (int32, uint8) {
	tag := h &^ (1<<24 - 1)
	j := h & k.mask
	for {
		s := k.slots[j]
		if s == 0 {
			return -1, 0
		}
		if s&^(1<<24-1) == tag {
			i := int32(s&(1<<24-1)) - 1
			return i, k.lex.class[i]
		}
		j = (j + 1) & k.mask
	}
}

// prepared is the per-message work shared by the families of a Set.
type prepared struct {
	th    []uint64 // keyed hash per token
	lex   []int32  // lexicon term index per token, or -1
	class []uint8  // lexicon class per token (valid when lex >= 0)
	kolcz []bool   // IMatchTerm per token
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
		p.class = grow(p.class, n)
		for i, h := range p.th {
			p.lex[i], p.class[i] = kl.lookup(h)
		}
	} else {
		p.lex, p.class = p.lex[:0], p.class[:0]
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
// of them from a table an eighth of the slots' size, where a probe of the
// slots went to memory (docs/performance.md, "Sixth pass, the analysis").
// The filter has no false negatives, so the answers are the slots'.
type u64set struct {
	slots  []uint64
	mask   uint64
	filter []uint64 // bit (v>>32)&fmask set for every value v
	fmask  uint64
}

func newU64set(vals []uint64) u64set {
	size := 1
	for size < 2*len(vals)+2 {
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
