package signature

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestContainSurvivesPadding: two copies of a post, each padded with half
// its length of another post's text (before it in one, after it in the
// other), keep enough containment keys in common for the store to join
// them on those alone (store.ContainAlone, 6 of 16), where the word
// supershingles of the same copies rarely share a key.
func TestContainSurvivesPadding(t *testing.T) {
	lex := testLexicon(t)
	ct, err := NewContain(testSecret(t), lex, DefaultContainParams())
	if err != nil {
		t.Fatal(err)
	}
	sh := testShingle(t, lex)
	docs := heldOutDocs(t, 300)
	common := func(a, b []Key) int {
		n := 0
		for _, k := range a {
			if slices.Contains(b, k) {
				n++
			}
		}
		return n
	}
	const alone = 6 // store.ContainAlone; the store may not be imported here
	n, containJoin, shingleShared := 0, 0, 0
	for i := 0; i+2 < len(docs); i += 3 {
		d, p1, p2 := docs[i].Tokens, docs[i+1].Tokens, docs[i+2].Tokens
		half := len(d) / 2
		if len(keysOf(ct, docs[i])) == 0 || len(p1) < half || len(p2) < half {
			continue
		}
		a := docOf(append(slices.Clone(p1[:half]), d...))
		b := docOf(append(slices.Clone(d), p2[:half]...))
		n++
		if common(keysOf(ct, a), keysOf(ct, b)) >= alone {
			containJoin++
		}
		if common(keysOf(sh, a), keysOf(sh, b)) > 0 {
			shingleShared++
		}
	}
	t.Logf("%d posts, two copies padded with half their length of other text: %d share %d+ containment keys, %d share a word supershingle", n, containJoin, alone, shingleShared)
	if n < 50 || containJoin < n*3/4 || containJoin <= shingleShared {
		t.Fatalf("%d posts: containment joins %d, word supershingles shared %d", n, containJoin, shingleShared)
	}
}

// TestContainSurvivesSalad: two copies of a post, each salted with words
// drawn at random from the dictionary (one after a tenth of its words, and a
// block of half its length, before it in one copy and after it in the
// other), keep enough containment keys in common to join on those alone.
// Reading every dictionary word, 12 of 200 posts did (the words'
// shingles take the bins); reading common words only, all 179 that sign.
func TestContainSurvivesSalad(t *testing.T) {
	lex := testLexicon(t)
	// The word-salad setting (docs/evaluation.md, "Word salad"); the
	// default reads every word.
	p := DefaultContainParams()
	p.MinShingles, p.MinDF = 50, 100
	ct, err := NewContain(testSecret(t), lex, p)
	if err != nil {
		t.Fatal(err)
	}
	vocab := lex.Terms("dictionary")
	rng := rand.New(rand.NewPCG(1, 2))
	salt := func(d []string, before bool) *Doc {
		block := make([]string, len(d)/2)
		for i := range block {
			block[i] = vocab[rng.IntN(len(vocab))]
		}
		var out []string
		if before {
			out = append(out, block...)
		}
		for _, w := range d {
			out = append(out, w)
			if rng.IntN(10) == 0 {
				out = append(out, vocab[rng.IntN(len(vocab))])
			}
		}
		if !before {
			out = append(out, block...)
		}
		return docOf(out)
	}
	const alone = 6 // store.ContainAlone
	n, joined := 0, 0
	for _, d := range heldOutDocs(t, 200) {
		if len(keysOf(ct, d)) == 0 {
			continue
		}
		n++
		a, b := keysOf(ct, salt(d.Tokens, true)), keysOf(ct, salt(d.Tokens, false))
		shared := 0
		for _, k := range a {
			if slices.Contains(b, k) {
				shared++
			}
		}
		if shared >= alone {
			joined++
		}
	}
	t.Logf("%d posts, two copies salted with random dictionary words: %d share %d+ containment keys", n, joined, alone)
	if n < 100 || joined < n*9/10 {
		t.Fatalf("%d posts: containment joins %d", n, joined)
	}
}

// Unrelated posts rarely share the containment keys that would join them.
func TestContainUnrelatedApart(t *testing.T) {
	lex := testLexicon(t)
	ct, err := NewContain(testSecret(t), lex, DefaultContainParams())
	if err != nil {
		t.Fatal(err)
	}
	var keys [][]Key
	for _, d := range heldOutDocs(t, 150) {
		if k := keysOf(ct, d); len(k) > 0 {
			keys = append(keys, k)
		}
	}
	pairs, joined := 0, 0
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			pairs++
			n := 0
			for _, k := range keys[i] {
				if slices.Contains(keys[j], k) {
					n++
				}
			}
			if n >= 6 {
				joined++
			}
		}
	}
	t.Logf("%d pairs of unrelated posts, %d share 6+ containment keys", pairs, joined)
	if pairs < 3000 || joined > pairs/1000 {
		t.Fatalf("%d of %d unrelated pairs would join", joined, pairs)
	}
}
