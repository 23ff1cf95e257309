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
//
// Each step is a chain of dependent multiplications, so four clusters are
// formed side by side in lanes, and a lane takes the next head as soon as
// its cluster is complete or its scan ends: no lane idles while the others
// finish. Clusters are appended as they complete, not in the order of
// their heads; the sample and the fingerprints do not depend on the order.
func (t *Sift) skip(sc *siftScratch) {
	st := skipState{t: t, sc: sc, toks: sc.pass, maxScan: int(math.Ceil(8 * float64(t.p.ClusterLen) / t.p.Accept))}
	toks := st.toks
	var ln [4]skipLane
	for i := range ln {
		if !st.start(&ln[i]) {
			for _, a := range ln[:i] {
				st.finish(a)
			}
			return
		}
	}
	mulA, thresh := t.mulA, t.thresh
	for {
		steps := min(ln[0].e-ln[0].p, ln[1].e-ln[1].p, ln[2].e-ln[2].p, ln[3].e-ln[3].p)
		w0, w1, w2, w3 := toks[ln[0].p:][:steps], toks[ln[1].p:][:steps], toks[ln[2].p:][:steps], toks[ln[3].p:][:steps]
		c0, c1, c2, c3 := ln[0].c, ln[1].c, ln[2].c, ln[3].c
		// The four counts in one word, a byte a lane.
		k := uint32(ln[0].k | ln[1].k<<8 | ln[2].k<<16 | ln[3].k<<24)
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
		ln[0].c, ln[1].c, ln[2].c, ln[3].c = c0, c1, c2, c3
		for i := range ln {
			a := &ln[i]
			a.k, a.p = uint64(k>>(8*i)&0xff), a.p+s
		}
		for i := range ln {
			a := &ln[i]
			if a.k&laneDone == 0 && a.p < a.e {
				continue
			}
			st.finish(*a)
			if !st.start(a) {
				for j, b := range ln {
					if j != i {
						st.finish(b)
					}
				}
				return
			}
		}
	}
}

// laneDone is the bit a lane's count reaches when its cluster is complete
// (ClusterLen ≤ 64).
const laneDone = 1 << 7

// skipLane is one cluster being formed: its cumulative hash, laneDone less
// the tokens it still needs, and the tokens toks[p:e] it may still scan.
type skipLane struct {
	c, k uint64
	p, e int
}

// skipState hands out the heads of one pass to the lanes.
type skipState struct {
	t       *Sift
	sc      *siftScratch
	toks    []uint64
	next    int // the next head
	maxScan int
}

// start gives a the next head whose cluster still needs tokens and has some
// to scan, settling the others on the way; false when no head is left.
func (st *skipState) start(a *skipLane) bool {
	l := st.t.p.ClusterLen
	for st.next < len(st.toks) {
		j := st.next
		st.next++
		*a = skipLane{c: st.toks[j], k: uint64(laneDone - l + 1), p: j + 1, e: min(len(st.toks), j+1+st.maxScan)}
		if a.k&laneDone == 0 && a.p < a.e {
			return true
		}
		st.finish(*a)
	}
	return false
}

// finish forms the rest of a's cluster alone and appends its hash if it is
// complete.
func (st *skipState) finish(a skipLane) {
	for _, v := range st.toks[a.p:a.e] {
		if a.k&laneDone != 0 {
			break
		}
		if y := (a.c ^ v) * st.t.mulA; y < st.t.thresh {
			a.c, a.k = y, a.k+1
		}
	}
	if a.k&laneDone != 0 {
		st.sc.clusters = append(st.sc.clusters, st.t.fin.mix(a.c))
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
