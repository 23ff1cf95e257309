package signature

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func testIMatch(t testing.TB, lex *Lexicon, mod func(*IMatchParams)) *IMatch {
	t.Helper()
	p := DefaultIMatchParams()
	if mod != nil {
		mod(&p)
	}
	m, err := NewIMatch(testSecret(t), lex, p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func keysOf(s Signer, d *Doc) []Key {
	ks, _ := s.Sign(d, nil)
	return ks
}

// plainKeys keeps the plain (not hardened) I-Match coordinates.
func plainKeys(ks []Key) []Key {
	var out []Key
	for _, k := range ks {
		if k.Index < HardenedIndex {
			out = append(out, k)
		}
	}
	return out
}

// heldOutDocs returns 20NG test posts of 40–600 tokens.
func heldOutDocs(t testing.TB, n int) []*Doc {
	var out []*Doc
	msgs := newsgroups(t, "test")
	for i := 0; i < len(msgs) && len(out) < n; i += 7 {
		d := textDoc(msgs[i].Text)
		if len(d.Tokens) >= 40 && len(d.Tokens) <= 600 {
			out = append(out, d)
		}
	}
	return out
}

func TestIMatchOrderInvariant(t *testing.T) {
	lex := testLexicon(t)
	m := testIMatch(t, lex, nil)
	rng := rand.New(rand.NewPCG(1, 1))
	signed := 0
	for _, d := range heldOutDocs(t, 200) {
		want := plainKeys(keysOf(m, d))
		if len(want) == 0 {
			continue
		}
		signed++
		shuffled := slices.Clone(d.Tokens)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := plainKeys(keysOf(m, docOf(shuffled))); !slices.Equal(got, want) {
			t.Fatalf("shuffling the words changed the plain keys:\n got %v\nwant %v", got, want)
		}
	}
	if signed < 150 {
		t.Fatalf("only %d of 200 documents signed", signed)
	}
}

// Edits that involve no lexicon term (L or B) leave every plain key
// unchanged: dictionary-only words, short words, numbers and random
// strings inserted, deleted or substituted.
func TestIMatchEditsOutsideLexicon(t *testing.T) {
	lex := testLexicon(t)
	m := testIMatch(t, lex, func(p *IMatchParams) { p.MinRatio = 0 })
	var outside []string // dictionary words that are not lexicon terms
	for _, w := range lex.Terms("dictionary") {
		if info, _ := lex.Lookup(w); !info.Primary && !info.Secondary {
			outside = append(outside, w)
		}
	}
	rng := rand.New(rand.NewPCG(2, 2))
	isLex := func(w string) bool {
		info, ok := lex.Lookup(w)
		return ok && (info.Primary || info.Secondary)
	}
	checked := 0
	for _, d := range heldOutDocs(t, 150) {
		want := plainKeys(keysOf(m, d))
		if len(want) == 0 {
			continue
		}
		toks := slices.Clone(d.Tokens)
		for range 30 {
			switch rng.IntN(4) {
			case 0:
				toks = slices.Insert(toks, rng.IntN(len(toks)+1), outside[rng.IntN(len(outside))])
			case 1:
				toks = slices.Insert(toks, rng.IntN(len(toks)+1), randomString(rng, 5+rng.IntN(10)))
			case 2: // delete a non-lexicon token
				i := rng.IntN(len(toks))
				if !isLex(toks[i]) {
					toks = slices.Delete(toks, i, i+1)
				}
			case 3: // substitute a non-lexicon token by a short word or number
				i := rng.IntN(len(toks))
				if !isLex(toks[i]) {
					toks[i] = []string{"the", "a", "of", "2024", "x1y2"}[rng.IntN(5)]
				}
			}
		}
		// Deleting every copy of a lexicon term would be a lexicon edit:
		// the loop above never deletes lexicon tokens.
		if got := plainKeys(keysOf(m, docOf(toks))); !slices.Equal(got, want) {
			t.Fatalf("edits outside the lexicon changed the keys:\n got %v\nwant %v", got, want)
		}
		checked++
	}
	if checked < 100 {
		t.Fatalf("only %d documents checked", checked)
	}
}

// The measured probability that at least one of K randomized signatures
// survives n random lexicon-term edits matches Kolcz's 1 − (1 − pⁿ)ᴷ.
// Membership of a term in randomized lexicon i is a keyed hash: over many
// documents and several secrets the removals are independent Bernoulli(p).
func TestIMatchRandomizationSurvival(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	lex := testLexicon(t)
	primary := lex.Terms("primary")
	const (
		secrets   = 20
		perSecret = 250
		tolerance = 0.03
	)
	for _, k := range []int{5, 10} {
		for _, n := range []int{1, 2, 3, 5} {
			p := 0.33
			predicted := 1 - math.Pow(1-math.Pow(p, float64(n)), float64(k))
			survived, trials := 0, 0
			rng := rand.New(rand.NewPCG(uint64(k), uint64(n)))
			for s := range secrets {
				m, err := NewIMatch(secretN(t, 1000*k+100*n+s), lex, IMatchParams{
					Enabled: true, MinTerms: 5, MinRatio: 0, Randomized: k, RemoveFraction: p, Hardening: HardeningOff,
				})
				if err != nil {
					t.Fatal(err)
				}
				for range perSecret {
					perm := rng.Perm(len(primary))
					doc := make([]string, 0, 60)
					for _, i := range perm[:60] {
						doc = append(doc, primary[i])
					}
					edited := slices.Clone(doc)
					absent := perm[60:]
					for e := range n {
						if rng.IntN(2) == 0 { // add a lexicon term the document lacks
							edited = append(edited, primary[absent[e]])
						} else { // remove one it has
							edited = slices.Delete(edited, 0, 1)
						}
					}
					a, b := keysOf(m, docOf(doc)), keysOf(m, docOf(edited))
					if len(a) != k+1 || len(b) != k+1 {
						t.Fatalf("got %d and %d keys, want %d", len(a), len(b), k+1)
					}
					if a[0] == b[0] {
						t.Fatal("a lexicon edit left the primary signature unchanged")
					}
					for i := 1; i <= k; i++ {
						if a[i] == b[i] {
							survived++
							break
						}
					}
					trials++
				}
			}
			measured := float64(survived) / float64(trials)
			t.Logf("K=%2d n=%d: measured %.3f, predicted 1-(1-p^n)^K = %.3f (%d trials)", k, n, measured, predicted, trials)
			if math.Abs(measured-predicted) > tolerance {
				t.Errorf("K=%d n=%d: measured %.3f, predicted %.3f, beyond ±%.2f", k, n, measured, predicted, tolerance)
			}
		}
	}
}

// handLexicon is a lexicon whose primary terms, secondary ranking and
// contexts are known exactly.
func handLexicon(t testing.TB) *Lexicon {
	t.Helper()
	b := NewLexiconBuilder(BuilderOptions{})
	// 200 documents. "alpha".."hotel" appear in 20 each (primary with the
	// window below); "valid context" pairs appear 20 times.
	filler := []string{"the", "and", "common", "everyday", "words"}
	for i := range 200 {
		toks := slices.Clone(filler)
		if i < 20 {
			toks = append(toks, "green", "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india")
		}
		if i >= 20 && i < 26 {
			toks = append(toks, "rarer", "rarest")
		}
		if i >= 20 && i < 25 {
			toks = append(toks, "rarer", "seldom")
		}
		b.Add(docOf(toks))
	}
	p := DefaultLexiconParams()
	// N = 200: nidf ∈ [0.2, 0.5] ⟺ df ∈ [14.1, 69.3].
	p.NidfMin, p.NidfMax = 0.2, 0.5
	p.MinDF, p.DictMinDF, p.ContextMinCount = 3, 1, 15
	lex, err := b.Build(p)
	if err != nil {
		t.Fatal(err)
	}
	return lex
}

func TestIMatchHandLexicon(t *testing.T) {
	lex := handLexicon(t)
	if got, want := lex.Terms("primary"), []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "green", "hotel", "india"}; !slices.Equal(got, want) {
		t.Fatalf("primary = %q, want %q", got, want)
	}
	if got, want := lex.Terms("secondary"), []string{"rarer", "rarest", "seldom"}; !slices.Equal(got, want) {
		t.Fatalf("secondary = %q, want %q", got, want)
	}
	m := testIMatch(t, lex, func(p *IMatchParams) { p.Randomized = 0; p.MinRatio = 0.5; p.Hardening = HardeningAlso })

	tests := []struct {
		name          string
		doc           string
		wantKeys      int
		wantDeclined  string
		wantSecondary []string
		wantOut       []string
	}{
		{name: "too few terms", doc: "alpha bravo charlie delta", wantDeclined: "too few lexicon terms: 4 < 5"},
		{name: "in context", doc: "green alpha bravo charlie delta echo", wantKeys: 2},
		{
			// U = 6 primary + tres, cuatro, cinco: 6/9 ≥ 0.5 holds. The
			// scrambled order puts every primary word out of context.
			name: "out of context", doc: "alpha charlie echo golf india bravo uno dos tres cuatro cinco",
			wantKeys: 1, wantOut: []string{"alpha", "bravo", "charlie", "echo", "golf", "india"},
		},
		{
			// U = 5 primary + 6 unknown: 5/11 < 0.5; the secondary
			// lexicon adds its highest-ranked present term.
			name: "secondary expansion", doc: "golf hotel india green alpha seldom rarest rarer quatro cinco seis",
			wantKeys: 2, wantSecondary: []string{"rarer"}, wantOut: []string{"rarer", "rarest", "seldom"},
		},
		{
			// Fig. 1 of Kolcz 2008: a shared banner over unrelated foreign
			// text. 5 of 12 terms: under the ratio, nothing in B to add.
			name: "banner over foreign text", doc: "alpha bravo charlie delta echo zwölf dreizehn vierzehn fünfzehn sechzehn siebzehn achtzehn",
			wantDeclined: "lexicon terms cover 5 of 12 terms, under the minimum ratio",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := m.Report(textDoc(tt.doc))
			t.Logf("%s: %+v", tt.doc, r.Explain)
			if tt.wantDeclined != "" {
				if r.Explain.Declined != tt.wantDeclined || len(r.Keys) != 0 {
					t.Fatalf("got declined %q with %d keys, want %q", r.Explain.Declined, len(r.Keys), tt.wantDeclined)
				}
				return
			}
			if len(r.Keys) != tt.wantKeys {
				t.Errorf("got %d keys %v, want %d", len(r.Keys), r.Keys, tt.wantKeys)
			}
			if !slices.Equal(r.Secondary, tt.wantSecondary) {
				t.Errorf("secondary = %q, want %q", r.Secondary, tt.wantSecondary)
			}
			if tt.wantOut != nil && !slices.Equal(r.OutOfContext, tt.wantOut) {
				t.Errorf("out of context = %q, want %q", r.OutOfContext, tt.wantOut)
			}
		})
	}
}

