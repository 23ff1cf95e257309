package signature

import (
	"fmt"
	"strconv"
	"sync"
)

// TermSetParams tune the term-set family.
type TermSetParams struct {
	Enabled bool
	// Sample sizes the min-hash sample and its bands; units are distinct
	// lexicon terms.
	Sample SampleParams
}

// DefaultTermSetParams returns the defaults; docs/signatures.md gives the
// measurements behind them.
func DefaultTermSetParams() TermSetParams {
	return TermSetParams{
		Enabled: true,
		Sample:  SampleParams{Rows: 4, MinBands: 10, MaxBands: 10, MinUnits: 25},
	}
}

// Validate reports every invalid parameter.
func (p TermSetParams) Validate() error {
	if err := p.Sample.Validate(); err != nil {
		return fmt.Errorf("term set sample: %w", err)
	}
	return nil
}

// TermSet signs the set of a document's I-Match terms (IMatchTerm words of
// the primary and secondary lexicons) with min-hash bands: I-Match's
// vocabulary, compared by Jaccard similarity instead of exact identity. It
// ignores order, the common words that pad a message ("good words") and
// strings outside the lexicon (hash-busters), and a copy with one word in
// ten replaced still keeps most of its terms, where every word shingle or
// sifting cluster holding a replaced word changes.
type TermSet struct {
	p   TermSetParams
	th  tokenHasher
	kl  *keyedLexicon
	smp sampler
}

// NewTermSet returns a term-set signer keyed with s; lex supplies the
// lexicons.
func NewTermSet(s Secret, lex *Lexicon, p TermSetParams) (*TermSet, error) {
	th, kl, _, err := keyedFor("term set", s, lex, "", keepRule{})
	if err != nil {
		return nil, err
	}
	return newTermSet(s, th, kl, p)
}

func newTermSet(s Secret, th tokenHasher, kl *keyedLexicon, p TermSetParams) (*TermSet, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &TermSet{p: p, th: th, kl: kl, smp: newSampler(s, FamilyTermSet, p.Sample)}, nil
}

// Family returns FamilyTermSet.
func (t *TermSet) Family() Family { return FamilyTermSet }

// Sign appends the document's term-set keys to dst.
func (t *TermSet) Sign(d *Doc, dst []Key) ([]Key, Explain) {
	p := prepare(d, t.th, t.kl)
	defer p.release()
	return t.sign(p, dst)
}

type termScratch struct {
	o   oph
	idx []int32  // the distinct terms, in order of first appearance
	bit []uint64 // bit i: term i is in idx (all clear between messages)
}

var termPool = sync.Pool{New: func() any { return new(termScratch) }}

func (t *TermSet) sign(p *prepared, dst []Key) ([]Key, Explain) {
	e := Explain{Family: FamilyTermSet}
	sc := termPool.Get().(*termScratch)
	defer func() { recycle(&termPool, sc, cap(sc.idx)) }()
	o := &sc.o
	add := t.smp.reset(o)
	sc.idx = sc.idx[:0]
	// The distinct terms are counted with one bit a lexicon term (6.5 KB
	// for the bundled lexicon), cleared again through idx: sorting the
	// indexes cost more than the rest of the family.
	sc.bit = grow(sc.bit, (len(t.kl.lex.terms)+63)/64)
	for i, idx := range p.lex {
		if idx < 0 || p.info[i].class() == classDict || !p.kolcz[i] {
			continue
		}
		// A repeated term offers the same value again, which min-hashing
		// ignores; only the count of distinct terms needs the indexes.
		w, m := idx>>6, uint64(1)<<(idx&63)
		if sc.bit[w]&m == 0 {
			sc.bit[w] |= m
			sc.idx = append(sc.idx, idx)
		}
		add.add(p.th[i])
	}
	for _, idx := range sc.idx {
		sc.bit[idx>>6] = 0
	}
	n := len(sc.idx)
	bands := t.p.Sample.bands(n)
	e.Detail = "terms=" + strconv.Itoa(n)
	if bands == 0 {
		e.Declined = "too few lexicon terms: " + strconv.Itoa(n) + " < " + strconv.Itoa(t.p.Sample.MinUnits)
		return dst, e
	}
	before := len(dst)
	dst = t.smp.keys(o, bands, dst)
	e.Keys = len(dst) - before
	return dst, e
}
