package signature

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
)

// SiftFormation is how text sifting forms clusters.
type SiftFormation string

// Cluster formations.
const (
	// SiftSkip is random skipping (Malkin & Venkatesan §2.2): each token
	// heads a cluster; following tokens join it when a keyed hash of the
	// cluster's cumulative hash and the token falls in the "add" set,
	// otherwise they are skipped, until the cluster has ClusterLen tokens.
	SiftSkip SiftFormation = "skip"
	// SiftWindow is the sliding window of ClusterLen contiguous tokens
	// (Broder's shingles), the baseline the paper attacks.
	SiftWindow SiftFormation = "window"
)

// SiftParams tune the text-sifting family.
type SiftParams struct {
	Enabled   bool
	Formation SiftFormation
	// ClusterLen is l, the fixed number of tokens per cluster (the paper
	// found fixed lengths better; it used 10 and also tried 6).
	ClusterLen int
	// Accept is the probability that random skipping adds the next token
	// to a cluster (|A|+|S| relative to |H|; the paper's best was 0.3).
	Accept float64
	// Partitions is b, the number of keyed token sets of random
	// partitioning; formation runs b times, each ignoring one set. 1
	// disables partitioning (the paper's best was 2).
	Partitions int
	// Modulus is s of pure-hashing fingerprints (cluster hash ≡ 0 mod s;
	// the paper used 10) and MinHash is m of min-hashing fingerprints (the
	// m smallest cluster hashes; the paper used 100). They shape
	// Fingerprint, used for similarity, not the counting keys.
	Modulus, MinHash int
	// Sample chooses the counting keys: a min-hash sample of all cluster
	// hashes in bands; units are tokens.
	Sample SampleParams
}

// DefaultSiftParams returns the paper's best configuration (random
// skipping with random partitioning, l = 10, acceptance 0.3, b = 2) and
// the key sampling chosen by measurement (docs/signatures.md).
func DefaultSiftParams() SiftParams {
	return SiftParams{
		Enabled:    true,
		Formation:  SiftSkip,
		ClusterLen: 10,
		Accept:     0.3,
		Partitions: 2,
		Modulus:    10,
		MinHash:    100,
		Sample:     SampleParams{Rows: 1, MinBands: 2, MaxBands: 4, MinUnits: 30},
	}
}

// Validate reports every invalid parameter.
func (p SiftParams) Validate() error {
	var errs []error
	switch p.Formation {
	case SiftSkip, SiftWindow:
	default:
		errs = append(errs, fmt.Errorf("sift formation %q must be %q or %q", p.Formation, SiftSkip, SiftWindow))
	}
	if p.ClusterLen < 1 || p.ClusterLen > 64 {
		errs = append(errs, fmt.Errorf("sift cluster length %d must be within [1, 64]", p.ClusterLen))
	}
	if p.Formation == SiftSkip && !(p.Accept >= 0.01 && p.Accept <= 1) {
		errs = append(errs, fmt.Errorf("sift acceptance %g must be within [0.01, 1]", p.Accept))
	}
	if p.Partitions < 1 || p.Partitions > 8 {
		errs = append(errs, fmt.Errorf("sift partitions %d must be within [1, 8]", p.Partitions))
	}
	if p.Modulus < 1 {
		errs = append(errs, fmt.Errorf("sift modulus %d must be at least 1", p.Modulus))
	}
	if p.MinHash < 1 {
		errs = append(errs, fmt.Errorf("sift min-hash size %d must be at least 1", p.MinHash))
	}
	if err := p.Sample.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("sift sample: %w", err))
	}
	return errors.Join(errs...)
}

// Sift is keyed text sifting (Malkin & Venkatesan 2005, "Comparison of
// texts streams in the presence of mild adversaries"). Clusters of tokens
// that need not be contiguous are formed with secret keys, so that an
// edit every l-th token, which defeats any sliding window of length l,
// leaves a good share of clusters intact.
type Sift struct {
	p      SiftParams
	th     tokenHasher
	tok    mixer  // sift's own token values
	part   mixer  // partition choice
	mulA   uint64 // g(c, t) = (c ⊕ t)·mulA, bijective in each argument
	thresh uint64 // h(g) is the high part of g: add when g < thresh
	fin    mixer  // cluster hash H_K
	smp    sampler
}

// NewSift returns a text-sifting signer keyed with s.
func NewSift(s Secret, p SiftParams) (*Sift, error) {
	if s.IsZero() {
		return nil, errors.New("sift: zero secret")
	}
	return newSift(s, newTokenHasher(s), p)
}

