package signature

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
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
	switch b {
	case 1:
		for _, h := range th {
			passes[0] = append(passes[0], t.tok.mix(h))
		}
	case 2:
		// The default: each token goes to the pass of the other partition
		// (fastrange onto two is the top bit). Both are written and one
		// kept, without a branch the partition would mispredict.
		p0, p1 := passes[0][:len(th)], passes[1][:len(th)]
		n0, n1 := 0, 0
		for _, h := range th {
			v, part := t.tok.mix(h), int(t.part.mix(h)>>63)
			p0[n0], p1[n1] = v, v
			n0, n1 = n0+part, n1+1-part
		}
		passes[0], passes[1] = p0[:n0], p1[:n1]
	default:
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
//
// Each step is a chain of dependent multiplications, so four clusters are
// formed side by side in lanes, and a lane takes the next head as soon as
// its cluster is complete or its scan ends: no lane idles while the others
// finish. Clusters are appended as they complete, not in the order of
// their heads; the sample and the fingerprints do not depend on the order.
// The lanes' counts stay packed in one word, a byte a lane, from head to
// completion, so a lane is settled without touching the others.
func (t *Sift) skip(sc *siftScratch) {
	toks := sc.pass
	l := t.p.ClusterLen
	if l == 1 {
		// Every head is a cluster of its own.
		for _, v := range toks {
			sc.clusters = append(sc.clusters, t.fin.mix(v))
		}
		return
	}
	// A head after last has fewer tokens left than its cluster needs.
	last := len(toks) - l
	maxScan := int(math.Ceil(8 * float64(l) / t.p.Accept))
	// Lane i forms a cluster with cumulative hash c[i], scanning the tokens
	// w[i]; byte i of k is laneDone less the tokens it still needs.
	var c [4]uint64
	var w [4][]uint64
	var k uint32
	fresh := uint32(laneDone - l + 1)
	next := 0
	for i := range 4 {
		if next > last {
			for j := range i {
				t.finish(sc, c[j], k>>(8*j)&0xff, w[j])
			}
			return
		}
		c[i], w[i] = toks[next], toks[next+1:min(len(toks), next+1+maxScan)]
		k |= fresh << (8 * i)
		next++
	}
	mulA, thresh := t.mulA, t.thresh
	for {
		steps := min(len(w[0]), len(w[1]), len(w[2]), len(w[3]))
		w0, w1, w2, w3 := w[0][:steps], w[1][:steps], w[2][:steps], w[3][:steps]
		c0, c1, c2, c3 := c[0], c[1], c[2], c[3]
		s := 0
		for s < len(w0) {
			y0 := (c0 ^ w0[s]) * mulA
			y1 := (c1 ^ w1[s]) * mulA
			y2 := (c2 ^ w2[s]) * mulA
			y3 := (c3 ^ w3[s]) * mulA
			if y0 < thresh {
				c0 = y0
			}
			if y1 < thresh {
				c1 = y1
			}
			if y2 < thresh {
				c2 = y2
			}
			if y3 < thresh {
				c3 = y3
			}
			k += uint32(b2u(y0 < thresh) | b2u(y1 < thresh)<<8 | b2u(y2 < thresh)<<16 | b2u(y3 < thresh)<<24)
			s++
			if k&(laneDone*0x01010101) != 0 {
				break
			}
		}
		c[0], c[1], c[2], c[3] = c0, c1, c2, c3
		w[0], w[1], w[2], w[3] = w[0][s:], w[1][s:], w[2][s:], w[3][s:]
		// The lanes to settle: complete ones, and those at the end of their
		// scan (only when the loop ran all its steps).
		done := k & (laneDone * 0x01010101)
		if s == steps {
			for i := range 4 {
				if len(w[i]) == 0 {
					done |= laneDone << (8 * i)
				}
			}
		}
		for done != 0 {
			i := bits.TrailingZeros32(done) >> 3 & 3
			done &= done - 1
			if k>>(8*i)&laneDone != 0 {
				sc.clusters = append(sc.clusters, t.fin.mix(c[i]))
			}
			if next > last {
				k, w[i] = k&^(0xff<<(8*i)), nil
				for j := range 4 {
					t.finish(sc, c[j], k>>(8*j)&0xff, w[j])
				}
				return
			}
			c[i], w[i] = toks[next], toks[next+1:min(len(toks), next+1+maxScan)]
			k = k&^(0xff<<(8*i)) | fresh<<(8*i)
			next++
		}
	}
}

// laneDone is the bit a lane's count reaches when its cluster is complete
// (ClusterLen ≤ 64).
const laneDone = 1 << 7

// finish forms the rest of a cluster alone, from cumulative hash c and
// count k, scanning toks, and appends its hash if it is complete.
func (t *Sift) finish(sc *siftScratch, c uint64, k uint32, toks []uint64) {
	for _, v := range toks {
		if k&laneDone != 0 {
			break
		}
		if y := (c ^ v) * t.mulA; y < t.thresh {
			c, k = y, k+1
		}
	}
	if k&laneDone != 0 {
		sc.clusters = append(sc.clusters, t.fin.mix(c))
	}
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
	add := t.smp.reset(o)
	for _, c := range sc.clusters {
		add.add(c)
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
func intersect[T cmp.Ordered](a, b []T) int {
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
