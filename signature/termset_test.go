package signature

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func testTermSet(t testing.TB, lex *Lexicon) *TermSet {
	s, err := NewTermSet(testSecret(t), lex, DefaultTermSetParams())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTermSetIgnoresOrderAndNonTerms: shuffling the words and inserting
// strings outside the lexicons (hash-busters, common dictionary words,
// short words) leave the keys as they were; inserting as many lexicon
// terms changes them, so the test is not vacuous.
func TestTermSetIgnoresOrderAndNonTerms(t *testing.T) {
	lex := testLexicon(t)
	s := testTermSet(t, lex)
	var dictOnly, terms []string
	for _, w := range lex.Terms("dictionary") {
		switch e, _ := lex.Lookup(w); {
		case !e.Primary && !e.Secondary:
			dictOnly = append(dictOnly, w)
		case IMatchTerm(w):
			terms = append(terms, w)
		}
	}
	rng := rand.New(rand.NewPCG(7, 7))
	checked, changed := 0, 0
	for _, d := range heldOutDocs(t, 200) {
		want := keysOf(s, d)
		if len(want) == 0 {
			continue
		}
		edited := slices.Clone(d.Tokens)
		rng.Shuffle(len(edited), func(i, j int) { edited[i], edited[j] = edited[j], edited[i] })
		for range 25 {
			w := randomString(rng, 5+rng.IntN(12))
			if rng.IntN(2) == 0 {
				w = dictOnly[rng.IntN(len(dictOnly))]
			}
			if e, ok := lex.Lookup(w); ok && (e.Primary || e.Secondary) {
				continue
			}
			edited = slices.Insert(edited, rng.IntN(len(edited)+1), w)
		}
		if got := keysOf(s, docOf(edited)); !slices.Equal(got, want) {
			t.Fatalf("order and words outside the lexicons changed the keys:\n got %v\nwant %v", got, want)
		}
		more := slices.Clone(d.Tokens)
		for range 25 {
			more = slices.Insert(more, rng.IntN(len(more)+1), terms[rng.IntN(len(terms))])
		}
		if !slices.Equal(keysOf(s, docOf(more)), want) {
			changed++
		}
		checked++
	}
	if checked < 150 || changed < checked/2 {
		t.Fatalf("checked %d documents, lexicon terms changed %d", checked, changed)
	}
}

// TestTermSetSurvivesWordChanges: the edit the family is for. With one
// word in ten replaced by another dictionary word (Malkin's intelligent
// change), two copies of a post share a term-set key far more often than
// a word-shingle key.
func TestTermSetSurvivesWordChanges(t *testing.T) {
	lex := testLexicon(t)
	ts, sh := testTermSet(t, lex), testShingle(t, lex)
	dict := lex.Terms("dictionary")
	rng := rand.New(rand.NewPCG(11, 11))
	copyOf := func(d *Doc) *Doc {
		out := slices.Clone(d.Tokens)
		for i := rng.IntN(10); i < len(out); i += 10 {
			out[i] = dict[rng.IntN(len(dict))]
		}
		return docOf(out)
	}
	shares := func(a, b []Key) bool {
		for _, k := range a {
			if slices.Contains(b, k) {
				return true
			}
		}
		return false
	}
	n, termsShared, shinglesShared := 0, 0, 0
	for _, d := range heldOutDocs(t, 200) {
		if len(keysOf(ts, d)) == 0 || len(keysOf(sh, d)) == 0 {
			continue
		}
		a, b := copyOf(d), copyOf(d)
		n++
		if shares(keysOf(ts, a), keysOf(ts, b)) {
			termsShared++
		}
		if shares(keysOf(sh, a), keysOf(sh, b)) {
			shinglesShared++
		}
	}
	t.Logf("%d posts, two copies with every 10th word changed share a key: terms %d, word shingles %d", n, termsShared, shinglesShared)
	if n < 120 || termsShared < n*3/4 || termsShared <= shinglesShared {
		t.Fatalf("%d posts: terms shared %d, word shingles %d", n, termsShared, shinglesShared)
	}
}
