package eval

import (
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/signature"
)

// TestGroupMisses: each untagged message after the first T of its group is
// put down to one cause, the group's main store campaign being the one
// most of its messages went to.
func TestGroupMisses(t *testing.T) {
	key := []signature.Key{{Family: signature.FamilyCharShingle, Hash: 1}}
	msg := func(g string, store uint32, joined, bulk bool, keys []signature.Key) realRec {
		return realRec{silver: g, store: store, joined: joined, bulk: bulk, keys: keys}
	}
	recs := []realRec{
		msg("a", 1, false, false, key), // first T = 2: never counted
		msg("a", 1, true, false, key),
		msg("a", 1, true, true, key),   // tagged
		msg("a", 1, true, false, key),  // main, under the threshold
		msg("a", 2, true, false, key),  // split
		msg("a", 3, false, false, key), // own
		msg("a", 0, false, false, nil), // unsigned
		msg("", 9, false, false, key),  // in no group
		msg("b", 4, false, false, key), // a group of 2: first T only
		msg("b", 4, true, false, key),
	}
	set := &RealSet{Name: "t"}
	for i := range recs {
		set.Items = append(set.Items, Item{Name: "m" + itoa(i), Raw: []byte("Subject: s\r\n\r\nbody\r\n")})
	}
	m, missed := groupMisses(set, recs, 2, true, func(x *realRec) string {
		if x.silver == "a" {
			return x.silver
		}
		return ""
	})
	if m.Unsigned != 1 || m.Own != 1 || m.Split != 1 || m.Main != 1 {
		t.Errorf("causes: got %+v, want one of each", m)
	}
	if m.Stores != 4 { // stores 1, 2, 3 and none (0)
		t.Errorf("stores per group: got %v, want 4", m.Stores)
	}
	var got []string
	for _, c := range missed {
		got = append(got, c.Name+":"+c.Cause)
	}
	if want := "m3:main m4:split m5:own m6:unsigned"; strings.Join(got, " ") != want {
		t.Errorf("missed: got %q, want %q", strings.Join(got, " "), want)
	}
	if _, missed := groupMisses(set, recs, 2, false, func(x *realRec) string { return x.silver }); missed != nil {
		t.Errorf("missed listed without asking: %v", missed)
	}
}

// TestPointed: a missed message's keys are described where the stream
// left them when it came: by campaign, new, or silenced by WeakCap moves.
func TestPointed(t *testing.T) {
	k := func(f signature.Family, h uint64) signature.Key { return signature.Key{Family: f, Hash: h} }
	a, b, c, d := k(signature.FamilyCharShingle, 1), k(signature.FamilyIMatch, 2), k(signature.FamilyContain, 3), k(signature.FamilyContain, 4)
	recs := []realRec{
		{keys: []signature.Key{a, b}, store: 1},
		{keys: []signature.Key{a, c}, store: 2}, // a moves once
		{keys: []signature.Key{c}, store: 3},    // c moves
		{keys: []signature.Key{c}, store: 4},
		{keys: []signature.Key{c}, store: 5},
		{keys: []signature.Key{c}, store: 6}, // c's fourth move: capped
		{keys: []signature.Key{a, b, c, d}, store: 7},
		{keys: []signature.Key{a}, store: 8},
	}
	got := pointed(recs, []int{1, 6, 7}, []uint32{1, 1, 7})
	want := []string{
		"main: charshingle 1; new 1; capped 0",
		"00000002: charshingle 1; main: imatch 1; new 1; capped 1",
		"main: charshingle 1; new 0; capped 0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWriteMissed: one header line, then one tab-separated line of eleven
// fields per missed message of the refined groups (silver ones are not
// listed).
func TestWriteMissed(t *testing.T) {
	rep := &Report{Real: []*RealResult{{
		Name:    "c",
		Silver:  &GroupScore{Missed: []MissedCopy{{Name: "silver-only"}}},
		Refined: &GroupScore{Missed: []MissedCopy{{Group: "0a39bb5f", Size: 20, Nth: 11, Name: "cur/x", Cause: "split", Store: 0x138c4770, Volume: 7, Subject: "s"}}},
	}}}
	var b strings.Builder
	if err := rep.WriteMissed(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "corpus\tgroup\t") {
		t.Fatalf("got %q, want a header and one line", b.String())
	}
	if want := "c\t0a39bb5f\t20\t11\tsplit\t138c4770\t7\tcur/x\ts\t\t"; lines[1] != want {
		t.Errorf("got %q, want %q", lines[1], want)
	}
}
