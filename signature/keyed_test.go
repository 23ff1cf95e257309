package signature

import (
	"math/rand/v2"
	"testing"
)

// TestU64setFilter: the set with its filter in front answers as a plain
// map of its values, for members and for many more non-members than
// members (its use: most of I-Match's context lookups miss), at sizes
// from empty to the bundled lexicon's ~16,000 pairs.
func TestU64setFilter(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 3, 100, 16000} {
		want := map[uint64]bool{}
		vals := make([]uint64, n)
		for i := range vals {
			vals[i] = r.Uint64()
			want[nonZero(vals[i])] = true
		}
		s := newU64set(vals)
		for _, v := range vals {
			if !s.has(v) {
				t.Fatalf("%d values: member %x not found", n, v)
			}
		}
		for range 200000 {
			v := r.Uint64()
			if got := s.has(v); got != want[nonZero(v)] {
				t.Fatalf("%d values: has(%x) = %v, want %v", n, v, got, want[nonZero(v)])
			}
		}
		// Values that differ from a member only where the filter does not
		// look (the low 32 bits) pass the filter and must be refused by
		// the slots.
		for _, v := range vals {
			u := v ^ 0x5a5a
			if got := s.has(u); got != want[nonZero(u)] {
				t.Fatalf("%d values: has(%x) = %v, want %v", n, u, got, want[nonZero(u)])
			}
		}
	}
}
