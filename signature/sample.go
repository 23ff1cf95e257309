package signature

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// maxBins bounds the min-hash sample (bands × rows).
const maxBins = 64

// SampleParams size the min-hash sample of a shingle or cluster family and
// its division into bands (LSH banding; Broder's supershingles, Yandex's
// "супершингл").
type SampleParams struct {
	// Rows is the number of min-hash values hashed into one band key: two
	// messages share a band key when all Rows values agree, which happens
	// with probability J^Rows for Jaccard similarity J of their shingle
	// sets.
	Rows int
	// MinBands and MaxBands bound the number of bands, one key each. The
	// sample grows with the logarithm of the document length (Yandex):
	// bands = MinBands + ⌊log₂(n / BandUnits)⌋, clamped, where n counts
	// the family's units (dictionary words, letters, tokens).
	MinBands, MaxBands int
	// MinUnits is the least number of units to sign at all: shorter
	// documents share too much by chance ("thanks, see you tomorrow").
	MinUnits int
	// BandUnits is the length at which the sample starts to grow (0:
	// MinUnits); a document shorter than it but not than MinUnits signs
	// with MinBands. Kept apart from MinUnits so that a family can sign
	// short mass mailings (a line and a link) without more keys for every
	// longer message.
	BandUnits int
}

// Validate reports every invalid parameter.
func (p SampleParams) Validate() error {
	var errs []error
	if p.Rows < 1 {
		errs = append(errs, fmt.Errorf("rows %d must be at least 1", p.Rows))
	}
	if p.MinBands < 1 || p.MaxBands < p.MinBands {
		errs = append(errs, fmt.Errorf("bands [%d, %d] must satisfy 1 <= min <= max", p.MinBands, p.MaxBands))
	}
	if p.Rows >= 1 && p.MaxBands*p.Rows > maxBins {
		errs = append(errs, fmt.Errorf("max bands × rows = %d exceeds %d", p.MaxBands*p.Rows, maxBins))
	}
	if p.MaxBands > 255 {
		errs = append(errs, errors.New("max bands exceeds 255"))
	}
	if p.MinUnits < 1 {
		errs = append(errs, fmt.Errorf("min units %d must be at least 1", p.MinUnits))
	}
	if p.BandUnits < 0 {
		errs = append(errs, fmt.Errorf("band units %d must not be negative", p.BandUnits))
	}
	return errors.Join(errs...)
}

// bands returns the number of bands for a document of n units (0 when it
// is too short).
func (p SampleParams) bands(n int) int {
	if n < p.MinUnits {
		return 0
	}
	grow := p.BandUnits
	if grow == 0 {
		grow = p.MinUnits
	}
	b := p.MinBands + max(0, bits.Len(uint(n/grow))-1)
	return min(b, p.MaxBands)
}

// sampler is one-permutation min-hashing (Li, Owen & Zhang 2012) with
// optimal densification (Shrivastava 2017): each shingle is hashed once;
// the hash picks one of Rows × MaxBands bins and competes for that bin's
// minimum. Empty bins borrow the minimum of a bin chosen by a keyed probe
// sequence, which keeps P(bin values agree) = Jaccard similarity. The bin
// of a shingle does not depend on the document's length, so near
// duplicates of different lengths share their first bands.
type sampler struct {
	p      SampleParams
	bins   int
	value  mixer  // keyed re-randomisation of unit hashes
	probe  mixer  // keyed densification probes
	band   sipKey // band keys
	family Family
}

func newSampler(s Secret, f Family, p SampleParams) sampler {
	name := f.String()
	return sampler{
		p:      p,
		bins:   p.MaxBands * p.Rows,
		value:  newMixer(s.derive(name + "/sample")),
		probe:  newMixer(s.derive(name + "/densify")),
		band:   s.derive(name + "/band"),
		family: f,
	}
}

// oph is the state of one sample.
type oph struct {
	min    [maxBins]uint64
	filled uint64 // bit i: bin i has a value
}

// reset empties o and returns the adder that fills it. An empty bin holds
// the largest value, so that add needs one comparison: the first value
// offered to a bin is never above it, and a value equal to a bin's minimum
// leaves it as it was.
func (s *sampler) reset(o *oph) adder {
	o.filled = 0
	for i := range o.min[:s.bins] {
		o.min[i] = math.MaxUint64
	}
	return adder{s.value, uint64(s.bins), o}
}

// adder offers shingle hashes to one sample. It is a small value, so that
// a loop adding many keeps its fields in registers (the sampler's, read
// through a pointer, were loaded again after every store to the sample).
type adder struct {
	value mixer
	bins  uint64
	o     *oph
}

func (a adder) add(h uint64) {
	v := a.value.mix(h)
	b, _ := bits.Mul64(v, a.bins) // fastrange, within the inlining budget
	if v <= a.o.min[b] {
		a.o.min[b] = v
		a.o.filled |= 1 << b
	}
}

// keys densifies the sample and appends one key per band.
func (s *sampler) keys(o *oph, bands int, dst []Key) []Key {
	if o.filled == 0 || bands == 0 {
		return dst
	}
	used := bands * s.p.Rows
	full := o.filled
	for b := range used {
		if full&(1<<b) != 0 {
			continue
		}
		// Probe bins in a keyed pseudo-random order until a filled one;
		// fall back to a scan (reached only with very few shingles).
		found := false
		for a := uint64(1); a <= 4*uint64(s.bins); a++ {
			c := fastrange(s.probe.mix(uint64(b)<<32|a), s.bins)
			if full&(1<<c) != 0 {
				o.min[b] = o.min[c]
				found = true
				break
			}
		}
		if !found {
			c := bits.TrailingZeros64(full)
			o.min[b] = o.min[c]
		}
	}
	var buf [1 + maxBins]uint64
	for band := range bands {
		buf[0] = uint64(band)
		copy(buf[1:], o.min[band*s.p.Rows:(band+1)*s.p.Rows])
		dst = append(dst, Key{Family: s.family, Index: uint8(band), Hash: s.band.words(buf[:1+s.p.Rows]...)})
	}
	return dst
}
