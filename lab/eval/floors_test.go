package eval

import (
	"strings"
	"testing"
)

func TestFloorsCheck(t *testing.T) {
	f := Floors{
		MinRecall:            map[string]float64{"a": 0.9, "b": 0.5, "gone": 0.1},
		MeanRecall:           0.8,
		MaxHamTagged:         1,
		MaxPersonalOneWindow: 0,
		RealRecall:           map[string]float64{"pot": 0.7},
		KolczRecall:          map[string]float64{"enron": 0.6},
		MaxPersonalTagged:    0,
		StreamSpam:           map[string]float64{ClockDate: 0.3},
		MaxStreamPersonal:    0,
	}
	rep := &Report{
		Attacks: []*AttackResult{
			{Name: "a", Recall: map[string]float64{Combined: 0.95}, HamTagged: 2, HamTaggedList: 1},
			{Name: "b", Recall: map[string]float64{Combined: 0.45}},
		},
		Summary:      &Summary{MeanRecall: map[string]float64{Combined: 0.7}},
		HamOneWindow: &HamWindow{Tagged: 5, TaggedList: 4},
		Real:         []*RealResult{{Name: "pot", Refined: &GroupScore{Recall: map[string]float64{Combined: 0.69}}}},
		Kolcz:        []*KolczResult{{Dataset: "enron-bg", Rows: []KolczRow{{K: 10, Hardening: "also", Recall: 0.5}, {K: 0, Hardening: "also", Recall: 0.1}}}},
		Stream:       []*StreamResult{{Corpus: "trec", Clock: ClockDate, Spam: 100, Tagged: StreamPoint{Spam: 29, Personal: 1}}},
	}
	got := f.Check(rep)
	for _, want := range []string{
		"attack a: 2 ham messages tagged > ceiling 1",
		"attack b: combined recall 0.450 < floor 0.50",
		"attack gone: has a floor but did not run",
		"mean combined recall 0.700 < floor 0.800",
		"ham in one window: 1 personal messages tagged > ceiling 0",
		"real pot: combined recall on refined groups 0.690 < floor 0.70",
		"kolcz enron: recall 0.500 at K = 10 < floor 0.60",
		"attack a: 1 personal ham messages tagged > ceiling 0",
		"stream trec (date): 0.290 of spam tagged < floor 0.30",
		"stream trec (date): 1 personal ham messages tagged > ceiling 0",
	} {
		found := false
		for _, g := range got {
			found = found || g == want
		}
		if !found {
			t.Errorf("missing %q in:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if len(got) != 10 {
		t.Errorf("%d problems, want 10:\n%s", len(got), strings.Join(got, "\n"))
	}
	// At the floors exactly, nothing is reported.
	rep.Attacks[0].HamTagged, rep.Attacks[1].Recall[Combined] = 1, 0.5
	rep.Stream[0].Tagged = StreamPoint{Spam: 30}
	rep.Summary.MeanRecall[Combined] = 0.8
	rep.HamOneWindow.TaggedList = 5
	rep.Real[0].Refined.Recall[Combined] = 0.7
	rep.Kolcz[0].Rows[0].Recall = 0.6
	f.MinRecall = map[string]float64{"a": 0.9, "b": 0.5}
	if got := f.Check(rep); len(got) != 0 {
		t.Errorf("at the floors: %v", got)
	}
}
