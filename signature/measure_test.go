package signature

// Measurements behind the defaults (docs/signatures.md). They take minutes
// and print tables rather than assert, so they run only with -measure:
//
//	go test ./signature -run Measure -measure -v -timeout 1h

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

var measure = flag.Bool("measure", false, "run the parameter measurements (slow)")

func needMeasure(t *testing.T) {
	t.Helper()
	if !*measure {
		t.Skip("measurement; run with -measure")
	}
}

var (
	heldOnce sync.Once
	heldHam  []*Doc
	heldSpam []*Doc
	trainB   *LexiconBuilder
)

// measureData returns a builder trained on 20NG train + Enron ham (the
// bundled lexicon's corpora, minus the 20NG test split), and held-out ham
// (20NG test, SpamAssassin easy ham) and spam (SpamAssassin spam).
func measureData(t *testing.T) (*LexiconBuilder, []*Doc, []*Doc) {
	t.Helper()
	heldOnce.Do(func() {
		trainB = NewLexiconBuilder(BuilderOptions{})
		for _, m := range newsgroups(t, "train") {
			trainB.Add(textDoc(m.Text))
		}
		for _, m := range enronHam(t, 1<<30) {
			trainB.Add(textDoc(m.Text))
		}
		for _, m := range newsgroups(t, "test") {
			heldHam = append(heldHam, textDoc(m.Text))
		}
		for _, m := range spamAssassin(t, "spamassassin_easy_ham.tar.bz2", 1<<30) {
			heldHam = append(heldHam, textDoc(m.Text))
		}
		for _, a := range []string{"spamassassin_spam.tar.bz2", "spamassassin_spam_2.tar.bz2"} {
			for _, m := range spamAssassin(t, a, 1<<30) {
				heldSpam = append(heldSpam, textDoc(m.Text))
			}
		}
	})
	return trainB, heldHam, heldSpam
}

