package signature

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
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

// TestKeyedLexiconRecords: for every term of the bundled lexicon, the keyed
// table's one record answers what the lexicon's own tables and I-Match's
// randomization (recomputed here as the separate keep table was built)
// say, and tokens outside the lexicon are not found. A record that drops
// or shifts a field, or a probe that stops early, fails it.
func TestKeyedLexiconRecords(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "bundled", "lexicon.bmlx"))
	if err != nil {
		t.Fatal(err)
	}
	lex, err := LoadLexicon(raw)
	if err != nil {
		t.Fatal(err)
	}
	s := testSecret(t)
	p := DefaultIMatchParams()
	p.Randomized = MaxRandomized // every keep bit in use
	th := newTokenHasher(s)
	kl, termHash, err := newKeyedLexicon(lex, th, newKeepRule(s, p))
	if err != nil {
		t.Fatal(err)
	}
	member := s.derive("imatch/randomize")
	cut := uint64(p.RemoveFraction * (1 << 64))
	for i, term := range lex.terms {
		h := th.hash(term)
		if termHash[i] != h {
			t.Fatalf("term %d %q: hash %x, want %x", i, term, termHash[i], h)
		}
		var keep uint16
		if lex.class[i] != classDict {
			keep = 1
			for j := 1; j <= p.Randomized; j++ {
				if member.words(h, uint64(j)) >= cut {
					keep |= 1 << j
				}
			}
		}
		idx, info := kl.lookup(h)
		if idx != int32(i) || info.class() != lex.class[i] || info.keep() != keep ||
			info.rank() != lex.rank[i] || info.df() != lex.df[i] {
			t.Fatalf("term %d %q: index %d class %d keep %#x rank %d df %d, want %d %d %#x %d %d",
				i, term, idx, info.class(), info.keep(), info.rank(), info.df(),
				i, lex.class[i], keep, lex.rank[i], lex.df[i])
		}
	}
	for i := range 100000 {
		tok := "\x00not a term " + strconv.Itoa(i)
		if idx, _ := kl.lookup(th.hash(tok)); idx != -1 {
			t.Fatalf("%q found as term %d", tok, idx)
		}
	}
}

// TestTermInfoFields: each field of a record holds its widest value without
// touching its neighbours, and a document frequency past the record's
// width is read from the lexicon by the containment family's test.
func TestTermInfoFields(t *testing.T) {
	for _, c := range []struct {
		class      uint8
		keep       uint16
		rank, df   uint32
		wantDF     uint32
		wantCommon bool // df >= minDF below
	}{
		{0, 0, 0, 1, 1, false},
		{classSecondary, 0xffff, 1<<24 - 1, dfSaturated - 1, dfSaturated - 1, false},
		{classPrimary, 0x5555, 0xaaaaaa, dfSaturated, dfSaturated, true},
		{classSecondary, 0xaaaa, 0x555555, 1 << 31, dfSaturated, true},
		{classDict, 1, 1, math.MaxUint32, dfSaturated, true},
	} {
		ti := newTermInfo(c.class, c.keep, c.rank, c.df)
		if ti.class() != c.class || ti.keep() != c.keep || ti.rank() != c.rank || ti.df() != c.wantDF {
			t.Errorf("%+v: class %d keep %#x rank %#x df %d", c, ti.class(), ti.keep(), ti.rank(), ti.df())
		}
		sh := &Shingle{minDF: dfSaturated, kl: &keyedLexicon{lex: &Lexicon{df: []uint32{c.df}}}}
		if got := sh.common(0, ti); got != c.wantCommon {
			t.Errorf("%+v: common = %v, want %v", c, got, c.wantCommon)
		}
	}
}
