package store

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// assembleRef is assemble as it was, by a map of the ids: the reference
// TestAssemble holds the walk in step to.
func assembleRef(m campaignOutcome, keys, ids []string, own int64, vols []int64) Campaign {
	if !m.known {
		return Campaign{}
	}
	c := Campaign{ID: m.d.ref, Recipients: m.count, Networks: m.nets, Senders: m.snds, First: time.Unix(m.first, 0)}
	voted := make(map[string]bool, len(ids))
	for i, id := range ids {
		voted[id] = !m.d.join || m.d.voters[i]
	}
	for i, k := range keys {
		switch {
		case voted[k]:
			vols[i] = m.count
			if m.d.join {
				c.Joined = append(c.Joined, i)
			}
		default:
			vols[i] = own
		}
	}
	return c
}

// TestAssemble: the same volumes and the same joined keys as the map of
// the ids gave, for key lists with and without repeats, joined campaigns
// with random voters and new ones, and ids given in another order than
// the keys' (which the stores never do, and which must still be right).
func TestAssemble(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 2))
	for round := 0; round < 3000; round++ {
		n := rng.IntN(120)
		distinct := 1 + rng.IntN(100)
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("v9:fam.%d:%x", rng.IntN(3), rng.IntN(distinct))
		}
		ids := uniq(keys)
		if round%5 == 4 {
			rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		}
		m := campaignOutcome{known: round%17 != 0, count: 1000 + int64(round), nets: 3, snds: 2, first: 1_700_000_000}
		m.d = decision{ref: uint32(round), join: rng.IntN(3) > 0, voters: make([]bool, len(ids))}
		for i := range m.d.voters {
			m.d.voters[i] = rng.IntN(2) == 0
		}
		// A key the ids lack counts as a new one.
		if n > 0 && round%7 == 0 {
			keys[rng.IntN(n)] = "v9:absent"
		}
		got, want := make([]int64, n), make([]int64, n)
		gc := m.assemble(keys, ids, 7, got)
		wc := assembleRef(m, keys, ids, 7, want)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: volumes %v, want %v", round, got, want)
		}
		if gc.ID != wc.ID || gc.Recipients != wc.Recipients || !gc.First.Equal(wc.First) || !slices.Equal(gc.Joined, wc.Joined) || (gc.Joined == nil) != (wc.Joined == nil) {
			t.Fatalf("round %d: campaign %+v, want %+v", round, gc, wc)
		}
	}
}

// BenchmarkAssemble: a message's 43 keys (a few repeated) joined to a
// campaign.
func BenchmarkAssemble(b *testing.B) {
	m, keys, ids, vols := assembleBench()
	b.ReportAllocs()
	for b.Loop() {
		m.assemble(keys, ids, 1, vols)
	}
}

// BenchmarkAssembleMap is BenchmarkAssemble by the map of the ids, as it
// was.
func BenchmarkAssembleMap(b *testing.B) {
	m, keys, ids, vols := assembleBench()
	b.ReportAllocs()
	for b.Loop() {
		assembleRef(m, keys, ids, 1, vols)
	}
}

// assembleBench is the benchmarks' message: 43 keys, a few repeated, of a
// campaign whose decision has two ids in three as voters.
func assembleBench() (m campaignOutcome, keys []string, ids []string, vols []int64) {
	keys = benchIDs(40)
	keys = append(keys, keys[3], keys[9], keys[20])
	ids = uniq(keys)
	m = campaignOutcome{known: true, count: 50, d: decision{join: true, voters: make([]bool, len(ids))}}
	for i := range m.d.voters {
		m.d.voters[i] = i%3 != 0
	}
	return m, keys, ids, make([]int64, len(keys))
}
