package signature

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"testing"
)

// smallLexiconDocs is a hand-made corpus whose statistics are easy to
// reason about: "common" words in every document, "middle" words in some,
// "rare" words in few.
func smallLexiconDocs() []*Doc {
	var docs []*Doc
	for i := range 100 {
		toks := []string{"the", "common", "words", "appear", "everywhere"}
		if i%4 == 0 {
			toks = append(toks, "middle", "quarter")
		}
		if i%10 == 0 {
			toks = append(toks, "tenth", "context", "middle")
		}
		if i%25 == 0 {
			toks = append(toks, "rarely", "seen")
		}
		if i == 7 {
			toks = append(toks, "unique", "x1y2z3")
		}
		docs = append(docs, docOf(toks))
	}
	return docs
}

func buildSmall(tb testing.TB, p LexiconParams) *Lexicon {
	tb.Helper()
	b := NewLexiconBuilder(BuilderOptions{})
	for _, d := range smallLexiconDocs() {
		b.Add(d)
	}
	l, err := b.Build(p)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

func TestLexiconBuildClasses(t *testing.T) {
	p := DefaultLexiconParams()
	// N = 100: nidf ∈ [0.2, 0.5] ⟺ df ∈ [10, 39.8].
	p.NidfMin, p.NidfMax = 0.2, 0.5
	p.MinDF, p.DictMinDF = 2, 2
	p.ContextMinCount = 10
	l := buildSmall(t, p)
	st := l.Stats()
	if st.Docs != 100 || st.DFLow != 10 || st.DFHigh != 39 {
		t.Fatalf("got docs=%d window=[%d,%d], want 100 [10,39]", st.Docs, st.DFLow, st.DFHigh)
	}
	if got, want := l.Terms("primary"), []string{"context", "middle", "quarter", "tenth"}; !slices.Equal(got, want) {
		t.Errorf("primary = %q, want %q", got, want)
	}
	if got, want := l.Terms("secondary"), []string{"rarely", "seen"}; !slices.Equal(got, want) {
		t.Errorf("secondary = %q, want %q", got, want)
	}
	want := map[string]TermInfo{
		"middle":  {DF: 30, Primary: true}, // i%4==0 ∪ i%10==0
		"quarter": {DF: 25, Primary: true},
		"tenth":   {DF: 10, Primary: true},
		"context": {DF: 10, Primary: true},
		"rarely":  {DF: 4, Secondary: true, Rank: 0},
		"seen":    {DF: 4, Secondary: true, Rank: 1},
		"common":  {DF: 100}, // too frequent: dictionary only
		"the":     {DF: 100}, // not an I-Match term
	}
	for term, w := range want {
		got, ok := l.Lookup(term)
		if !ok || got != w {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v", term, got, ok, w)
		}
	}
	for _, term := range []string{"unique", "x1y2z3"} {
		if _, ok := l.Lookup(term); ok {
			t.Errorf("%q (df 1) is in the lexicon, want dropped by MinDF", term)
		}
	}
	// "tenth context middle" ends 10 documents.
	before, after := l.Contexts("context")
	if !slices.Contains(before, "tenth") || !slices.Contains(after, "middle") {
		t.Errorf("contexts of context = %q / %q, want tenth before and middle after", before, after)
	}
	// "seen" ends 4 documents: its count (4) is below θ, so no context.
	if b, a := l.Contexts("seen"); len(b)+len(a) != 0 {
		t.Errorf("contexts of seen = %q / %q, want none below θ", b, a)
	}
}

func TestLexiconDeterministicAndRoundTrip(t *testing.T) {
	p := DefaultLexiconParams()
	p.NidfMin, p.NidfMax, p.MinDF, p.DictMinDF, p.ContextMinCount = 0.2, 0.5, 2, 2, 3
	a, b := buildSmall(t, p), buildSmall(t, p)
	ab, _ := a.MarshalBinary()
	bb, _ := b.MarshalBinary()
	if !bytes.Equal(ab, bb) {
		t.Fatal("same corpus and parameters gave different bytes")
	}
	l, err := LoadLexicon(ab)
	if err != nil {
		t.Fatal(err)
	}
	if l.Hash() != a.Hash() || l.Stats() != a.Stats() || l.Params() != a.Params() {
		t.Fatalf("round trip changed the lexicon: %+v vs %+v", l.Stats(), a.Stats())
	}
	for _, kind := range []string{"primary", "secondary", "dictionary"} {
		if !slices.Equal(l.Terms(kind), a.Terms(kind)) {
			t.Errorf("%s terms differ after round trip", kind)
		}
	}
	// Re-encoding a loaded lexicon gives the same bytes.
	l.encode()
	if !bytes.Equal(l.raw, ab) {
		t.Fatal("re-encoding a loaded lexicon changed its bytes")
	}
	// Different parameters give a different hash.
	p.NidfMax = 0.6
	if buildSmall(t, p).Hash() == a.Hash() {
		t.Fatal("different parameters, same hash")
	}
}

func TestLexiconParamsValidate(t *testing.T) {
	if err := DefaultLexiconParams().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	p := LexiconParams{NidfMin: 0.5, NidfMax: 0.4, MinDF: 0, DictMinDF: 0, ContextMinCount: 0, ContextsPerTerm: -1, MaxSecondary: -1}
	err := p.Validate()
	for _, want := range []string{"nidf window", "min df", "dictionary min df", "context min count", "contexts per term", "max secondary"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
	if _, err := NewLexiconBuilder(BuilderOptions{}).Build(DefaultLexiconParams()); err == nil {
		t.Error("Build on an empty builder succeeded")
	}
}

// Every truncation and every single-byte corruption of a valid file is
// rejected with ErrCorruptLexicon (the checksum catches what the
// structure does not).
func TestLoadLexiconRejectsCorruption(t *testing.T) {
	p := DefaultLexiconParams()
	p.NidfMin, p.NidfMax, p.MinDF, p.DictMinDF, p.ContextMinCount = 0.2, 0.5, 2, 2, 3
	good, _ := buildSmall(t, p).MarshalBinary()
	for n := 0; n < len(good); n++ {
		if _, err := LoadLexicon(good[:n]); !errors.Is(err, ErrCorruptLexicon) {
			t.Fatalf("truncated to %d bytes: got %v, want ErrCorruptLexicon", n, err)
		}
	}
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x41
		if _, err := LoadLexicon(bad); !errors.Is(err, ErrCorruptLexicon) {
			t.Fatalf("byte %d flipped: got %v, want ErrCorruptLexicon", i, err)
		}
	}
	// With a valid checksum over corrupt content, the structural checks
	// must still reject it.
	cases := map[string]func([]byte) []byte{
		"version 2": func(b []byte) []byte { b[4] = 2; return b },
		"trailing": func(b []byte) []byte {
			return append(append(bytes.Clone(b[:len(b)-33]), 0), make([]byte, 33)...)
		},
		"bad class": func(b []byte) []byte {
			// The first term's class byte follows its df; find "BMLX" terms
			// by re-encoding with a class the format does not know.
			l, _ := LoadLexicon(b)
			l.class[0] = 7
			l.encode()
			return l.raw
		},
	}
	for name, mutate := range cases {
		bad := withChecksum(mutate(bytes.Clone(good)))
		_, err := LoadLexicon(bad)
		if !errors.Is(err, ErrCorruptLexicon) {
			t.Errorf("%s: got %v, want ErrCorruptLexicon", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}

// withChecksum replaces the trailing checksum of b with a valid one.
func withChecksum(b []byte) []byte {
	if len(b) < 33 {
		return b
	}
	body := b[:len(b)-33]
	sum := sha256.Sum256(body)
	out := append(bytes.Clone(body), 'H')
	return append(out, sum[:]...)
}

func FuzzLoadLexicon(f *testing.F) {
	p := DefaultLexiconParams()
	p.NidfMin, p.NidfMax, p.MinDF, p.DictMinDF, p.ContextMinCount = 0.2, 0.5, 2, 2, 3
	good, _ := buildSmall(f, p).MarshalBinary()
	f.Add(good)
	f.Add(good[:40])
	f.Add([]byte("BMLX\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, withChecksum(data)} {
			l, err := LoadLexicon(in)
			if err != nil {
				if !errors.Is(err, ErrCorruptLexicon) {
					t.Fatalf("error %v does not wrap ErrCorruptLexicon", err)
				}
				continue
			}
			// A lexicon that loads is usable and re-encodes to itself.
			_ = l.Stats()
			for _, term := range l.Terms("dictionary") {
				l.Lookup(term)
				l.Contexts(term)
			}
			l2 := *l
			l2.encode()
			if !bytes.Equal(l2.raw, in) {
				t.Fatalf("loaded lexicon re-encodes differently")
			}
			checkKeyedRecords(t, l)
			sec, err := NewSet(SetParams{Secret: testSecret(t), Lexicon: l, IMatch: DefaultIMatchParams(), Shingle: DefaultShingleParams()})
			if err != nil {
				t.Fatalf("valid lexicon rejected by NewSet: %v", err)
			}
			sec.Sign(textDoc("a few words of text for the fuzzed lexicon to sign over and over again"), nil, nil)
		}
	})
}

func TestLexiconFromNewsgroups(t *testing.T) {
	l := testLexicon(t)
	st := l.Stats()
	t.Logf("20NG train lexicon: %+v", st)
	if st.Primary < 100 || st.Secondary < 1000 || st.Contexts < 1000 {
		t.Errorf("lexicon too small for real English: %+v", st)
	}
	// Frequent function words are never lexicon terms; typical content
	// words of the window are.
	for _, w := range []string{"that", "have", "with"} {
		if info, ok := l.Lookup(w); !ok || info.Primary || info.Secondary {
			t.Errorf("%q: %+v %v, want dictionary-only", w, info, ok)
		}
	}
}
