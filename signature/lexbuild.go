package signature

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// LexiconParams choose what goes into a lexicon. They are recorded in the
// lexicon file.
type LexiconParams struct {
	// NidfMin and NidfMax bound the primary lexicon L on normalised idf,
	// nidf = idf / max idf = 1 − ln(df)/ln(N) (Chowdhury et al. 2002;
	// Kolcz & Chowdhury 2008 §3). Kolcz used [0.2, 0.3] for email with a
	// 556,000-document news corpus; see DefaultLexiconParams for ours.
	NidfMin, NidfMax float64
	// MinDF is the least document frequency of any L or B term: strings
	// seen in fewer documents (typos, one-off tokens, hash-busters) never
	// enter the lexicon.
	MinDF int
	// MaxSecondary bounds the secondary lexicon B (terms rarer than the
	// window, ranked by increasing idf); Kolcz 2008 §3 bounds it by "a
	// practical limit [on] the maximum size of a lexicon".
	MaxSecondary int
	// DictMinDF is the least document frequency of a frequency-dictionary
	// word (any token, not only I-Match terms): word shingles skip every
	// word outside the dictionary (Yandex).
	DictMinDF int
	// ContextMinCount is the context-hardening threshold θ as a count: a
	// bigram (previous, term) or (term, next) is a valid context when it
	// occurred at least this often in training (Kolcz & Chowdhury: 15).
	ContextMinCount int
	// ContextsPerTerm keeps only a term's most frequent contexts (Kolcz &
	// Chowdhury: about 80 context words capture most of a term's usage).
	ContextsPerTerm int
}

// DefaultLexiconParams returns the parameters of the bundled lexicon; see
// docs/signatures.md for the measurements behind them.
func DefaultLexiconParams() LexiconParams {
	return LexiconParams{
		NidfMin:         0.2,
		NidfMax:         0.4,
		MinDF:           3,
		MaxSecondary:    40000,
		DictMinDF:       2,
		ContextMinCount: 15,
		ContextsPerTerm: 80,
	}
}

// Validate reports every invalid parameter.
func (p LexiconParams) Validate() error {
	var errs []error
	if !(p.NidfMin >= 0 && p.NidfMin < p.NidfMax && p.NidfMax <= 1) {
		errs = append(errs, fmt.Errorf("nidf window [%g, %g] must satisfy 0 <= min < max <= 1", p.NidfMin, p.NidfMax))
	}
	if p.MinDF < 1 {
		errs = append(errs, fmt.Errorf("min df %d must be at least 1", p.MinDF))
	}
	if p.MaxSecondary < 0 || p.MaxSecondary > math.MaxUint32 {
		errs = append(errs, fmt.Errorf("max secondary %d out of range", p.MaxSecondary))
	}
	if p.DictMinDF < 1 {
		errs = append(errs, fmt.Errorf("dictionary min df %d must be at least 1", p.DictMinDF))
	}
	if p.ContextMinCount < 1 {
		errs = append(errs, fmt.Errorf("context min count %d must be at least 1", p.ContextMinCount))
	}
	if p.ContextsPerTerm < 0 || p.ContextsPerTerm > math.MaxUint16 {
		errs = append(errs, fmt.Errorf("contexts per term %d out of range [0, %d]", p.ContextsPerTerm, math.MaxUint16))
	}
	return errors.Join(errs...)
}

// BuilderOptions bound the memory a LexiconBuilder uses.
type BuilderOptions struct {
	// MaxTermBytes skips longer tokens (they are never lexicon or
	// dictionary words and would only cost memory). At most 255.
	MaxTermBytes int
	// MaxBigrams bounds the bigram table: when it is reached, the rarest
	// bigrams are dropped until half of it is free (see BuilderStats).
	MaxBigrams int
}

// DefaultBuilderOptions returns options that keep a build from the
// bundled corpora well under 1 GB.
func DefaultBuilderOptions() BuilderOptions {
	return BuilderOptions{MaxTermBytes: 64, MaxBigrams: 8 << 20}
}

const unknownID = math.MaxUint32 // a skipped token: no bigram involves it

// LexiconBuilder accumulates corpus statistics, one document at a time, for
// Build. It is not safe for concurrent use.
type LexiconBuilder struct {
	opts    BuilderOptions
	ids     map[string]uint32
	names   []string // id → term; names[0] is the boundary
	df      []uint32
	stamp   []uint32 // last document that counted the id, for unique terms
	kolcz   []bool
	bigrams map[uint64]uint32 // prev<<32 | next → occurrences; 0 is the boundary
	docs    int

	prunes      int
	prunedPairs int
	maxPruned   uint32
}

