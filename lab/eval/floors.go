package eval

import (
	"fmt"
	"strings"
)

// Floors are the least results a run must reach. They are set below the
// measured values with a stated margin (docs/evaluation.md lists both) and
// are never lowered to let a run pass: a run under a floor is a
// regression to explain or fix.
type Floors struct {
	// MinRecall is the least combined recall of each attack, by name.
	MinRecall map[string]float64
	// MeanRecall is the least combined recall averaged over the attacks.
	MeanRecall float64
	// MaxHamTagged is the most ham messages tagged in any attack world.
	MaxHamTagged int
	// MaxPersonalOneWindow is the most personal (non-list) ham messages
	// tagged when the ham stream is replayed in one store window.
	MaxPersonalOneWindow int
	// RealRecall is the least combined recall on each real corpus's
	// refined groups.
	RealRecall map[string]float64
	// KolczRecall is the least recall of the default I-Match (K = 10,
	// hardening also) in the Kolcz protocol, by dataset prefix.
	KolczRecall map[string]float64
	// MaxPersonalTagged is the most personal (non-list) ham messages
	// tagged in any attack world (-1: no ceiling).
	MaxPersonalTagged int
	// StreamSpam is the least share of the real stream's spam the
	// configuration tags, by clock; MaxStreamPersonal the most personal
	// ham it tags (-1: no ceiling).
	StreamSpam        map[string]float64
	MaxStreamPersonal int
}

// FloorsFor returns the floors of a run mode ("ci" or "full"); the full
// run has none yet beyond what the CI run checks.
func FloorsFor(mode string) Floors {
	if mode == "ci" {
		return ciFloors
	}
	return Floors{MaxHamTagged: -1, MaxPersonalOneWindow: -1, MaxPersonalTagged: -1, MaxStreamPersonal: -1}
}

// Check lists every result past its floor.
func (f Floors) Check(rep *Report) []string {
	var out []string
	for _, a := range rep.Attacks {
		if min, ok := f.MinRecall[a.Name]; ok && a.Recall[Combined] < min {
			out = append(out, fmt.Sprintf("attack %s: combined recall %.3f < floor %.2f", a.Name, a.Recall[Combined], min))
		}
		if f.MaxHamTagged >= 0 && a.HamTagged > f.MaxHamTagged {
			out = append(out, fmt.Sprintf("attack %s: %d ham messages tagged > ceiling %d", a.Name, a.HamTagged, f.MaxHamTagged))
		}
		if p := a.HamTagged - a.HamTaggedList; f.MaxPersonalTagged >= 0 && p > f.MaxPersonalTagged {
			out = append(out, fmt.Sprintf("attack %s: %d personal ham messages tagged > ceiling %d", a.Name, p, f.MaxPersonalTagged))
		}
	}
	for name := range f.MinRecall {
		found := false
		for _, a := range rep.Attacks {
			found = found || a.Name == name
		}
		if !found && len(rep.Attacks) > 0 {
			out = append(out, fmt.Sprintf("attack %s: has a floor but did not run", name))
		}
	}
	if s := rep.Summary; s != nil && s.MeanRecall[Combined] < f.MeanRecall {
		out = append(out, fmt.Sprintf("mean combined recall %.3f < floor %.3f", s.MeanRecall[Combined], f.MeanRecall))
	}
	if h := rep.HamOneWindow; h != nil && f.MaxPersonalOneWindow >= 0 && h.Tagged-h.TaggedList > f.MaxPersonalOneWindow {
		out = append(out, fmt.Sprintf("ham in one window: %d personal messages tagged > ceiling %d", h.Tagged-h.TaggedList, f.MaxPersonalOneWindow))
	}
	for _, r := range rep.Real {
		if min, ok := f.RealRecall[r.Name]; ok && r.Refined.Recall[Combined] < min {
			out = append(out, fmt.Sprintf("real %s: combined recall on refined groups %.3f < floor %.2f", r.Name, r.Refined.Recall[Combined], min))
		}
	}
	for _, r := range rep.Stream {
		if min, ok := f.StreamSpam[r.Clock]; ok && share(r.Tagged.Spam, r.Spam) < min {
			out = append(out, fmt.Sprintf("stream %s (%s): %.3f of spam tagged < floor %.2f", r.Corpus, r.Clock, share(r.Tagged.Spam, r.Spam), min))
		}
		if f.MaxStreamPersonal >= 0 && r.Tagged.Personal > f.MaxStreamPersonal {
			out = append(out, fmt.Sprintf("stream %s (%s): %d personal ham messages tagged > ceiling %d", r.Corpus, r.Clock, r.Tagged.Personal, f.MaxStreamPersonal))
		}
	}
	for _, k := range rep.Kolcz {
		for prefix, min := range f.KolczRecall {
			if !strings.HasPrefix(k.Dataset, prefix) {
				continue
			}
			for _, row := range k.Rows {
				if row.K == 10 && row.Hardening == "also" && row.Recall < min {
					out = append(out, fmt.Sprintf("kolcz %s: recall %.3f at K = 10 < floor %.2f", prefix, row.Recall, min))
				}
			}
		}
	}
	return out
}