func newSift(s Secret, th tokenHasher, p SiftParams) (*Sift, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	k := s.derive("sift/skip")
	t := &Sift{
		p: p, th: th,
		tok:  newMixer(s.derive("sift/token")),
		part: newMixer(s.derive("sift/partition")),
		mulA: k.k0 | 1,
		fin:  newMixer(s.derive("sift/cluster")),
		smp:  newSampler(s, FamilySift, p.Sample),
	}
	if p.Accept >= 1 {
		t.thresh = math.MaxUint64
	} else {
		t.thresh = uint64(p.Accept * (1 << 64))
	}
	return t, nil
}

// Family returns FamilySift.
func (t *Sift) Family() Family { return FamilySift }

type siftScratch struct {
	passes   [8][]uint64 // the tokens each pass considers (Partitions ≤ 8)
	pass     []uint64    // the pass being formed
	clusters []uint64
	o        oph
}

var siftPool = sync.Pool{New: func() any { return new(siftScratch) }}

// clusters appends the cluster hashes of a document's keyed token hashes.
// Every pass's tokens are gathered in one loop over the document: pass q
// keeps the tokens outside partition q (all of them when b is 1).
func (t *Sift) clusters(th []uint64, sc *siftScratch) {
	sc.clusters = sc.clusters[:0]
	b := t.p.Partitions
	passes := sc.passes[:b]
	for q := range passes {
		passes[q] = grow(passes[q], len(th))[:0]
	}
	if b == 1 {
		for _, h := range th {
			passes[0] = append(passes[0], t.tok.mix(h))
		}
	} else {
		for _, h := range th {
			v, part := t.tok.mix(h), fastrange(t.part.mix(h), b)
			for q := range passes {
				if q != part {
					passes[q] = append(passes[q], v)
				}
			}
		}
	}
	for q := range passes {
		sc.pass = passes[q]
		if t.p.Formation == SiftWindow {
			t.window(sc)
		} else {
			t.skip(sc)
		}
	}
	sc.pass = nil
}

func (t *Sift) window(sc *siftScratch) {
	l := t.p.ClusterLen
	toks := sc.pass
	for j := 0; j+l <= len(toks); j++ {
		c := toks[j]
		for _, v := range toks[j+1 : j+l] {
			c = (c ^ v) * t.mulA
		}
		sc.clusters = append(sc.clusters, t.fin.mix(c))
	}
}

// skip forms the random-skipping clusters of one pass. The cumulative hash
// of a cluster is c; the next token v joins it when the keyed product
// y = (c ⊕ v)·mulA falls below thresh (the "add" set has probability
// Accept), and then c becomes y. Tokens that do not join are skipped.
// Clusters are formed four at a time in lockstep: each step is a chain of
// dependent multiplications, and four independent chains keep the CPU
// busy. The result is that of skipOne for every head.
func (t *Sift) skip(sc *siftScratch) {
	l := uint64(t.p.ClusterLen)
	toks := sc.pass
	n := len(toks)
	maxScan := int(math.Ceil(8 * float64(l) / t.p.Accept))
	mulA, thresh := t.mulA, t.thresh
	j := 0
	for ; j+4 <= n; j += 4 {
		c0, c1, c2, c3 := toks[j], toks[j+1], toks[j+2], toks[j+3]
		k0, k1, k2, k3 := uint64(1), uint64(1), uint64(1), uint64(1)
		s := 0
		for ; s < maxScan && j+4+s < n; s++ {
			base := j + 1 + s
			v := toks[base : base+4 : base+4]
			y0 := (c0 ^ v[0]) * mulA
			y1 := (c1 ^ v[1]) * mulA
			y2 := (c2 ^ v[2]) * mulA
			y3 := (c3 ^ v[3]) * mulA
			a0 := b2u(y0 < thresh) & b2u(k0 < l)
			a1 := b2u(y1 < thresh) & b2u(k1 < l)
			a2 := b2u(y2 < thresh) & b2u(k2 < l)
			a3 := b2u(y3 < thresh) & b2u(k3 < l)
			c0 ^= (c0 ^ y0) & -a0
			c1 ^= (c1 ^ y1) & -a1
			c2 ^= (c2 ^ y2) & -a2
			c3 ^= (c3 ^ y3) & -a3
			k0 += a0
			k1 += a1
			k2 += a2
			k3 += a3
			if k0 == l && k1 == l && k2 == l && k3 == l {
				s++
				break
			}
		}
		cs := [4]uint64{c0, c1, c2, c3}
		ks := [4]uint64{k0, k1, k2, k3}
		for q := range 4 {
			c, k := cs[q], ks[q]
			if k < l { // finish alone where the lockstep stopped
				start, end := j+q+1+s, min(n, j+q+1+maxScan)
				c, k = t.skipFrom(toks, c, k, start, end)
			}
			if k == l {
				sc.clusters = append(sc.clusters, t.fin.mix(c))
			}
		}
	}
	for ; j < n; j++ {
		c, k := t.skipFrom(toks, toks[j], 1, j+1, min(n, j+1+maxScan))
		if k == l {
			sc.clusters = append(sc.clusters, t.fin.mix(c))
		}
	}
}

