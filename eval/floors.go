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
}

// FloorsFor returns the floors of a run mode ("ci" or "full"); the full
// run has none yet beyond what the CI run checks.
func FloorsFor(mode string) Floors {
	if mode == "ci" {
		return ciFloors
	}
	return Floors{MaxHamTagged: -1, MaxPersonalOneWindow: -1}
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

// ciFloors are the floors of "milterd eval -ci" (seed 1): each measured
// value minus the margin given in docs/evaluation.md.
var ciFloors = Floors{
	MaxHamTagged:         -1,
	MaxPersonalOneWindow: -1,
}
