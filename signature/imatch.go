package signature

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync"
)

// Hardening says how context hardening (Kolcz & Chowdhury, "Hardening
// fingerprinting by context") is used.
type Hardening string

// Hardening modes.
const (
	// HardeningOff computes plain I-Match signatures only.
	HardeningOff Hardening = "off"
	// HardeningOnly replaces plain signatures by hardened ones: a lexicon
	// term counts only where it occurs in a context seen in training.
	HardeningOnly Hardening = "only"
	// HardeningAlso adds hardened signatures to the plain ones as extra
	// coordinates (Key.Index HardenedIndex+i).
	HardeningAlso Hardening = "also"
)

// HardenedIndex is added to the lexicon number in Key.Index of hardened
// I-Match keys, so plain and hardened coordinates never share an index.
const HardenedIndex = 16

// MaxRandomized is the largest number of randomized lexicons.
const MaxRandomized = 15

// IMatchParams tune the I-Match family.
type IMatchParams struct {
	Enabled bool
	// MinTerms rejects a signature over fewer terms (Kolcz: 5).
	MinTerms int
	// MinRatio is the least |S|/|U|, the share of the document's unique
	// terms the signature covers (Kolcz 2008 §3). Below it, terms of the
	// secondary lexicon are added by rank until it holds; if it still does
	// not, the signature is rejected. 0 disables both.
	MinRatio float64
	// Randomized is K, the number of extra lexicons, each the primary and
	// secondary lexicons with a random fraction RemoveFraction of terms
	// removed (Kolcz 2004/2008 §4). Membership is a keyed hash of the term
	// and the lexicon number: secret, and free of storage.
	Randomized     int
	RemoveFraction float64
	// Hardening selects plain, hardened or both kinds of signatures.
	Hardening Hardening
}

// DefaultIMatchParams returns the defaults; docs/signatures.md gives the
// measurements behind them.
func DefaultIMatchParams() IMatchParams {
	return IMatchParams{
		Enabled:        true,
		MinTerms:       5,
		MinRatio:       0.1,
		Randomized:     5,
		RemoveFraction: 0.33,
		Hardening:      HardeningAlso,
	}
}

// Validate reports every invalid parameter.
func (p IMatchParams) Validate() error {
	var errs []error
	if p.MinTerms < 1 {
		errs = append(errs, fmt.Errorf("imatch min terms %d must be at least 1", p.MinTerms))
	}
	if !(p.MinRatio >= 0 && p.MinRatio <= 1) {
		errs = append(errs, fmt.Errorf("imatch min ratio %g must be within [0, 1]", p.MinRatio))
	}
	if p.Randomized < 0 || p.Randomized > MaxRandomized {
		errs = append(errs, fmt.Errorf("imatch randomized lexicons %d must be within [0, %d]", p.Randomized, MaxRandomized))
	}
	if !(p.RemoveFraction > 0 && p.RemoveFraction < 1) && p.Randomized > 0 {
		errs = append(errs, fmt.Errorf("imatch remove fraction %g must be within (0, 1)", p.RemoveFraction))
	}
	switch p.Hardening {
	case HardeningOff, HardeningOnly, HardeningAlso:
	default:
		errs = append(errs, fmt.Errorf("imatch hardening %q must be %q, %q or %q", p.Hardening, HardeningOff, HardeningOnly, HardeningAlso))
	}
	return errors.Join(errs...)
}

// IMatch is the I-Match signer with the secondary lexicon, lexicon
// randomization and context hardening. It yields up to K+1 keys (plain or
// hardened), or 2(K+1) with HardeningAlso.
type IMatch struct {
	p    IMatchParams
	th   tokenHasher
	kl   *keyedLexicon // its records carry the keep masks (keepRule)
	ctx  u64set        // keyed (previous, next) pairs valid as context
	pair mixer
	fin  sipKey
}

// NewIMatch returns an I-Match signer keyed with s over lex.
func NewIMatch(s Secret, lex *Lexicon, p IMatchParams) (*IMatch, error) {
	th, kl, termHash, err := keyedFor("imatch", s, lex, "", newKeepRule(s, p))
	if err != nil {
		return nil, err
	}
	return newIMatch(s, th, kl, termHash, p)
}