// BuilderStats describe a builder's state.
type BuilderStats struct {
	Docs    int
	Terms   int // distinct tokens
	Bigrams int // distinct bigrams held
	// Prunes counts how often the bigram table was pruned, PrunedBigrams
	// how many entries were dropped, and MaxPrunedCount the largest count
	// a dropped bigram had: a bigram's count may be short by at most that
	// much each time it was dropped.
	Prunes         int
	PrunedBigrams  int
	MaxPrunedCount int
}

// NewLexiconBuilder returns an empty builder. Zero option fields take their
// defaults.
func NewLexiconBuilder(o BuilderOptions) *LexiconBuilder {
	d := DefaultBuilderOptions()
	if o.MaxTermBytes <= 0 || o.MaxTermBytes > maxTermBytes {
		o.MaxTermBytes = d.MaxTermBytes
	}
	if o.MaxBigrams <= 0 {
		o.MaxBigrams = d.MaxBigrams
	}
	return &LexiconBuilder{
		opts:    o,
		ids:     make(map[string]uint32),
		names:   []string{""},
		df:      []uint32{0},
		stamp:   []uint32{0},
		kolcz:   []bool{false},
		bigrams: make(map[uint64]uint32),
	}
}

// Stats returns the builder's counters.
func (b *LexiconBuilder) Stats() BuilderStats {
	return BuilderStats{
		Docs: b.docs, Terms: len(b.names) - 1, Bigrams: len(b.bigrams),
		Prunes: b.prunes, PrunedBigrams: b.prunedPairs, MaxPrunedCount: int(b.maxPruned),
	}
}

// Add counts one document: the document frequency of each distinct token,
// and the bigrams of its I-Match term sequence (IMatchTerm tokens in
// order, with the document start and end as context).
func (b *LexiconBuilder) Add(d *Doc) {
	if d == nil {
		return
	}
	b.docs++
	stamp := uint32(b.docs)
	prev, seen := uint32(0), false
	for _, tok := range d.Tokens {
		if tok == "" {
			continue
		}
		if len(tok) > b.opts.MaxTermBytes {
			if IMatchTerm(tok) {
				prev, seen = unknownID, true
			}
			continue
		}
		id := b.intern(tok)
		if b.stamp[id] != stamp {
			b.stamp[id] = stamp
			b.df[id]++
		}
		if !b.kolcz[id] {
			continue
		}
		if prev != unknownID {
			b.countBigram(prev, id)
		}
		prev, seen = id, true
	}
	if seen && prev != unknownID {
		b.countBigram(prev, 0)
	}
}

func (b *LexiconBuilder) intern(tok string) uint32 {
	if id, ok := b.ids[tok]; ok {
		return id
	}
	id := uint32(len(b.names))
	// Clone: the token may point into a whole message we must not retain.
	tok = strings.Clone(tok)
	b.ids[tok] = id
	b.names = append(b.names, tok)
	b.df = append(b.df, 0)
	b.stamp = append(b.stamp, 0)
	b.kolcz = append(b.kolcz, IMatchTerm(tok))
	return id
}

func (b *LexiconBuilder) countBigram(prev, next uint32) {
	b.bigrams[uint64(prev)<<32|uint64(next)]++
	if len(b.bigrams) >= b.opts.MaxBigrams {
		b.prune()
	}
}

// prune drops the rarest bigrams until at most half the table is used.
// Counts follow Zipf's law: most distinct bigrams are seen once or twice,
// while those that can reach ContextMinCount are frequent early on.
func (b *LexiconBuilder) prune() {
	b.prunes++
	for floor := uint32(1); len(b.bigrams) > b.opts.MaxBigrams/2; floor++ {
		for k, c := range b.bigrams {
			if c <= floor {
				delete(b.bigrams, k)
				b.prunedPairs++
				b.maxPruned = max(b.maxPruned, c)
			}
		}
	}
}

