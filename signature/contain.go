package signature

import (
	"errors"
	"fmt"
	"math"
)

// ContainParams tune the containment family.
type ContainParams struct {
	Enabled bool
	// Width is the number of dictionary words per shingle.
	Width int
	// Bins is the number of single min-hashes, one key each.
	Bins int
	// MinShingles is the least number of shingles to sign.
	MinShingles int
	// MinDF is the least document frequency in the lexicon of a word
	// the family reads; rarer dictionary words act as spaces, like words
	// outside the dictionary (0: every dictionary word).
	MinDF int
}

// DefaultContainParams returns the defaults; docs/evaluation.md
// ("Padded copies") gives the measurements behind them.
func DefaultContainParams() ContainParams {
	return ContainParams{Enabled: true, Width: 4, Bins: 16, MinShingles: 30}
}

// Validate reports every invalid parameter.
func (p ContainParams) Validate() error {
	var errs []error
	if p.Width < 1 || p.Width > 16 {
		errs = append(errs, fmt.Errorf("contain width %d must be within [1, 16]", p.Width))
	}
	if p.Bins < 1 || p.Bins > maxBins {
		errs = append(errs, fmt.Errorf("contain bins %d must be within [1, %d]", p.Bins, maxBins))
	}
	if p.MinShingles < 1 {
		errs = append(errs, fmt.Errorf("contain min shingles %d must be at least 1", p.MinShingles))
	}
	if p.MinDF < 0 {
		errs = append(errs, fmt.Errorf("contain min df %d must not be negative", p.MinDF))
	}
	return errors.Join(errs...)
}

func (p ContainParams) shingle() ShingleParams {
	return ShingleParams{Enabled: p.Enabled, Width: p.Width, Sample: SampleParams{Rows: 1, MinBands: p.Bins, MaxBands: p.Bins, MinUnits: p.MinShingles}}
}

// The containment family signs the word shingles of the Shingle family
// with single min-hashes of a one-permutation sample (rows 1): one key per
// bin, the bin's least shingle. A copy padded with text of its own (news
// paragraphs, good words, inline or around the offer) keeps the key of
// every bin whose least shingle is one of the shared text's, and that key
// is the same in every copy where the shared text wins the bin: the share
// of a copy's keys found in its campaign estimates the share of the copy
// that is the campaign's (containment), where a band of several min-hashes
// needs the whole copies to agree (Jaccard similarity to the power of the
// rows). A single min-hash is also shared by chance between unrelated
// messages, so the campaign model weighs the family as a support family
// that names a campaign alone only with several keys (store/model.go).
//
// With MinDF set, the family reads only words of at least MinDF documents
// in the lexicon (off by default: on the real stream it cost more than it
// gave). Words drawn at random from a vocabulary (word salad, "good
// words") are mostly rare, where a text's own prose is mostly common
// words, so a rare word inserted into the campaign's text breaks none of
// its shingles and a block of them adds few shingles to compete for the
// bins. Read so, a short list post is mostly its list's footer, which a
// campaign sent through the list carries too, so MinShingles must rise
// with it (50 common words at MinDF 100) to leave such posts to the other
// families (docs/evaluation.md, "Word salad: the containment family reads
// common words").
//
// NewContain returns a containment signer keyed with s; lex supplies the
// frequency dictionary.
func NewContain(s Secret, lex *Lexicon, p ContainParams) (*Shingle, error) {
	th, kl, _, err := keyedFor("contain", s, lex, " (the frequency dictionary)", keepRule{})
	if err != nil {
		return nil, err
	}
	return newContain(s, th, kl, p)
}

func newContain(s Secret, th tokenHasher, kl *keyedLexicon, p ContainParams) (*Shingle, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	c, err := newShingle(s, th, kl, p.shingle())
	if err != nil {
		return nil, err
	}
	c.fam = FamilyContain
	c.minDF = uint32(min(p.MinDF, math.MaxUint32))
	c.smp = newSampler(s, FamilyContain, c.p.Sample)
	return c, nil
}