// newIMatch builds the signer over kl, keyed with newKeepRule(s, p);
// termHash is the keyed hash of every term by index (newKeyedLexicon).
func newIMatch(s Secret, th tokenHasher, kl *keyedLexicon, termHash []uint64, p IMatchParams) (*IMatch, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if kl.keep != newKeepRule(s, p) {
		return nil, errors.New("imatch: lexicon keyed for another randomization")
	}
	lex := kl.lex
	m := &IMatch{
		p: p, th: th, kl: kl,
		pair: newMixer(s.derive("imatch/context")),
		fin:  s.derive("imatch/final"),
	}
	if p.Hardening != HardeningOff {
		var pairs []uint64
		for _, e := range lex.ctx {
			t := termHash[e.term]
			for _, id := range e.left {
				pairs = append(pairs, m.pairHash(contextHash(th, termHash, id), t))
			}
			for _, id := range e.right {
				pairs = append(pairs, m.pairHash(t, contextHash(th, termHash, id)))
			}
		}
		m.ctx = newU64set(pairs)
	}
	return m, nil
}

// pairHash keys an ordered bigram (a, b) of token hashes.
func (m *IMatch) pairHash(a, b uint64) uint64 {
	return m.pair.mix(a*0x9e3779b97f4a7c15 ^ b)
}

// Family returns FamilyIMatch.
func (m *IMatch) Family() Family { return FamilyIMatch }

// Sign appends the document's I-Match keys to dst.
func (m *IMatch) Sign(d *Doc, dst []Key) ([]Key, Explain) {
	p := prepare(d, m.th, m.kl)
	defer p.release()
	dst, e, _ := m.sign(p, dst, false)
	return dst, e
}

// IMatchReport details one document's I-Match computation for the primary
// lexicon (lexicon 0).
type IMatchReport struct {
	Unique    int      // |U|: distinct I-Match terms of the document
	Primary   []string // L ∩ U, sorted
	Secondary []string // terms of B added to reach MinRatio, in rank order
	// OutOfContext lists the L and B terms of the document never seen in
	// a valid context (dropped from hardened signatures); sorted.
	OutOfContext []string
	Keys         []Key
	Explain      Explain
}

// Report computes the document's keys with the terms behind them.
func (m *IMatch) Report(d *Doc) IMatchReport {
	p := prepare(d, m.th, m.kl)
	defer p.release()
	keys, e, r := m.sign(p, nil, true)
	r.Keys, r.Explain = keys, e
	return r
}

type uniqSlot struct {
	h     uint64
	info  termInfo
	idx   int32
	inCtx bool
}

type secTerm struct {
	rank  uint32
	idx   int32
	h     uint64
	keep  uint16
	inCtx bool
}

type imatchScratch struct {
	uniq  []uniqSlot
	lex   []int32 // slots of L and B terms, in first-occurrence order
	seq   []int32 // token positions of I-Match terms
	sec   []secTerm
	order []uint64 // rank<<32 | position in sec, sorted
}

var imatchPool = sync.Pool{New: func() any { return new(imatchScratch) }}