// Context hardening on real English: lexicon words inserted where they
// were never seen in training drop out of the hardened signatures, while
// the same words inserted with one of their training contexts count.
func TestContextHardening(t *testing.T) {
	lex := testLexicon(t)
	m := testIMatch(t, lex, func(p *IMatchParams) { p.Hardening = HardeningAlso })
	rng := rand.New(rand.NewPCG(3, 3))
	// Primary terms with at least one preceding context that is itself an
	// I-Match term (so that inserting "context term" places it in
	// context).
	type ctxTerm struct{ term, before string }
	var withCtx []ctxTerm
	var primary []string
	for _, w := range lex.Terms("primary") {
		primary = append(primary, w)
		before, _ := lex.Contexts(w)
		for _, c := range before {
			if c != "" && IMatchTerm(c) {
				withCtx = append(withCtx, ctxTerm{w, c})
				break
			}
		}
	}
	if len(withCtx) < 100 {
		t.Fatalf("only %d primary terms have a stored context", len(withCtx))
	}
	validPair := func(a, b string) bool {
		_, after := lex.Contexts(a)
		before, _ := lex.Contexts(b)
		return slices.Contains(after, b) || slices.Contains(before, a)
	}
	dropped, kept, docs := 0, 0, 0
	for _, d := range heldOutDocs(t, 300) {
		base := m.Report(d)
		hardened := func(ks []Key) []Key {
			var out []Key
			for _, k := range ks {
				if k.Index >= HardenedIndex {
					out = append(out, k)
				}
			}
			return out
		}
		if len(hardened(base.Keys)) == 0 {
			continue
		}
		docs++
		// Out of context: insert 5 absent primary words one by one where
		// neither neighbouring I-Match term forms a trained bigram with it.
		toks := slices.Clone(d.Tokens)
		var inserted []string
		for tries := 0; len(inserted) < 5 && tries < 200; tries++ {
			w := primary[rng.IntN(len(primary))]
			if slices.Contains(toks, w) {
				continue
			}
			pos := rng.IntN(len(toks) + 1)
			prev, next := "", ""
			for i := pos - 1; i >= 0; i-- {
				if IMatchTerm(toks[i]) {
					prev = toks[i]
					break
				}
			}
			for i := pos; i < len(toks); i++ {
				if IMatchTerm(toks[i]) {
					next = toks[i]
					break
				}
			}
			if validPair(prev, w) || validPair(w, next) {
				continue
			}
			cand := slices.Insert(slices.Clone(toks), pos, w)
			// Keep only insertions that do not break a neighbour's own
			// context (that would be a change to the neighbour, not to w).
			r := m.Report(docOf(cand))
			others := slices.DeleteFunc(slices.Clone(r.OutOfContext), func(s string) bool { return slices.Contains(inserted, s) || s == w })
			if !slices.Equal(others, base.OutOfContext) {
				continue
			}
			if !slices.Contains(r.OutOfContext, w) {
				t.Fatalf("%q inserted between %q and %q is not out of context", w, prev, next)
			}
			toks = cand
			inserted = append(inserted, w)
		}
		if len(inserted) < 5 {
			continue
		}
		after := m.Report(docOf(toks))
		if !slices.Equal(hardened(after.Keys), hardened(base.Keys)) {
			t.Fatalf("out-of-context insertions %q changed the hardened keys", inserted)
		}
		if plainKeys(after.Keys)[0] == plainKeys(base.Keys)[0] {
			t.Fatalf("inserting lexicon words %q left the plain primary key unchanged", inserted)
		}
		dropped++

		// In context: insert a word preceded by a trained context word.
		for tries := 0; tries < 50; tries++ {
			c := withCtx[rng.IntN(len(withCtx))]
			if slices.Contains(d.Tokens, c.term) {
				continue
			}
			cand := append(slices.Clone(d.Tokens), c.before, c.term)
			r := m.Report(docOf(cand))
			if slices.Contains(r.OutOfContext, c.term) || !slices.Contains(r.Primary, c.term) {
				t.Fatalf("%q after its context %q is not counted in context", c.term, c.before)
			}
			h := hardened(r.Keys)
			if len(h) == 0 || h[0] == hardened(base.Keys)[0] {
				t.Fatalf("%q inserted in context did not change the hardened primary key", c.term)
			}
			kept++
			break
		}
	}
	t.Logf("documents: %d; out-of-context insertions ignored: %d; in-context insertions counted: %d", docs, dropped, kept)
	if dropped < 50 || kept < 50 {
		t.Fatalf("too few cases exercised: dropped=%d kept=%d", dropped, kept)
	}
}

