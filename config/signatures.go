package config

import (
	"strings"

	"github.com/bulkmilter/bulkmilter/signature"
)

// defaultSignatures takes the families' defaults from package signature,
// where the measurements behind them live (docs/signatures.md).
func defaultSignatures() Signatures {
	p := signature.DefaultSetParams()
	return Signatures{
		StripRecipient: true,
		IMatch: IMatch{
			Enabled:        p.IMatch.Enabled,
			MinTerms:       p.IMatch.MinTerms,
			MinRatio:       p.IMatch.MinRatio,
			Randomized:     p.IMatch.Randomized,
			RemoveFraction: p.IMatch.RemoveFraction,
			Hardening:      string(p.IMatch.Hardening),
		},
		Shingle:     Shingle{Enabled: p.Shingle.Enabled, Width: p.Shingle.Width, Sample: sampleOf(p.Shingle.Sample)},
		CharShingle: CharShingle{Enabled: p.CharShingle.Enabled, Width: p.CharShingle.Width, Sample: sampleOf(p.CharShingle.Sample)},
		Sift: Sift{
			Enabled:       p.Sift.Enabled,
			Formation:     string(p.Sift.Formation),
			ClusterLength: p.Sift.ClusterLen,
			Acceptance:    p.Sift.Accept,
			Partitions:    p.Sift.Partitions,
			Sample:        sampleOf(p.Sift.Sample),
		},
		TermSet: TermSet{Enabled: p.TermSet.Enabled, Sample: sampleOf(p.TermSet.Sample)},
		Contain: Contain{Enabled: p.Contain.Enabled, Width: p.Contain.Width, Bins: p.Contain.Bins, MinShingles: p.Contain.MinShingles, MinDF: p.Contain.MinDF},
		Attach:  Attach{Enabled: p.Attach.Enabled, MinBytes: p.Attach.MinBytes, MaxKeys: p.Attach.MaxKeys, WithText: p.Attach.WithText, Shape: p.Attach.Shape, MaxPixels: p.Attach.MaxPixels, ShortText: p.Attach.ShortText, SoleImage: p.Attach.SoleImage, Remote: p.Attach.Remote},
		Lines:   Lines{Enabled: p.Lines.Enabled, MinWords: p.Lines.MinWords, Keys: p.Lines.Keys},
	}
}

func sampleOf(s signature.SampleParams) Sample {
	return Sample{Rows: s.Rows, MinBands: s.MinBands, MaxBands: s.MaxBands, MinUnits: s.MinUnits, BandUnits: s.BandUnits}
}

func (s Sample) params() signature.SampleParams {
	return signature.SampleParams{Rows: s.Rows, MinBands: s.MinBands, MaxBands: s.MaxBands, MinUnits: s.MinUnits, BandUnits: s.BandUnits}
}

// SetParams maps the configuration onto the signature families'
// parameters; the caller adds the secret and the lexicon.
func (s *Signatures) SetParams() signature.SetParams {
	p := signature.DefaultSetParams()
	p.IMatch.Enabled = s.IMatch.Enabled
	p.IMatch.MinTerms = s.IMatch.MinTerms
	p.IMatch.MinRatio = s.IMatch.MinRatio
	p.IMatch.Randomized = s.IMatch.Randomized
	p.IMatch.RemoveFraction = s.IMatch.RemoveFraction
	p.IMatch.Hardening = signature.Hardening(s.IMatch.Hardening)
	p.Shingle.Enabled = s.Shingle.Enabled
	p.Shingle.Width = s.Shingle.Width
	p.Shingle.Sample = s.Shingle.Sample.params()
	p.CharShingle.Enabled = s.CharShingle.Enabled
	p.CharShingle.Width = s.CharShingle.Width
	p.CharShingle.Sample = s.CharShingle.Sample.params()
	p.Sift.Enabled = s.Sift.Enabled
	p.Sift.Formation = signature.SiftFormation(s.Sift.Formation)
	p.Sift.ClusterLen = s.Sift.ClusterLength
	p.Sift.Accept = s.Sift.Acceptance
	p.Sift.Partitions = s.Sift.Partitions
	p.Sift.Sample = s.Sift.Sample.params()
	p.TermSet.Enabled = s.TermSet.Enabled
	p.TermSet.Sample = s.TermSet.Sample.params()
	p.Contain = signature.ContainParams{Enabled: s.Contain.Enabled, Width: s.Contain.Width, Bins: s.Contain.Bins, MinShingles: s.Contain.MinShingles, MinDF: s.Contain.MinDF}
	p.Attach = signature.AttachParams{Enabled: s.Attach.Enabled, MinBytes: s.Attach.MinBytes, MaxKeys: s.Attach.MaxKeys, WithText: s.Attach.WithText, Shape: s.Attach.Shape, MaxPixels: s.Attach.MaxPixels, ShortText: s.Attach.ShortText, SoleImage: s.Attach.SoleImage, Remote: s.Attach.Remote}
	p.Lines = signature.LineParams{Enabled: s.Lines.Enabled, MinWords: s.Lines.MinWords, Keys: s.Lines.Keys}
	return p
}

// validateSignatures reports each family's invalid parameters at the
// family's place in the file.
func (v *validator) validateSignatures(s *Signatures) {
	if !s.IMatch.Enabled && !s.Shingle.Enabled && !s.CharShingle.Enabled && !s.Sift.Enabled && !s.TermSet.Enabled && !s.Contain.Enabled && !s.Attach.Enabled && !s.Lines.Enabled {
		v.add("signatures", "enable at least one of imatch, shingle, charshingle, sift, terms, contain, attach, lines", "no signature family enabled")
	}
	p := s.SetParams()
	check := func(path string, enabled bool, err error) {
		if !enabled || err == nil {
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			v.add(path, "see docs/signatures.md for each parameter's range", "%s", line)
		}
	}
	check("signatures.imatch", s.IMatch.Enabled, p.IMatch.Validate())
	check("signatures.shingle", s.Shingle.Enabled, p.Shingle.Validate())
	check("signatures.charshingle", s.CharShingle.Enabled, p.CharShingle.Validate())
	check("signatures.sift", s.Sift.Enabled, p.Sift.Validate())
	check("signatures.terms", s.TermSet.Enabled, p.TermSet.Validate())
	check("signatures.contain", s.Contain.Enabled, p.Contain.Validate())
	check("signatures.attach", s.Attach.Enabled, p.Attach.Validate())
	check("signatures.lines", s.Lines.Enabled, p.Lines.Validate())
}
