package store

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestUniqSigs: uniqSigs keeps what a map of the ids keeps (uniqRef), in
// the same order, with each id's sigHash, for lists from empty to past the
// stack table (64 distinct ids) and with many repeats.
func TestUniqSigs(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 1))
	for round := 0; round < 2000; round++ {
		n := rng.IntN(300)
		distinct := 1 + rng.IntN(200)
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("v9:fam.%d:%x", rng.IntN(3), rng.IntN(distinct))
		}
		want := uniqRef(keys)
		ids, sigs := uniqSigs(keys, nil, nil)
		if !slices.Equal(ids, want) {
			t.Fatalf("round %d: got %d ids %q, want %d %q", round, len(ids), ids, len(want), want)
		}
		if len(sigs) != len(ids) {
			t.Fatalf("round %d: got %d sigs for %d ids", round, len(sigs), len(ids))
		}
		for i, id := range ids {
			if sigs[i] != sigHash(id) {
				t.Fatalf("round %d: sig of %q is %x, want %x", round, id, sigs[i], sigHash(id))
			}
		}
	}
}

// BenchmarkUniqSigs against BenchmarkUniqThenHash: a message's 37 ids,
// deduplicated and hashed, the new way and the old.
func BenchmarkUniqSigs(b *testing.B) {
	keys := benchIDs(37)
	b.ReportAllocs()
	for b.Loop() {
		uniqSigs(keys, nil, nil)
	}
}

func BenchmarkUniqThenHash(b *testing.B) {
	keys := benchIDs(37)
	b.ReportAllocs()
	for b.Loop() {
		ids := uniqRef(keys)
		sigs := make([]uint64, len(ids))
		for i, id := range ids {
			sigs[i] = sigHash(id)
		}
	}
}

func benchIDs(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("v9:fam.%d:%032x", i%5, uint64(i)*0x9e3779b97f4a7c15)
	}
	return keys
}

// uniqRef is the store's deduplication as it was before uniqSigs: a map of
// the ids.
func uniqRef(keys []string) []string {
	seen := make(map[string]bool, len(keys))
	var out []string
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