// ciFloors are the floors of "bulklab eval -ci" (seed 1; CanonVersion 2,
// word shingles of 2), generated from its report: each attack's recall
// floor is the measured value minus 0.05 (about two of the 40 campaigns
// flipping), the real corpora's and the mean's minus 0.03 and 0.02,
// Kolcz's minus 0.05, rounded down; the ham ceilings allow five messages in
// any world (0.09 % of 5,354, under the 0.1 % target) and two personal
// messages in one window, where none are measured. docs/evaluation.md
// lists floors and measured values side by side.
var ciFloors = Floors{
	MinRecall: map[string]float64{
		"none":                           0.95, // measured 1.000
		"malkin-intelligent-add":         0.94, // measured 0.998 (containment family, I-Match K 5; 0.987 before it, 0.767 per key)
		"malkin-intelligent-delete":      0.94, // measured 0.997 (term-set support family; 0.957 before it, 0.622 per key)
		"malkin-intelligent-change":      0.91, // measured 0.950 (containment family, I-Match K 5; 0.945 before it, 0.292 per key)
		"malkin-intelligent-combination": 0.94, // measured 0.990 (union of split campaigns; 0.968 before it, 0.585 per key)
		"malkin-random-add":              0.95, // measured 1.000 (containment family; 0.978 before it, 0.840 per key)
		"malkin-random-delete":           0.95, // measured 1.000 (term-set support family; 0.987 before it, 0.605 per key)
		"malkin-random-change":           0.92, // measured 0.972 (union of split campaigns; 0.962 before it, 0.318 per key)
		"malkin-random-combination":      0.94, // measured 0.997 (term-set support family; 0.977 before it, 0.563 per key)
		"personalise":                    0.95, // measured 1.000
		"hashbuster":                     0.95, // measured 1.000
		"hidden-text":                    0.95, // measured 1.000
		"spaces-in-words":                0.94, // measured 0.993
		"homoglyphs":                     0.95, // measured 1.000
		"zero-width":                     0.95, // measured 1.000
		"reorder":                        0.95, // measured 1.000
		"charset":                        0.95, // measured 1.000
		"alt-mismatch":                   0.95, // measured 1.000
		"good-words":                     0.92, // measured 0.970 (containment family, I-Match K 5; 0.950 before it, 0.810 per key)
		"noise-text":                     0.88, // measured 0.925 (containment family, I-Match K 5; 0.880 before it, 0.777 per key)
		"leetspeak":                      0.95, // measured 1.000 (campaign counting; 0.997 before)
		"case-noise":                     0.95, // measured 1.000
		"punct-in-words":                 0.95, // measured 1.000
		"truncate":                       0.95, // measured 1.000
		"subject-spin":                   0.95, // measured 1.000
		"url-noise":                      0.95, // measured 1.000
		"spin":                           0.95, // measured 1.000 (campaign counting; 0.993 before)
		"tags-in-words":                  0.95, // measured 1.000
		"entities":                       0.95, // measured 1.000
		"personal+hashbuster+1":          0.94, // measured 0.997 (term-set support family; 0.988 before it, 0.950 per key)
		"stack-3":                        0.92, // measured 0.968 (containment family, I-Match K 5; 0.965 before it, 0.737 per key)
		"display-name":                   0.95, // measured 1.000
		"display-name-short":             0.94, // measured 0.998 (campaign counting; 0.958 before)
		"display-name-cc":                0.95, // measured 1.000
	},
	MeanRecall:           0.97, // measured 0.994 with the containment family and I-Match K 5 (0.991 before), minus 0.02
	MaxHamTagged:         5,    // measured 0
	MaxPersonalOneWindow: 2,    // measured 0
	RealRecall: map[string]float64{
		"phishing-pot": 0.97, // measured 1.000 (campaign counting; 0.984 before)
		"cypherpunks":  0.93, // measured 0.964 (2007–2008)
	},
	KolczRecall: map[string]float64{
		"enron-bg-spam": 0.60, // measured 0.653
	},
	// The adaptive threshold's targets (issue 16): no personal ham in any
	// world; on the stream's first 6,000 messages (the configuration's
	// verdicts, Date clock) the spam tagged minus 0.025 and no personal ham.
	// Measured with the default configuration, adaptive threshold off.
	MaxPersonalTagged: 0,                                   // measured 0
	StreamSpam:        map[string]float64{ClockDate: 0.45}, // measured 0.481 (the sole image's shape; 0.467 before it, 0.400 before networks at the site's size)
	MaxStreamPersonal: 0,                                   // measured 0 of 351
}
