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
	lex := bundledLexicon(t)
	checkKeyedRecords(t, lex)
}

// bundledLexicon loads the lexicon the daemon ships.
func bundledLexicon(t testing.TB) *Lexicon {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "bundled", "lexicon.bmlx"))
	if err != nil {
		t.Fatal(err)
	}
	lex, err := LoadLexicon(raw)
	if err != nil {
		t.Fatal(err)
	}
	return lex
}

// checkKeyedRecords keys lex and checks every term's record (FuzzLoadLexicon
// runs it on every lexicon that loads).
func checkKeyedRecords(t *testing.T, lex *Lexicon) {
	t.Helper()
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
			kl.rank(idx, info) != lex.rank[i] || kl.df(idx, info) != lex.df[i] {
			t.Fatalf("term %d %q: index %d class %d keep %#x rank %d df %d, want %d %d %#x %d %d",
				i, term, idx, info.class(), info.keep(), kl.rank(idx, info), kl.df(idx, info),
				i, lex.class[i], keep, lex.rank[i], lex.df[i])
		}
	}
	// The context filters: both terms of every stored pair pass their
	// side's filter (no false negatives: I-Match's set answers for the
	// pair whichever term stored it), and a term in no pair passes none.
	ctxHash := func(id uint32) uint64 {
		if id == 0 {
			return th.boundary
		}
		return termHash[id-1]
	}
	inPair := make([]bool, len(lex.terms)+1)
	check := func(a, b uint32) {
		inPair[a], inPair[b] = true, true
		if _, info := kl.lookup(ctxHash(b)); b != 0 && !info.mayFollow(ctxHash(a)) {
			t.Fatalf("%q after context %d: filtered out", lex.terms[b-1], a)
		}
		if _, info := kl.lookup(ctxHash(a)); a != 0 && !info.mayPrecede(ctxHash(b)) {
			t.Fatalf("%q before context %d: filtered out", lex.terms[a-1], b)
		}
	}
	for _, e := range lex.ctx {
		for _, id := range e.left {
			check(id, e.term+1)
		}
		for _, id := range e.right {
			check(e.term+1, id)
		}
	}
	for i, h := range termHash {
		if _, info := kl.lookup(h); !inPair[i+1] && info>>46 != 0 {
			t.Fatalf("%q is in no context pair, filter %#x", lex.terms[i], uint64(info>>46))
		}
	}
	for i := range 1000 {
		tok := "\xffnot a term " + strconv.Itoa(i) // not UTF-8: never a term
		if idx, _ := kl.lookup(th.hash(tok)); idx != -1 {
			t.Fatalf("%q found as term %d", tok, idx)
		}
	}
}

// TestTermInfoFields: each field of a record holds its widest value without
// touching its neighbours, and a rank or document frequency past the
// record's width is read from the lexicon.
func TestTermInfoFields(t *testing.T) {
	for _, c := range []struct {
		class    uint8
		keep     uint16
		rank, df uint32
	}{
		{0, 0, 0, 1},
		{classSecondary, 0xffff, rankSaturated - 1, dfSaturated - 1},
		{classPrimary, 0x5555, rankSaturated, dfSaturated},
		{classSecondary, 0xaaaa, 1<<24 - 2, 1 << 31},
		{classDict, 1, 1 << 20, math.MaxUint32},
	} {
		for _, f := range []termInfo{0, 0xff << 46, 0xff << 54, 0xa5 << 46, 0x5a << 54} {
			ti := newTermInfo(c.class, c.keep, c.rank, c.df) | f
			kl := &keyedLexicon{lex: &Lexicon{rank: []uint32{c.rank}, df: []uint32{c.df}}}
			if ti.class() != c.class || ti.keep() != c.keep || kl.rank(0, ti) != c.rank || kl.df(0, ti) != c.df {
				t.Errorf("%+v, filter %#x: class %d keep %#x rank %d df %d", c, uint64(f), ti.class(), ti.keep(), kl.rank(0, ti), kl.df(0, ti))
			}
			for b := range uint64(8) {
				h := b << 61
				if ti.mayFollow(h) != (f>>46&(1<<b) != 0) || ti.mayPrecede(h) != (f>>54&(1<<b) != 0) {
					t.Errorf("%+v, filter %#x: context bit %d read as %v, %v", c, uint64(f), b, ti.mayFollow(h), ti.mayPrecede(h))
				}
			}
		}
	}
}