// skipFrom continues a cluster (cumulative hash c, k tokens) over
// toks[start:end].
func (t *Sift) skipFrom(toks []uint64, c, k uint64, start, end int) (uint64, uint64) {
	l := uint64(t.p.ClusterLen)
	for i := start; i < end && k < l; i++ {
		y := (c ^ toks[i]) * t.mulA
		if y < t.thresh {
			c = y
			k++
		}
	}
	return c, k
}

func b2u(b bool) uint64 {
	var u uint64
	if b {
		u = 1
	}
	return u
}

// Sign appends the document's sifting keys to dst.
func (t *Sift) Sign(d *Doc, dst []Key) ([]Key, Explain) {
	p := prepare(d, t.th, nil)
	defer p.release()
	return t.sign(p, dst)
}

func (t *Sift) sign(p *prepared, dst []Key) ([]Key, Explain) {
	e := Explain{Family: FamilySift}
	n := len(p.th)
	bands := t.p.Sample.bands(n)
	if bands == 0 {
		e.Declined = "too few tokens: " + strconv.Itoa(n) + " < " + strconv.Itoa(t.p.Sample.MinUnits)
		return dst, e
	}
	sc := siftPool.Get().(*siftScratch)
	defer func() { recycle(&siftPool, sc, max(cap(sc.passes[0]), cap(sc.clusters))) }()
	t.clusters(p.th, sc)
	e.Detail = "tokens=" + strconv.Itoa(n) + " clusters=" + strconv.Itoa(len(sc.clusters))
	if len(sc.clusters) == 0 {
		e.Declined = "no complete cluster"
		return dst, e
	}
	o := &sc.o
	t.smp.reset(o)
	for _, c := range sc.clusters {
		t.smp.add(o, c)
	}
	before := len(dst)
	dst = t.smp.keys(o, bands, dst)
	e.Keys = len(dst) - before
	return dst, e
}

// Sifting selects which cluster hashes make up a fingerprint.
type Sifting int

// Sifting methods (Malkin & Venkatesan §2.3, after Broder).
const (
	// PureHashing keeps the cluster hashes ≡ 0 mod Modulus: a fingerprint
	// proportional to the document's length.
	PureHashing Sifting = iota
	// MinHashing keeps the MinHash smallest cluster hashes.
	MinHashing
)

// Fingerprint returns the document's sifted cluster hashes, sorted and
// unique, for the similarity measures S1, S2 and S3. Counting uses Sign's
// keys instead; fingerprints serve evaluation and explanation.
func (t *Sift) Fingerprint(d *Doc, how Sifting) []uint64 {
	p := prepare(d, t.th, nil)
	defer p.release()
	sc := siftPool.Get().(*siftScratch)
	defer func() { recycle(&siftPool, sc, max(cap(sc.passes[0]), cap(sc.clusters))) }()
	t.clusters(p.th, sc)
	var out []uint64
	switch how {
	case PureHashing:
		s := uint64(t.p.Modulus)
		for _, c := range sc.clusters {
			if c%s == 0 {
				out = append(out, c)
			}
		}
		slices.Sort(out)
		out = slices.Compact(out)
	case MinHashing:
		out = slices.Clone(sc.clusters)
		slices.Sort(out)
		out = slices.Compact(out)
		if len(out) > t.p.MinHash {
			out = out[:t.p.MinHash:t.p.MinHash]
		}
	}
	return out
}

// intersect counts the common values of two sorted, unique slices.
func intersect(a, b []uint64) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			n++
			i++
			j++
		}
	}
	return n
}

// S1 is the Jaccard similarity |C1 ∩ C2| / |C1 ∪ C2| of two fingerprints
// (sorted, unique); 0 when both are empty.
func S1(c1, c2 []uint64) float64 {
	in := intersect(c1, c2)
	union := len(c1) + len(c2) - in
	if union == 0 {
		return 0
	}
	return float64(in) / float64(union)
}

// S2 is the containment |C1 ∩ C2| / |C1| of c1 in c2; 0 when c1 is empty.
func S2(c1, c2 []uint64) float64 {
	if len(c1) == 0 {
		return 0
	}
	return float64(intersect(c1, c2)) / float64(len(c1))
}

// S3 is max(S2(c1, c2), S2(c2, c1)), the measure the paper prefers.
func S3(c1, c2 []uint64) float64 {
	return max(S2(c1, c2), S2(c2, c1))
}