// uniqueTerms returns the sorted distinct I-Match terms of a document.
func uniqueTerms(d *Doc) []string {
	var out []string
	for _, t := range d.Tokens {
		if IMatchTerm(t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// cosine is Kolcz's near-duplicate measure over unique terms.
func cosine(a, b []string) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	return float64(intersect(a, b)) / sqrt(float64(len(a))*float64(len(b)))
}

func sqrt(x float64) float64 {
	z := x / 2
	if x == 0 {
		return 0
	}
	for range 40 {
		z = (z + x/z) / 2
	}
	return z
}

// keyGroups groups documents by key and returns, per family, the number of
// documents that share a key with a document they are not a near
// duplicate of (cosine < 0.9), and the largest such group.
type groupStats struct {
	signed   int // documents with at least one key of the family
	spurious int // documents sharing a key with a non-duplicate
	maxGroup int // most documents on one key
	bigKeys  int // keys shared by at least 5 documents
}

func keyGroupStats(docs []*Doc, keys [][]Key, fam Family) groupStats {
	var st groupStats
	byKey := map[Key][]int{}
	for i, ks := range keys {
		has := false
		for _, k := range ks {
			if k.Family == fam {
				byKey[k] = append(byKey[k], i)
				has = true
			}
		}
		if has {
			st.signed++
		}
	}
	terms := make([][]string, len(docs))
	spurious := map[int]bool{}
	for _, ids := range byKey {
		ids = slices.Compact(ids)
		st.maxGroup = max(st.maxGroup, len(ids))
		if len(ids) >= 5 {
			st.bigKeys++
		}
		if len(ids) < 2 || len(ids) > 200 {
			for _, i := range ids[1:] {
				if len(ids) > 200 {
					spurious[i] = true
				}
			}
			continue
		}
		for a := range ids {
			for b := a + 1; b < len(ids); b++ {
				i, j := ids[a], ids[b]
				if terms[i] == nil {
					terms[i] = uniqueTerms(docs[i])
				}
				if terms[j] == nil {
					terms[j] = uniqueTerms(docs[j])
				}
				if cosine(terms[i], terms[j]) < 0.9 {
					spurious[i], spurious[j] = true, true
				}
			}
		}
	}
	st.spurious = len(spurious)
	return st
}

func TestMeasureLexiconWindow(t *testing.T) {
	needMeasure(t)
	b, ham, spam := measureData(t)
	t.Logf("training docs=%d held-out ham=%d spam=%d", b.Stats().Docs, len(ham), len(spam))
	sec := testSecret(t)
	windows := [][2]float64{{0.2, 0.3}, {0.26, 0.39}, {0.2, 0.4}, {0.25, 0.45}, {0.2, 0.45}, {0.15, 0.45}, {0.2, 0.6}}
	t.Logf("%-12s %6s %6s | %-28s | %-28s", "window", "|L|", "|B|", "ham signed / spurious / max", "spam signed")
	for _, w := range windows {
		p := DefaultLexiconParams()
		p.NidfMin, p.NidfMax = w[0], w[1]
		lex, err := b.Build(p)
		if err != nil {
			t.Fatal(err)
		}
		ip := DefaultIMatchParams()
		ip.Randomized, ip.Hardening = 0, HardeningOff
		for _, ratio := range []float64{0.1} {
			ip.MinRatio = ratio
			m, err := NewIMatch(sec, lex, ip)
			if err != nil {
				t.Fatal(err)
			}
			hk := make([][]Key, len(ham))
			for i, d := range ham {
				hk[i], _ = m.Sign(d, nil)
			}
			gs := keyGroupStats(ham, hk, FamilyIMatch)
			spamSigned := 0
			for _, d := range spam {
				if ks, _ := m.Sign(d, nil); len(ks) > 0 {
					spamSigned++
				}
			}
			st := lex.Stats()
			t.Logf("[%.2f,%.2f] r=%.2f %6d %6d | %5.1f%% / %5.2f%% / %3d big=%d | %5.1f%%",
				w[0], w[1], ratio, st.Primary, st.Secondary,
				100*float64(gs.signed)/float64(len(ham)), 100*float64(gs.spurious)/float64(len(ham)), gs.maxGroup, gs.bigKeys,
				100*float64(spamSigned)/float64(len(spam)))
		}
	}
}

// ratios prints the distribution of |L ∩ U| / |U| on held-out ham.
func TestMeasureIMatchRatio(t *testing.T) {
	needMeasure(t)
	_, ham, _ := measureData(t)
	lex := defaultLexicon(t)
	m, err := NewIMatch(testSecret(t), lex, IMatchParams{Enabled: true, MinTerms: 1, Hardening: HardeningOff})
	if err != nil {
		t.Fatal(err)
	}
	var rs []float64
	for _, d := range ham {
		r := m.Report(d)
		if r.Unique > 0 {
			rs = append(rs, float64(len(r.Primary))/float64(r.Unique))
		}
	}
	sort.Float64s(rs)
	var q []string
	for _, p := range []float64{0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9} {
		q = append(q, fmt.Sprintf("p%g=%.3f", p*100, rs[int(p*float64(len(rs)-1))]))
	}
	t.Logf("|S|/|U| on held-out ham: %s", strings.Join(q, " "))
}

// mutation kinds for generated campaigns.
type mutation func(toks []string, rng *rand.Rand, vocab []string) []string

func insertWords(rate float64) mutation {
	return func(toks []string, rng *rand.Rand, vocab []string) []string {
		out := slices.Clone(toks)
		for range int(rate*float64(len(toks)) + 0.5) {
			i := rng.IntN(len(out) + 1)
			out = slices.Insert(out, i, vocab[rng.IntN(len(vocab))])
		}
		return out
	}
}

func deleteWords(rate float64) mutation {
	return func(toks []string, rng *rand.Rand, _ []string) []string {
		out := slices.Clone(toks)
		for range int(rate*float64(len(toks)) + 0.5) {
			if len(out) == 0 {
				break
			}
			i := rng.IntN(len(out))
			out = slices.Delete(out, i, i+1)
		}
		return out
	}
}

func substituteWords(rate float64) mutation {
	return func(toks []string, rng *rand.Rand, vocab []string) []string {
		out := slices.Clone(toks)
		for range int(rate*float64(len(toks)) + 0.5) {
			out[rng.IntN(len(out))] = vocab[rng.IntN(len(vocab))]
		}
		return out
	}
}

func hashBusters(n int) mutation {
	return func(toks []string, rng *rand.Rand, _ []string) []string {
		out := slices.Clone(toks)
		for range n {
			i := rng.IntN(len(out) + 1)
			out = slices.Insert(out, i, randomString(rng, 6+rng.IntN(8)))
		}
		return out
	}
}

// noiseBlock adds a block of real text (another document's words) of the
// given share of the payload's length: the "good word" passage attack.
func noiseBlock(share float64, pool [][]string) mutation {
	return func(toks []string, rng *rand.Rand, _ []string) []string {
		src := pool[rng.IntN(len(pool))]
		n := min(len(src), int(share*float64(len(toks))+1))
		start := rng.IntN(len(src) - n + 1)
		block := src[start : start+n]
		if rng.IntN(2) == 0 {
			return append(slices.Clone(block), toks...)
		}
		return append(slices.Clone(toks), block...)
	}
}

// lexiconSalad inserts n random primary-lexicon words at random places:
// the attack on I-Match that context hardening answers.
func lexiconSalad(n int, lex *Lexicon) mutation {
	terms := lex.Terms("primary")
	return func(toks []string, rng *rand.Rand, _ []string) []string {
		out := slices.Clone(toks)
		for range n {
			i := rng.IntN(len(out) + 1)
			out = slices.Insert(out, i, terms[rng.IntN(len(terms))])
		}
		return out
	}
}

func combine(ms ...mutation) mutation {
	return func(toks []string, rng *rand.Rand, vocab []string) []string {
		for _, m := range ms {
			toks = m(toks, rng, vocab)
		}
		return toks
	}
}

func randomString(rng *rand.Rand, n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[rng.IntN(len(letters))]
	}
	return string(b)
}

type campaignResult struct {
	pairRecall    float64 // copies sharing a key with the original
	concentration float64 // copies on the family's most common key
}

// runCampaigns makes `copies` mutated copies of each payload and measures,
// per family, how many copies share a key with the original and how many
// land on the campaign's most common key.
func runCampaigns(payloads [][]string, copies int, mut mutation, vocab []string, sign func(*Doc) []Key, fam Family) campaignResult {
	rng := rand.New(rand.NewPCG(1, 2))
	var rec, conc float64
	for _, p := range payloads {
		orig := map[Key]bool{}
		for _, k := range sign(docOf(p)) {
			if k.Family == fam {
				orig[k] = true
			}
		}
		count := map[Key]int{}
		shared := 0
		for range copies {
			ks := sign(docOf(mut(p, rng, vocab)))
			hit := false
			seen := map[Key]bool{}
			for _, k := range ks {
				if k.Family != fam || seen[k] {
					continue
				}
				seen[k] = true
				count[k]++
				if orig[k] {
					hit = true
				}
			}
			if hit {
				shared++
			}
		}
		best := 0
		for _, c := range count {
			best = max(best, c)
		}
		rec += float64(shared) / float64(copies)
		conc += float64(best) / float64(copies)
	}
	n := float64(len(payloads))
	return campaignResult{rec / n, conc / n}
}

type namedMutation struct {
	name string
	m    mutation
}

// defaultLexicon builds the measurement corpus's lexicon with the default
// parameters.
func defaultLexicon(t *testing.T) *Lexicon {
	t.Helper()
	b, _, _ := measureData(t)
	lex, err := b.Build(DefaultLexiconParams())
	if err != nil {
		t.Fatal(err)
	}
	return lex
}

// campaignSetup returns payloads (held-out ham of 40–400 tokens), a
// vocabulary of dictionary words, and a pool of texts for noise blocks.
func campaignSetup(t *testing.T, lex *Lexicon, n int) ([][]string, []string, [][]string, []namedMutation) {
	_, ham, _ := measureData(t)
	var payloads, pool [][]string
	for i, d := range ham {
		if i%2 == 0 && len(d.Tokens) >= 40 && len(d.Tokens) <= 400 && len(payloads) < n {
			payloads = append(payloads, d.Tokens)
		} else if i%2 == 1 && len(d.Tokens) >= 200 {
			pool = append(pool, d.Tokens)
		}
	}
	vocab := lex.Terms("dictionary")
	muts := []namedMutation{
		{"insert 5%", insertWords(0.05)},
		{"delete 5%", deleteWords(0.05)},
		{"substitute 5%", substituteWords(0.05)},
		{"substitute 10%", substituteWords(0.10)},
		{"hash-busters x10", hashBusters(10)},
		{"noise block 50%", noiseBlock(0.5, pool)},
		{"noise block 100%", noiseBlock(1.0, pool)},
		{"ins+del+sub 3% each", combine(insertWords(0.03), deleteWords(0.03), substituteWords(0.03))},
		{"lexicon salad x3", lexiconSalad(3, lex)},
		{"lexicon salad x10", lexiconSalad(10, lex)},
	}
	return payloads, vocab, pool, muts
}

func TestMeasureIMatchCampaigns(t *testing.T) {
	needMeasure(t)
	b, _, _ := measureData(t)
	sec := testSecret(t)
	for _, w := range [][2]float64{{0.2, 0.4}} {
		p := DefaultLexiconParams()
		p.NidfMin, p.NidfMax = w[0], w[1]
		lex, err := b.Build(p)
		if err != nil {
			t.Fatal(err)
		}
		payloads, vocab, _, muts := campaignSetup(t, lex, 150)
		for _, cfg := range []struct {
			k int
			h Hardening
		}{{0, HardeningOff}, {10, HardeningOff}, {10, HardeningOnly}, {10, HardeningAlso}} {
			ip := DefaultIMatchParams()
			ip.Randomized, ip.Hardening = cfg.k, cfg.h
			m, err := NewIMatch(sec, lex, ip)
			if err != nil {
				t.Fatal(err)
			}
			sign := func(d *Doc) []Key { ks, _ := m.Sign(d, nil); return ks }
			var cells []string
			for _, mu := range muts {
				r := runCampaigns(payloads, 20, mu.m, vocab, sign, FamilyIMatch)
				cells = append(cells, fmt.Sprintf("%s %.2f/%.2f", mu.name, r.pairRecall, r.concentration))
			}
			t.Logf("[%.2f,%.2f] K=%d %s: %s", w[0], w[1], cfg.k, cfg.h, strings.Join(cells, " | "))
		}
	}
}

// measureFamily prints a family's campaign robustness and its false
// sharing on held-out ham.
func measureFamily(t *testing.T, name string, s Signer, payloads [][]string, vocab []string, muts []namedMutation) {
	_, ham, _ := measureData(t)
	hk := make([][]Key, len(ham))
	for i, d := range ham {
		hk[i], _ = s.Sign(d, nil)
	}
	ng := len(newsgroups(t, "test"))
	g1 := keyGroupStats(ham[:ng], hk[:ng], s.Family())
	g2 := keyGroupStats(ham[ng:], hk[ng:], s.Family())
	sign := func(d *Doc) []Key { ks, _ := s.Sign(d, nil); return ks }
	var cells []string
	for _, mu := range muts {
		r := runCampaigns(payloads, 20, mu.m, vocab, sign, s.Family())
		cells = append(cells, fmt.Sprintf("%s %.2f/%.2f", mu.name, r.pairRecall, r.concentration))
	}
	t.Logf("%-34s ham 20NG signed %.1f%% spurious %.2f%% max %d big %d | SA signed %.1f%% spurious %.2f%% max %d big %d\n    %s",
		name, 100*float64(g1.signed)/float64(ng), 100*float64(g1.spurious)/float64(ng), g1.maxGroup, g1.bigKeys,
		100*float64(g2.signed)/float64(len(ham)-ng), 100*float64(g2.spurious)/float64(len(ham)-ng), g2.maxGroup, g2.bigKeys,
		strings.Join(cells, " | "))
}

func spaceMutation(rate float64) mutation {
	// Split words in two and join neighbours: the letters are unchanged.
	return func(toks []string, rng *rand.Rand, _ []string) []string {
		var out []string
		for i := 0; i < len(toks); i++ {
			w := toks[i]
			switch {
			case rng.Float64() < rate && len(w) > 3:
				k := 1 + rng.IntN(len(w)-1)
				out = append(out, w[:k], w[k:])
			case rng.Float64() < rate && i+1 < len(toks):
				out = append(out, w+toks[i+1])
				i++
			default:
				out = append(out, w)
			}
		}
		return out
	}
}

func TestMeasureShingles(t *testing.T) {
	needMeasure(t)
	b, _, _ := measureData(t)
	sec := testSecret(t)
	for _, dmin := range []int{2, 3} {
		p := DefaultLexiconParams()
		p.DictMinDF = dmin
		lex, err := b.Build(p)
		if err != nil {
			t.Fatal(err)
		}
		payloads, vocab, _, muts := campaignSetup(t, lex, 150)
		muts = append(muts, namedMutation{"spaces 10%", spaceMutation(0.1)})
		t.Logf("dictionary min df %d: %d words", dmin, len(vocab))
		for _, c := range []struct{ w, r, minB, maxB, minU int }{
			{2, 3, 2, 6, 12}, {3, 3, 2, 6, 12}, {4, 3, 2, 6, 12}, {4, 4, 2, 6, 12}, {5, 3, 2, 6, 12}, {4, 2, 2, 6, 12}, {4, 4, 3, 8, 12},
		} {
			sp := ShingleParams{Enabled: true, Width: c.w, Sample: SampleParams{Rows: c.r, MinBands: c.minB, MaxBands: c.maxB, MinUnits: c.minU}}
			s, err := NewShingle(sec, lex, sp)
			if err != nil {
				t.Fatal(err)
			}
			measureFamily(t, fmt.Sprintf("dict>=%d w=%d r=%d bands=%d..%d", dmin, c.w, c.r, c.minB, c.maxB), s, payloads, vocab, muts)
		}
		if dmin == 3 {
			break
		}
	}
}

func TestMeasureCharShingles(t *testing.T) {
	needMeasure(t)
	lex := defaultLexicon(t)
	payloads, vocab, _, muts := campaignSetup(t, lex, 150)
	muts = append(muts, namedMutation{"spaces 10%", spaceMutation(0.1)})
	for _, c := range []struct{ w, r, minB, maxB, minU int }{
		{8, 4, 2, 6, 80}, {8, 3, 2, 6, 80}, {12, 4, 2, 6, 80}, {16, 4, 2, 6, 80}, {12, 3, 2, 6, 80}, {12, 5, 2, 6, 80},
	} {
		cp := CharShingleParams{Enabled: true, Width: c.w, Sample: SampleParams{Rows: c.r, MinBands: c.minB, MaxBands: c.maxB, MinUnits: c.minU}}
		s, err := NewCharShingle(testSecret(t), cp)
		if err != nil {
			t.Fatal(err)
		}
		measureFamily(t, fmt.Sprintf("chars w=%d r=%d bands=%d..%d", c.w, c.r, c.minB, c.maxB), s, payloads, vocab, muts)
	}
}

// everyTenth edits tokens 9, 19, 29, … (Malkin & Venkatesan's intelligent
// attacks): kind 0 adds a token there, 1 deletes it, 2 changes it, 3
// alternates.
func everyTenth(kind int) mutation {
	return func(toks []string, rng *rand.Rand, vocab []string) []string {
		return intelligentAttack(toks, kind, rng, vocab)
	}
}

func TestMeasureSiftKeys(t *testing.T) {
	needMeasure(t)
	lex := defaultLexicon(t)
	payloads, vocab, _, muts := campaignSetup(t, lex, 150)
	muts = append(muts, namedMutation{"every 10th changed", everyTenth(2)}, namedMutation{"every 10th mixed", everyTenth(3)})
	for _, c := range []struct {
		l, r, minB, maxB int
		f                SiftFormation
		parts            int
	}{
		{10, 1, 2, 4, SiftSkip, 2}, {10, 2, 2, 4, SiftSkip, 2}, {10, 1, 3, 6, SiftSkip, 2}, {6, 1, 2, 4, SiftSkip, 2}, {6, 2, 2, 4, SiftSkip, 2},
		{10, 1, 2, 4, SiftWindow, 1},
	} {
		sp := DefaultSiftParams()
		sp.ClusterLen, sp.Formation, sp.Partitions = c.l, c.f, c.parts
		sp.Sample = SampleParams{Rows: c.r, MinBands: c.minB, MaxBands: c.maxB, MinUnits: 30}
		s, err := NewSift(testSecret(t), sp)
		if err != nil {
			t.Fatal(err)
		}
		measureFamily(t, fmt.Sprintf("sift %s b=%d l=%d r=%d bands=%d..%d", c.f, c.parts, c.l, c.r, c.minB, c.maxB), s, payloads, vocab, muts)
	}
}

// TestMeasureBuilderMemory builds the lexicon from the bundled corpora (all
// of 20 Newsgroups and the Enron ham) with and without a tight bigram
// bound, and reports memory, time and what pruning lost.
func TestMeasureBuilderMemory(t *testing.T) {
	needMeasure(t)
	var docs []*Doc
	for _, sp := range []string{"train", "test"} {
		for _, m := range newsgroups(t, sp) {
			docs = append(docs, textDoc(m.Text))
		}
	}
	for _, m := range enronHam(t, 1<<30) {
		docs = append(docs, textDoc(m.Text))
	}
	var lexes []*Lexicon
	for _, maxBigrams := range []int{0, 1 << 20, 1 << 18} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		b := NewLexiconBuilder(BuilderOptions{MaxBigrams: maxBigrams})
		for _, d := range docs {
			b.Add(d)
		}
		addTime := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&after)
		start = time.Now()
		lex, err := b.Build(DefaultLexiconParams())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("MaxBigrams=%d: docs=%d add %v build %v; builder heap %.0f MiB; %+v; lexicon %+v",
			maxBigrams, len(docs), addTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond),
			float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), b.Stats(), lex.Stats())
		lexes = append(lexes, lex)
		runtime.KeepAlive(b)
	}
	// What pruning lost: stored (term, context) pairs missing or added.
	for i, l := range lexes[1:] {
		lost, total := 0, 0
		for _, w := range lexes[0].Terms("primary") {
			b0, a0 := lexes[0].Contexts(w)
			b1, a1 := l.Contexts(w)
			for _, c := range b0 {
				total++
				if !slices.Contains(b1, c) {
					lost++
				}
			}
			for _, c := range a0 {
				total++
				if !slices.Contains(a1, c) {
					lost++
				}
			}
		}
		t.Logf("bounded build %d: %d of %d primary-term contexts differ from the unbounded build", i+1, lost, total)
	}
}

