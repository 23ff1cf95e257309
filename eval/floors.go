package eval

import "fmt"

// Floors are the least results a run must reach: set below measured
// values with a margin (docs/evaluation.md gives both), never lowered to
// let a run pass.
type Floors struct {
	// MinRecall is the least combined recall of each attack (by name).
	MinRecall map[string]float64
	// MeanRecall is the least combined recall averaged over attacks.
	MeanRecall float64
	// MaxHamTagged is the most ham messages tagged in any one world.
	MaxHamTagged int
	// RealRecall is the least combined recall on each real corpus.
	RealRecall map[string]float64
}

// FloorsFor returns the floors of a run mode ("ci" or "full").
func FloorsFor(mode string) Floors {
	return Floors{}
}

// Check lists every result below its floor.
func (f Floors) Check(rep *Report) []string {
	var out []string
	for _, a := range rep.Attacks {
		if min, ok := f.MinRecall[a.Name]; ok && a.Recall[Combined] < min {
			out = append(out, fmt.Sprintf("attack %s: combined recall %.3f < floor %.3f", a.Name, a.Recall[Combined], min))
		}
		if a.HamTagged > f.MaxHamTagged {
			out = append(out, fmt.Sprintf("attack %s: %d ham messages tagged > ceiling %d", a.Name, a.HamTagged, f.MaxHamTagged))
		}
	}
	if s := rep.Summary; s != nil && s.MeanRecall[Combined] < f.MeanRecall {
		out = append(out, fmt.Sprintf("mean combined recall %.3f < floor %.3f", s.MeanRecall[Combined], f.MeanRecall))
	}
	for _, r := range rep.Real {
		if min, ok := f.RealRecall[r.Name]; ok && r.Refined.Recall[Combined] < min {
			out = append(out, fmt.Sprintf("real %s: combined recall on refined groups %.3f < floor %.3f", r.Name, r.Refined.Recall[Combined], min))
		}
	}
	return out
}
