package bundled

import (
	"testing"

	"github.com/bulkmilter/bulkmilter/signature"
)

func TestLexiconLoads(t *testing.T) {
	l, err := Lexicon()
	if err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	t.Logf("bundled lexicon: %+v hash %s", st, l.Hash())
	if st.Docs != 35391 {
		t.Errorf("built from %d documents, want 35,391", st.Docs)
	}
	if st.Primary < 500 || st.Secondary < 10000 || st.Terms < 50000 || st.Contexts < 10000 {
		t.Errorf("lexicon too small: %+v", st)
	}
	if l.Params() != signature.DefaultLexiconParams() {
		t.Errorf("built with %+v, want the defaults %+v", l.Params(), signature.DefaultLexiconParams())
	}
	// Common words are in the dictionary (in their canonical form, which
	// folds doubled letters and l/i), function words never in L.
	for _, w := range []string{"the", "message", "meeting"} {
		toks := signature.Canonicalize(signature.Source{Subject: w}).Tokens
		if len(toks) != 1 {
			t.Fatalf("Canonicalize(%q) = %q, want one token", w, toks)
		}
		if _, ok := l.Lookup(toks[0]); !ok {
			t.Errorf("%q (canonical %q) missing from the dictionary", w, toks[0])
		}
	}
	if info, _ := l.Lookup("the"); info.Primary || info.Secondary {
		t.Error(`"the" is an I-Match term`)
	}
	l2, _ := Lexicon()
	if l2 != l {
		t.Error("Lexicon decoded twice")
	}
}

func BenchmarkLoadBundled(b *testing.B) {
	raw := LexiconBytes()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := signature.LoadLexicon(raw); err != nil {
			b.Fatal(err)
		}
	}
}
