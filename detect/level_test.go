package detect

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

func TestLevel(t *testing.T) {
	tests := []struct {
		name string
		in   levelInput
		want int
	}{
		{"seen once", levelInput{seen: 1, ratio: 0.1}, 0},
		{"seen once, undeclared bulk by threshold 1", levelInput{bulk: true, seen: 1, ratio: 1}, 0},
		{"seen once, users said bulk", levelInput{bulk: true, forced: true, seen: 1, ratio: 0.1}, 7},
		{"users said not bulk", levelInput{seen: 500, ratio: 50, cleared: true}, 0},
		{"twice of 10", levelInput{seen: 2, ratio: 0.2}, 1},
		{"4 of 10", levelInput{seen: 4, ratio: 0.4}, 2},
		{"6 of 10", levelInput{seen: 6, ratio: 0.6}, 3},
		{"9 of 10", levelInput{seen: 9, ratio: 0.9}, 4},
		{"at the threshold, declared", levelInput{bulk: true, seen: 10, ratio: 1, declared: true}, 5},
		{"at the threshold, undeclared", levelInput{bulk: true, seen: 10, ratio: 1}, 6},
		{"3×, declared", levelInput{bulk: true, seen: 30, ratio: 3, declared: true}, 5},
		{"10×, declared", levelInput{bulk: true, seen: 100, ratio: 10, declared: true}, 6},
		{"10×, undeclared", levelInput{bulk: true, seen: 100, ratio: 10}, 8},
		{"10×, undeclared, fast", levelInput{bulk: true, seen: 100, ratio: 10, fast: true}, 9},
		{"50×, declared", levelInput{bulk: true, seen: 500, ratio: 50, declared: true}, 7},
		{"1000×, declared, fast", levelInput{bulk: true, seen: 10000, ratio: 1000, declared: true, fast: true}, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := level(tt.in)
			if got != tt.want {
				t.Errorf("level = %d (%s), want %d", got, strings.Join(why, ", "), tt.want)
			}
			if len(why) == 0 {
				t.Error("no reason given")
			}
		})
	}
}

// For a fixed message (declaration, feedback, campaign start, time) the
// level never falls as the volume grows, is 0 while the message was seen
// once (unless feedback forced it), and is LevelBulk or more exactly when
// the verdict is bulk (but for a threshold of 1, where a message seen once
// is bulk and level 0).
func TestLevelMonotoneInVolume(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for range 2000 {
		th := map[signature.Family]int{signature.FamilyIMatch: 1 + rng.IntN(50), signature.FamilyShingle: 1 + rng.IntN(50)}
		e := &Engine{opt: Options{Thresholds: th}}
		decl, cleared, forced := rng.IntN(2) == 0, rng.IntN(8) == 0, rng.IntN(8) == 0
		first := now.Add(-time.Duration(rng.IntN(7200)) * time.Second)
		withCampaign := rng.IntN(2) == 0
		prev := -1
		for vol := int64(1); vol < 5000; vol += 1 + vol/8 {
			vols := map[signature.Family]int64{signature.FamilyIMatch: vol, signature.FamilyShingle: vol / 2}
			var c store.Campaign
			if withCampaign {
				c = store.Campaign{Recipients: vol + vol/3, First: first}
			}
			in := levelInputOf(vols, e.opt.Thresholds, c, now, levelInput{declared: decl, cleared: cleared, forced: forced})
			in.bulk = !cleared && (forced || in.ratio >= 1)
			l, why := level(in)
			switch {
			case l < prev:
				t.Fatalf("volume %d: level %d after %d (%v, thresholds %v)", vol, l, prev, why, th)
			case in.seen <= 1 && !forced && l != 0:
				t.Fatalf("seen once: level %d (%v)", l, why)
			case (l >= LevelBulk) != in.bulk && (in.seen > 1 || forced): // threshold 1: bulk, yet seen once
				t.Fatalf("volume %d: level %d for bulk=%v (%v)", vol, l, in.bulk, why)
			}
			prev = l
		}
	}
}

// Through the engine: one newsletter to more and more recipients.
func TestLevelThroughEngine(t *testing.T) {
	f := newFixture(t)
	prev := -1
	sent := 0
	for _, n := range []int{1, 1, 3, 5, 10, 30, 100} {
		v := f.check(newsletter("garden", recipients("r"+string(rune('a'+sent)), n)...))
		sent++
		if v.Err != nil || v.Unsigned {
			t.Fatalf("verdict %q", v.Header(false))
		}
		if v.Level < prev {
			t.Errorf("level fell from %d to %d at volume %d", prev, v.Level, v.Volume)
		}
		if sent == 1 && v.Level != 0 {
			t.Errorf("first copy to one recipient: level %d, want 0", v.Level)
		}
		if (v.Level >= LevelBulk) != v.Bulk {
			t.Errorf("level %d with bulk=%v (%s)", v.Level, v.Bulk, v.Header(false))
		}
		prev = v.Level
	}
	if prev < 7 {
		t.Errorf("150 recipients of an undeclared newsletter: level %d, want 7 or more", prev)
	}
}

// TestVerdictHeaderText: every field of the verdict header, in one buffer
// of one object.
func TestVerdictHeaderText(t *testing.T) {
	v := Verdict{Bulk: true, Family: signature.FamilyIMatch, Volume: 300, Level: 8,
		Campaign: store.Campaign{ID: 0xab12, Recipients: 300},
		Via:      []signature.Family{signature.FamilyShingle, signature.FamilySift},
		Networks: 12, Lowered: true, Threshold: 20, Override: "global bulk", Slow: true, IDs: []string{"k1", "k2"}}
	want := "yes; family=" + signature.FamilyIMatch.String() + "; volume=300; campaign=0000ab12; via=" +
		signature.FamilyShingle.String() + "," + signature.FamilySift.String() +
		"; level=8; kind=undeclared; networks=12; threshold=20; feedback=global-bulk; slow; keys=k1,k2"
	if got := v.Header(true); got != want {
		t.Errorf("Header(true) = %q,\nwant %q", got, want)
	}
	// actions.except_senders: not bulk, a level below the bulk levels,
	// and why.
	ex := v
	ex.ExemptSender = "partner.example"
	want = "no; family=" + signature.FamilyIMatch.String() + "; volume=300; campaign=0000ab12; via=" +
		signature.FamilyShingle.String() + "," + signature.FamilySift.String() +
		fmt.Sprintf("; level=%d; kind=undeclared; networks=12; threshold=20; feedback=global-bulk; slow; exempt=sender", LevelBulk-1)
	if got := ex.Header(false); got != want || ex.Tagged() {
		t.Errorf("exempt sender: Header(false) = %q, Tagged %v,\nwant %q, false", got, ex.Tagged(), want)
	}
	for _, id := range []uint32{0, 1, 0xab12, 0x80000000, 0xffffffff} {
		v := Verdict{Campaign: store.Campaign{ID: id, Recipients: 1}}
		if got, want := v.CampaignID(), fmt.Sprintf("%08x", id); got != want {
			t.Errorf("CampaignID(%d) = %q, want %q", id, got, want)
		}
	}
	v.Override, v.Slow, v.IDs = "", false, nil
	if n := testing.AllocsPerRun(100, func() { v.Header(false) }); n > 1 {
		t.Errorf("Header of %q: %.0f objects, want 1", v.Header(false), n)
	}
}
