package store

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkDecide decides for a message of the default families' key
// counts whose keys point to a few campaigns, some keys to none: the
// campaign model's own CPU, without a store.
func BenchmarkDecide(b *testing.B) {
	var fams []string
	for _, f := range []struct {
		name string
		n    int
	}{{"imatch", 6}, {"shingle", 5}, {"charshingle", 5}, {"sift", 4}, {"terms", 10}, {"contain", 16}, {"lines", 8}} {
		for range f.n {
			fams = append(fams, f.name)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ptrs := make([]keyPtr, len(fams))
	for i := range ptrs {
		if rng.IntN(3) > 0 {
			ptrs[i] = keyPtr{found: true, p: makePtr(uint32(1+rng.IntN(4)), 0)}
		}
	}
	fc := familyCounts(fams)
	b.ReportAllocs()
	for b.Loop() {
		decide(fams, fc, ptrs, 99, 0)
	}
}
