package store

import "testing"

// guardMessage is a message of the default families (58 keys) whose
// strong join unions three campaigns, as the merge guard sees it.
func guardMessage() ([]string, []keyPtr) {
	var fams []string
	var kps []keyPtr
	for _, fc := range []struct {
		f string
		n int
	}{{"imatch", 12}, {"shingle", 6}, {"charshingle", 6}, {"sift", 4}, {"terms", 10}, {"contain", 16}, {"attach", 4}} {
		for i := range fc.n {
			fams = append(fams, fc.f)
			kps = append(kps, keyPtr{found: true, p: makePtr(uint32(1+i%4), 0)})
		}
	}
	return fams, kps
}

// guardAll is what Embedded.campaign decides of such a message: its
// campaign, then the guard of each union member, the families counted
// once.
func guardAll(fams []string, kps []keyPtr) (union, merged int) {
	fc := familyCounts(fams)
	d := decide(fams, fc, kps, 0, 0)
	for _, r := range d.union {
		if aliasGuard(fams, fc, kps, r) {
			merged++
		}
	}
	return len(d.union), merged
}

// BenchmarkAliasGuard is the campaign decision of a message with a union
// and the merge guard of each union member.
func BenchmarkAliasGuard(b *testing.B) {
	fams, kps := guardMessage()
	if u, m := guardAll(fams, kps); u != 3 || m != 3 {
		b.Fatalf("union of %d, %d merged; want 3 and 3", u, m)
	}
	b.ReportAllocs()
	for b.Loop() {
		guardAll(fams, kps)
	}
}