// TestMeasureDefaults prints the campaign and ham figures of every family
// with its defaults (the table in docs/signatures.md).
func TestMeasureDefaults(t *testing.T) {
	needMeasure(t)
	lex := defaultLexicon(t)
	t.Logf("lexicon: %+v", lex.Stats())
	payloads, vocab, _, muts := campaignSetup(t, lex, 150)
	muts = append(muts,
		namedMutation{"spaces 10%", spaceMutation(0.1)},
		namedMutation{"every 10th changed", everyTenth(2)},
		namedMutation{"every 10th added", everyTenth(0)},
	)
	sec := testSecret(t)
	base := DefaultIMatchParams()
	base.Randomized, base.Hardening = 0, HardeningOff
	plain, _ := NewIMatch(sec, lex, base)
	im, _ := NewIMatch(sec, lex, DefaultIMatchParams())
	sh, _ := NewShingle(sec, lex, DefaultShingleParams())
	ch, _ := NewCharShingle(sec, DefaultCharShingleParams())
	sf, _ := NewSift(sec, DefaultSiftParams())
	for _, f := range []struct {
		name string
		s    Signer
	}{{"imatch K=0 plain (baseline)", plain}, {"imatch default", im}, {"shingle default", sh}, {"charshingle default", ch}, {"sift default", sf}} {
		measureFamily(t, f.name, f.s, payloads, vocab, muts)
	}
}