func (m *IMatch) sign(p *prepared, dst []Key, report bool) ([]Key, Explain, IMatchReport) {
	e := Explain{Family: FamilyIMatch}
	var rep IMatchReport
	sc := imatchPool.Get().(*imatchScratch)
	defer func() { recycle(&imatchPool, sc, max(cap(sc.uniq), cap(sc.seq))) }()

	sc.seq = sc.seq[:0]
	for i, k := range p.kolcz {
		if k {
			sc.seq = append(sc.seq, int32(i))
		}
	}
	size := 8
	for size < 2*len(sc.seq) {
		size <<= 1
	}
	sc.uniq = grow(sc.uniq, size)
	clear(sc.uniq)
	mask := uint64(size - 1)
	sc.lex = sc.lex[:0]
	harden := m.p.Hardening != HardeningOff
	unique := 0
	for k, pos := range sc.seq {
		h := p.th[pos]
		j := h & mask
		for sc.uniq[j].h != 0 && sc.uniq[j].h != h {
			j = (j + 1) & mask
		}
		s := &sc.uniq[j]
		if s.h == 0 {
			unique++
			*s = uniqSlot{h: h, idx: p.lex[pos], info: p.info[pos]}
			if s.idx >= 0 && s.info.class() != classDict {
				sc.lex = append(sc.lex, int32(j))
			}
		}
		if !harden || s.idx < 0 || s.info.class() == classDict || s.inCtx {
			continue
		}
		prev, next := m.th.boundary, m.th.boundary
		if k > 0 {
			prev = p.th[sc.seq[k-1]]
		}
		if k+1 < len(sc.seq) {
			next = p.th[sc.seq[k+1]]
		}
		s.inCtx = s.info.mayFollow(prev) && m.ctx.has(m.pairHash(prev, h)) ||
			s.info.mayPrecede(next) && m.ctx.has(m.pairHash(h, next))
	}
	if unique == 0 {
		e.Declined = "no I-Match terms"
		return dst, e, rep
	}
	rep.Unique = unique

	// One pass over the document's lexicon terms accumulates every
	// lexicon's signature: an order-independent sum of keyed term hashes,
	// so no sorting is needed.
	const nv = 2 // variants: plain, hardened
	var sum [nv][MaxRandomized + 1]uint64
	var cnt [nv][MaxRandomized + 1]int
	sc.sec = sc.sec[:0]
	noise := 0
	for _, j := range sc.lex {
		s := &sc.uniq[j]
		keep := s.info.keep()
		if harden && !s.inCtx {
			noise++
			if report {
				rep.OutOfContext = append(rep.OutOfContext, m.kl.lex.terms[s.idx])
			}
		}
		if s.info.class() == classSecondary {
			sc.sec = append(sc.sec, secTerm{rank: m.kl.rank(s.idx, s.info), idx: s.idx, h: s.h, keep: keep, inCtx: s.inCtx})
			continue
		}
		if report {
			rep.Primary = append(rep.Primary, m.kl.lex.terms[s.idx])
		}
		for b := keep; b != 0; b &= b - 1 {
			i := bits.TrailingZeros16(b)
			sum[0][i] += s.h
			cnt[0][i]++
			if s.inCtx {
				sum[1][i] += s.h
				cnt[1][i]++
			}
		}
	}
	sorted := false
	sc.order = sc.order[:0]
	// Hardened signatures judge coverage against the document without the
	// lexicon terms found out of context: those are noise, not content.
	denom := [nv]int{unique, unique - noise}
	variants := []int{0}
	switch m.p.Hardening {
	case HardeningOnly:
		variants = []int{1}
	case HardeningAlso:
		variants = []int{0, 1}
	}
	var declined [nv]string
	var made [nv]int
	for _, v := range variants {
		u := denom[v]
		need := int(math.Ceil(m.p.MinRatio*float64(u) - 1e-9))
		for i := 0; i <= m.p.Randomized; i++ {
			n, h := cnt[v][i], sum[v][i]
			if n < need && !sorted {
				// Rank order matters only when terms are added. Sorting
				// packed integers is several times faster than structs.
				sc.order = sc.order[:0]
				for i, t := range sc.sec {
					sc.order = append(sc.order, uint64(t.rank)<<32|uint64(i))
				}
				slices.Sort(sc.order)
				sorted = true
			}
			// Secondary lexicon: add the document's highest-ranked B terms
			// (present in this randomized lexicon) until the ratio holds.
			for _, o := range sc.order {
				if n >= need {
					break
				}
				t := &sc.sec[uint32(o)]
				if t.keep&(1<<i) == 0 || (v == 1 && !t.inCtx) {
					continue
				}
				h += t.h
				n++
				if report && v == 0 && i == 0 {
					rep.Secondary = append(rep.Secondary, m.kl.lex.terms[t.idx])
				}
			}
			switch {
			case n < m.p.MinTerms:
				if declined[v] == "" {
					declined[v] = "too few lexicon terms: " + strconv.Itoa(n) + " < " + strconv.Itoa(m.p.MinTerms)
				}
				continue
			case n < need:
				if declined[v] == "" {
					declined[v] = "lexicon terms cover " + strconv.Itoa(n) + " of " + strconv.Itoa(u) + " terms, under the minimum ratio"
				}
				continue
			}
			idx := uint8(i + v*HardenedIndex)
			dst = append(dst, Key{Family: FamilyIMatch, Index: idx, Hash: m.fin.words(h, uint64(n), uint64(idx))})
			made[v]++
		}
	}
	e.Keys = made[0] + made[1]
	if e.Keys == 0 {
		e.Declined = declined[variants[0]]
		if e.Declined == "" && len(variants) > 1 {
			e.Declined = declined[variants[1]]
		}
	}
	b := make([]byte, 0, 96)
	b = append(b, "unique="...)
	b = strconv.AppendInt(b, int64(unique), 10)
	b = append(b, " primary="...)
	b = strconv.AppendInt(b, int64(cnt[0][0]), 10)
	b = append(b, " secondary="...)
	b = strconv.AppendInt(b, int64(len(sc.sec)), 10)
	if harden {
		b = append(b, " out_of_context="...)
		b = strconv.AppendInt(b, int64(noise), 10)
		b = append(b, " hardened_keys="...)
		b = strconv.AppendInt(b, int64(made[1]), 10)
	}
	e.Detail = string(b)
	if report {
		slices.Sort(rep.Primary)
		slices.Sort(rep.OutOfContext)
	}
	return dst, e, rep
}