func TestIMatchParamsValidate(t *testing.T) {
	if err := DefaultIMatchParams().Validate(); err != nil {
		t.Fatal(err)
	}
	p := IMatchParams{MinTerms: 0, MinRatio: 2, Randomized: 16, RemoveFraction: 1, Hardening: "sometimes"}
	err := p.Validate()
	for _, want := range []string{"min terms", "min ratio", "randomized", "remove fraction", "hardening"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
	if _, err := NewIMatch(Secret{}, handLexicon(t), DefaultIMatchParams()); err == nil {
		t.Error("NewIMatch accepted a zero secret")
	}
}

// TestIMatchContextAgainstLexicon: the terms I-Match finds out of context
// are those the lexicon's stored contexts say, read by string: an
// occurrence of a term is in context when the I-Match term before it is one
// of its stored preceding contexts (the boundary at the start), or the one
// after it one of its following contexts, or the term is stored as a
// following context of the one before or a preceding context of the one
// after (a pair is valid for both its terms). Documents are drawn from the
// bundled lexicon's terms with contexts, their contexts and other words,
// so that both answers occur often. A filter with a false negative, or a
// pair read for one of its terms only, fails it.
func TestIMatchContextAgainstLexicon(t *testing.T) {
	lex := bundledLexicon(t)
	m := testIMatch(t, lex, nil)
	var withCtx []string
	for _, e := range lex.ctx {
		withCtx = append(withCtx, lex.terms[e.term])
	}
	others := lex.Terms("secondary")[:2000]
	r := rand.New(rand.NewPCG(7, 19))
	pick := func(s []string) string {
		if len(s) == 0 {
			return ""
		}
		return s[r.IntN(len(s))]
	}
	inPairs, outPairs := 0, 0
	for range 3000 {
		var toks []string
		for range 5 + r.IntN(40) {
			term := pick(withCtx)
			before, after := lex.Contexts(term)
			switch r.IntN(6) {
			case 0:
				if b := pick(before); b != "" {
					toks = append(toks, b)
				}
			case 1:
				toks = append(toks, pick(others))
			case 2:
				toks = append(toks, "zzqx"+strconv.Itoa(r.IntN(50))) // not a term
			}
			toks = append(toks, term)
			if r.IntN(3) == 0 {
				if a := pick(after); a != "" {
					toks = append(toks, a)
				}
			}
		}
		var seq []string
		for _, tok := range toks {
			if IMatchTerm(tok) {
				seq = append(seq, tok)
			}
		}
		inCtx := map[string]bool{}
		lexTerm := map[string]bool{}
		for k, term := range seq {
			if info, ok := lex.Lookup(term); !ok || !(info.Primary || info.Secondary) {
				continue
			}
			lexTerm[term] = true
			prev, next := "", ""
			if k > 0 {
				prev = seq[k-1]
			}
			if k+1 < len(seq) {
				next = seq[k+1]
			}
			before, after := lex.Contexts(term)
			_, prevAfter := lex.Contexts(prev)
			nextBefore, _ := lex.Contexts(next)
			ok := slices.Contains(before, prev) || slices.Contains(after, next) ||
				prev != "" && slices.Contains(prevAfter, term) || next != "" && slices.Contains(nextBefore, term)
			inCtx[term] = inCtx[term] || ok
		}
		var want []string
		for term := range lexTerm {
			if inCtx[term] {
				inPairs++
			} else {
				want = append(want, term)
				outPairs++
			}
		}
		slices.Sort(want)
		if got := m.Report(docOf(toks)).OutOfContext; !slices.Equal(got, want) {
			t.Fatalf("%q: out of context %q, want %q", toks, got, want)
		}
	}
	t.Logf("%d terms in context, %d out of context", inPairs, outPairs)
}
