package store

import (
	"context"
	"fmt"
	"testing"
)

// TestEmbeddedKeyAge (measurement, branch n-age): with the key-age rule
// on, an edited copy whose only shared keys are AgeAlone containment keys
// that the campaign's first copy wrote joins it; the same number of keys
// re-pointed to the campaign later (a footer moved by another message)
// does not. With the rule off (main), neither joins: ContainAlone keys
// are needed.
func TestEmbeddedKeyAge(t *testing.T) {
	defer func(a, f int) { AgeAlone, AgeFirst = a, f }(AgeAlone, AgeFirst)
	AgeAlone, AgeFirst = 3, 2
	e, err := OpenEmbedded(EmbeddedOptions{SaveInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	keys := func(p string, from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("x:contain:%s%d", p, i))
		}
		return out
	}
	obs := func(rcpt string, ks ...[]string) int64 {
		var all []string
		for _, k := range ks {
			all = append(all, k...)
		}
		res, err := e.Observe(ctx, Observation{Keys: all, Recipients: []string{rcpt}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Volumes[0]
	}
	// An offer: its first copy writes o0…o7; an edited copy keeps three.
	obs("a@x", keys("o", 0, 8))
	if v := obs("b@x", keys("o", 0, 3), keys("p", 0, 5)); v != 2 {
		t.Errorf("edited copy sharing %d early keys: volume %d, want 2", AgeAlone, v)
	}
	// A footer f0…f2 moved into campaigns by later messages: a thread's
	// first message starts one, its second (its own text, the footer)
	// starts another and moves the footer; a third shares the footer only.
	obs("c@x", keys("t", 0, 8), keys("f", 0, 3))
	for i := range 4 {
		obs(fmt.Sprintf("d%d@x", i), keys(fmt.Sprintf("u%d-", i), 0, 8), keys("f", 0, 3))
	}
	if v := obs("e@x", keys("v", 0, 5), keys("f", 0, 3)); v != 1 {
		t.Errorf("a copy sharing a re-pointed footer: volume %d, want 1", v)
	}
	// Off, the edited copy starts its own campaign.
	AgeAlone = 0
	obs("g@x", keys("q", 0, 8))
	if v := obs("h@x", keys("q", 0, 3), keys("r", 0, 5)); v != 1 {
		t.Errorf("rule off: edited copy volume %d, want 1", v)
	}
}

// TestEmbeddedKeyAgeKeep: a copy that joins nothing moves the offer keys
// it shares off the campaign (one switch each), so the next copy finds
// them no longer early; with AgeKeep it leaves them there.
func TestEmbeddedKeyAgeKeep(t *testing.T) {
	defer func(a, f int, k bool) { AgeAlone, AgeFirst, AgeKeep = a, f, k }(AgeAlone, AgeFirst, AgeKeep)
	for _, keep := range []bool{false, true} {
		AgeAlone, AgeFirst, AgeKeep = 3, 2, keep
		e, err := OpenEmbedded(EmbeddedOptions{SaveInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		obs := func(rcpt string, ks ...string) int64 {
			res, err := e.Observe(context.Background(), Observation{Keys: ks, Recipients: []string{rcpt}})
			if err != nil {
				t.Fatal(err)
			}
			return res.Volumes[0]
		}
		obs("a@x", "x:contain:o0", "x:contain:o1", "x:contain:o2", "x:contain:o3", "x:contain:o4")
		obs("b@x", "x:contain:o0", "x:contain:o1", "x:contain:p0", "x:contain:p1", "x:contain:p2")
		want := map[bool]int64{false: 1, true: 2}[keep]
		if v := obs("c@x", "x:contain:o0", "x:contain:o1", "x:contain:o2", "x:contain:q0", "x:contain:q1"); v != want {
			t.Errorf("keep %v: third copy sharing o0…o2 with the first: volume %d, want %d", keep, v, want)
		}
		e.Close()
	}
}