// Build computes a lexicon from the statistics gathered so far. It does not
// change the builder: several lexicons (e.g. different windows) can be
// built from one pass over a corpus.
func (b *LexiconBuilder) Build(p LexiconParams) (*Lexicon, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("lexicon parameters: %w", err)
	}
	if b.docs < 2 {
		return nil, fmt.Errorf("build lexicon: %d documents, need at least 2", b.docs)
	}
	n := float64(b.docs)
	// nidf(df) = 1 − ln df / ln N, so nidf ∈ [lo, hi] ⟺ df ∈ [N^(1−hi), N^(1−lo)].
	dfLow := int(math.Ceil(math.Pow(n, 1-p.NidfMax) - 1e-9))
	dfHigh := int(math.Floor(math.Pow(n, 1-p.NidfMin) + 1e-9))
	dfLow = max(dfLow, p.MinDF)

	nt := len(b.names)
	class := make([]int8, nt) // -1 not kept, else class
	for i := range class {
		class[i] = -1
	}
	var secondary []uint32
	for id := 1; id < nt; id++ {
		df := int(b.df[id])
		if b.kolcz[id] && df >= p.MinDF {
			switch {
			case df >= dfLow && df <= dfHigh:
				class[id] = int8(classPrimary)
				continue
			case df < dfLow:
				secondary = append(secondary, uint32(id))
			}
		}
		if df >= p.DictMinDF {
			class[id] = int8(classDict)
		}
	}
	slices.SortFunc(secondary, func(x, y uint32) int {
		if b.df[x] != b.df[y] {
			return int(b.df[y]) - int(b.df[x])
		}
		return strings.Compare(b.names[x], b.names[y])
	})
	for i, id := range secondary {
		if i < p.MaxSecondary {
			class[id] = int8(classSecondary)
		} else if int(b.df[id]) < p.DictMinDF {
			class[id] = -1
		} else {
			class[id] = int8(classDict)
		}
	}

	// The final term table, sorted.
	kept := make([]uint32, 0, nt/4)
	for id := 1; id < nt; id++ {
		if class[id] >= 0 {
			kept = append(kept, uint32(id))
		}
	}
	sort.Slice(kept, func(i, j int) bool { return b.names[kept[i]] < b.names[kept[j]] })
	index := make(map[uint32]uint32, len(kept)) // builder id → final index
	l := &Lexicon{params: p, docs: b.docs, dfLow: dfLow, dfHigh: dfHigh}
	l.terms = make([]string, len(kept))
	l.df = make([]uint32, len(kept))
	l.class = make([]uint8, len(kept))
	l.rank = make([]uint32, len(kept))
	for i, id := range kept {
		index[id] = uint32(i)
		l.terms[i] = b.names[id]
		l.df[i] = b.df[id]
		l.class[i] = uint8(class[id])
		switch l.class[i] {
		case classPrimary:
			l.nPrimary++
		case classSecondary:
			l.nSecondary++
		}
	}
	l.assignRanks()

	// Contexts of L and B terms: bigrams at or above θ whose other word is
	// the boundary or in the table, the ContextsPerTerm most frequent.
	type cand struct {
		ctx   uint32 // final context id (0 boundary, i+1 term i)
		right bool
		count uint32
	}
	isLex := func(id uint32) bool {
		return id != 0 && (class[id] == int8(classPrimary) || class[id] == int8(classSecondary))
	}
	ctxID := func(id uint32) (uint32, bool) {
		if id == 0 {
			return 0, true
		}
		i, ok := index[id]
		return i + 1, ok
	}
	cands := make(map[uint32][]cand)
	theta := uint32(min(p.ContextMinCount, math.MaxUint32))
	if p.ContextsPerTerm > 0 {
		for k, c := range b.bigrams {
			if c < theta {
				continue
			}
			prev, next := uint32(k>>32), uint32(k)
			if isLex(next) {
				if cid, ok := ctxID(prev); ok {
					cands[index[next]] = append(cands[index[next]], cand{cid, false, c})
				}
			}
			if isLex(prev) {
				if cid, ok := ctxID(next); ok {
					cands[index[prev]] = append(cands[index[prev]], cand{cid, true, c})
				}
			}
		}
	}
	terms := make([]uint32, 0, len(cands))
	for t := range cands {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	for _, t := range terms {
		cs := cands[t]
		slices.SortFunc(cs, func(x, y cand) int {
			switch {
			case x.count != y.count:
				return int(int64(y.count) - int64(x.count))
			case x.right != y.right:
				if !x.right {
					return -1
				}
				return 1
			default:
				return int(int64(x.ctx) - int64(y.ctx))
			}
		})
		if len(cs) > p.ContextsPerTerm {
			cs = cs[:p.ContextsPerTerm]
		}
		e := termContexts{term: t}
		for _, c := range cs {
			if c.right {
				e.right = append(e.right, c.ctx)
			} else {
				e.left = append(e.left, c.ctx)
			}
		}
		slices.Sort(e.left)
		slices.Sort(e.right)
		l.ctx = append(l.ctx, e)
	}
	l.encode()
	return l, nil
}
