package signature

import (
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The one-permutation sampler with densification estimates Jaccard
// similarity: the share of bins on which two sets agree is J, for large
// sets and for sets smaller than the number of bins.
func TestSamplerEstimatesJaccard(t *testing.T) {
	s := newSampler(testSecret(t), FamilyShingle, SampleParams{Rows: 3, MinBands: 2, MaxBands: 6, MinUnits: 1})
	rng := rand.New(rand.NewPCG(4, 4))
	for _, c := range []struct{ shared, own int }{{100, 50}, {300, 100}, {6, 3}, {4, 4}} {
		j := float64(c.shared) / float64(c.shared+2*c.own)
		agree, bins := 0, 0
		for range 2000 {
			var a, b oph
			addA, addB := s.reset(&a), s.reset(&b)
			for range c.shared {
				v := rng.Uint64()
				addA.add(v)
				addB.add(v)
			}
			for range c.own {
				addA.add(rng.Uint64())
				addB.add(rng.Uint64())
			}
			ka, kb := s.keys(&a, 6, nil), s.keys(&b, 6, nil)
			if len(ka) != 6 || len(kb) != 6 {
				t.Fatalf("got %d and %d band keys, want 6", len(ka), len(kb))
			}
			for i := range s.bins {
				if a.min[i] == b.min[i] {
					agree++
				}
				bins++
			}
		}
		got := float64(agree) / float64(bins)
		t.Logf("shared=%d own=%d: J=%.3f, bins agree %.3f", c.shared, c.own, j, got)
		if math.Abs(got-j) > 0.03 {
			t.Errorf("shared=%d own=%d: bins agree %.3f, want J=%.3f ±0.03", c.shared, c.own, got, j)
		}
	}
}

func TestSampleBands(t *testing.T) {
	p := SampleParams{Rows: 3, MinBands: 2, MaxBands: 6, MinUnits: 12}
	for _, c := range []struct{ n, want int }{{0, 0}, {11, 0}, {12, 2}, {23, 2}, {24, 3}, {48, 4}, {96, 5}, {192, 6}, {100000, 6}} {
		if got := p.bands(c.n); got != c.want {
			t.Errorf("bands(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	// Short documents sign from MinUnits; the bands grow from BandUnits
	// as before, so a longer document gets no more keys.
	p = SampleParams{Rows: 4, MinBands: 2, MaxBands: 6, MinUnits: 40, BandUnits: 80}
	for _, c := range []struct{ n, want int }{{39, 0}, {40, 2}, {79, 2}, {80, 2}, {159, 2}, {160, 3}, {320, 4}, {100000, 6}} {
		if got := p.bands(c.n); got != c.want {
			t.Errorf("band units 80: bands(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

func testShingle(t testing.TB, lex *Lexicon) *Shingle {
	s, err := NewShingle(testSecret(t), lex, DefaultShingleParams())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Random strings outside the frequency dictionary act as spaces: inserting
// any number of them leaves every supershingle unchanged, while the share
// of out-of-dictionary words (a bulk feature) rises.
func TestShingleIgnoresHashBusters(t *testing.T) {
	lex := testLexicon(t)
	s := testShingle(t, lex)
	rng := rand.New(rand.NewPCG(5, 5))
	changedByWords, checked := 0, 0
	for _, d := range heldOutDocs(t, 200) {
		want := keysOf(s, d)
		if len(want) == 0 {
			continue
		}
		busted := slices.Clone(d.Tokens)
		for range 25 {
			w := randomString(rng, 5+rng.IntN(12))
			if _, ok := lex.Lookup(w); ok {
				continue
			}
			busted = slices.Insert(busted, rng.IntN(len(busted)+1), w)
		}
		bd := docOf(busted)
		if got := keysOf(s, bd); !slices.Equal(got, want) {
			t.Fatalf("hash-busters changed the supershingles:\n got %v\nwant %v", got, want)
		}
		if s.OutOfDictionary(bd) <= s.OutOfDictionary(d) {
			t.Fatalf("out-of-dictionary share %.3f did not rise from %.3f", s.OutOfDictionary(bd), s.OutOfDictionary(d))
		}
		// The same number of dictionary words does change them: the test
		// above is not vacuous.
		edited := slices.Clone(d.Tokens)
		dict := lex.Terms("dictionary")
		for range 25 {
			edited = slices.Insert(edited, rng.IntN(len(edited)+1), dict[rng.IntN(len(dict))])
		}
		if !slices.Equal(keysOf(s, docOf(edited)), want) {
			changedByWords++
		}
		checked++
	}
	if checked < 150 || changedByWords < checked/2 {
		t.Fatalf("checked %d documents, dictionary insertions changed %d", checked, changedByWords)
	}
}

var spacing = regexp.MustCompile(`\s+|\S+`)

// makeDoc builds a Doc from raw text. It is the stand-in tokenizer until
// canonicalisation is merged.
var makeDoc = textDoc

// Character shingles run over the letters with every space removed:
// inserting spaces inside words or removing them between words does not
// change them, while it does change word shingles.
func TestCharShingleIgnoresSpaces(t *testing.T) {
	lex := testLexicon(t)
	c, err := NewCharShingle(testSecret(t), DefaultCharShingleParams())
	if err != nil {
		t.Fatal(err)
	}
	words := testShingle(t, lex)
	rng := rand.New(rand.NewPCG(6, 6))
	wordsChanged, checked := 0, 0
	for _, m := range newsgroups(t, "test")[:400] {
		text := m.Text
		orig := makeDoc(text)
		want := keysOf(c, orig)
		if len(want) == 0 {
			continue
		}
		// The Yandex trick: spaces inserted inside words and removed
		// between words. Only words made of letters are touched: spacing
		// around e-mail addresses, links or numbers is another matter
		// (canonicalisation drops those).
		chunks := spacing.FindAllString(text, -1)
		letters := func(c string) bool {
			for _, r := range c {
				if !unicode.IsLetter(r) {
					return false
				}
			}
			return c != ""
		}
		var b strings.Builder
		for i, c := range chunks {
			switch {
			case c == " " && i > 0 && i+1 < len(chunks) && letters(chunks[i-1]) && letters(chunks[i+1]) && rng.IntN(5) == 0:
				continue // remove a space between two words
			case letters(c):
				for j, r := range []rune(c) {
					if j > 0 && rng.IntN(6) == 0 {
						b.WriteByte(' ') // insert one inside the word
					}
					b.WriteRune(r)
				}
				continue
			}
			b.WriteString(c)
		}
		spaced := makeDoc(b.String())
		if got := keysOf(c, spaced); !slices.Equal(got, want) {
			t.Fatalf("spaces changed the character supershingles of %s", m.Name)
		}
		if !slices.Equal(keysOf(words, spaced), keysOf(words, orig)) {
			wordsChanged++
		}
		checked++
	}
	if checked < 300 || wordsChanged < checked*9/10 {
		t.Fatalf("checked %d, word shingles changed on %d (the attack must matter)", checked, wordsChanged)
	}
}

func TestShingleDeclinesShortText(t *testing.T) {
	lex := testLexicon(t)
	s := testShingle(t, lex)
	ks, e := s.Sign(textDoc("thanks see you tomorrow at the meeting"), nil)
	if len(ks) != 0 || !strings.HasPrefix(e.Declined, "too few dictionary words") {
		t.Fatalf("got %v %+v, want a decline", ks, e)
	}
	c, _ := NewCharShingle(testSecret(t), DefaultCharShingleParams())
	ks, e = c.Sign(textDoc("short text"), nil)
	if len(ks) != 0 || !strings.HasPrefix(e.Declined, "too few letters") {
		t.Fatalf("got %v %+v, want a decline", ks, e)
	}
}

// A band's key does not depend on how many bands a document gets: a short
// and a long near duplicate compare their common bands. (Bins are chosen
// from the shingle hash alone, and densification reads only filled bins.)
func TestSamplerBandsArePrefixes(t *testing.T) {
	s := newSampler(testSecret(t), FamilyShingle, SampleParams{Rows: 3, MinBands: 2, MaxBands: 6, MinUnits: 1})
	rng := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{1, 3, 10, 100} {
		var o oph
		add := s.reset(&o)
		for range n {
			add.add(rng.Uint64())
		}
		all := s.keys(&o, 6, nil)
		for b := 1; b < 6; b++ {
			c := o
			if got := s.keys(&c, b, nil); !slices.Equal(got, all[:b]) {
				t.Fatalf("n=%d: %d bands give %v, want the prefix %v", n, b, got, all[:b])
			}
		}
	}
}

func TestShingleParamsValidate(t *testing.T) {
	for _, p := range []ShingleParams{DefaultShingleParams()} {
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	if err := DefaultCharShingleParams().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := ShingleParams{Width: 0, Sample: SampleParams{Rows: 20, MinBands: 3, MaxBands: 4, MinUnits: 0}}
	err := bad.Validate()
	for _, want := range []string{"width", "exceeds 64", "min units"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
}

// TestCharShingleRollOnePass: the one-pass rolling hash (roll, a ring of
// the window and the first letters kept) offers the sampler exactly what
// the hash over every letter's value does (rollShort, the form before it),
// at every length from a shingle's width up, ASCII or not.
func TestCharShingleRollOnePass(t *testing.T) {
	for _, width := range []int{2, 12, 64} {
		p := DefaultCharShingleParams()
		p.Width = width
		c, err := NewCharShingle(testSecret(t), p)
		if err != nil {
			t.Fatal(err)
		}
		letters := []rune("abcdefghijklmnopqrstuvwxyzéжщ谢ü0123456789")
		var b strings.Builder
		var sc charScratch
		var o oph
		for n := 1; n <= 300; n++ {
			b.WriteRune(letters[(n*7919+n*n)%len(letters)])
			s := b.String()
			got := c.roll(s, &o)
			want := c.rollShort(s, &sc)
			if got != want {
				t.Fatalf("width %d, %d letters: roll counted %d, rollShort %d", width, n, got, want)
			}
			if n < width {
				continue // roll leaves these to rollShort
			}
			if o.filled != sc.o.filled || o.min != sc.o.min {
				t.Fatalf("width %d, %d letters: roll's sample differs from rollShort's (filled %x/%x)",
					width, n, o.filled, sc.o.filled)
			}
		}
	}
}

// checkSlide61 fails t unless slide61 is h·base + v + g mod 2⁶¹−1, below
// 2⁶¹+4 and fully reduced by reduce61, for inputs in its ranges (h < 2⁶²,
// the others below 2⁶¹−1), and gone(v) is −v·basek.
func checkSlide61(t testing.TB, c *CharShingle, h, base, v, g uint64) {
	t.Helper()
	p := new(big.Int).SetUint64(mersenne61)
	want := new(big.Int).Mul(new(big.Int).SetUint64(h), new(big.Int).SetUint64(base))
	want.Add(want, new(big.Int).SetUint64(v))
	want.Add(want, new(big.Int).SetUint64(g))
	want.Mod(want, p)
	got := slide61(h, base, v+g)
	if got >= 1<<61+4 || reduce61(got) != want.Uint64() {
		t.Fatalf("slide61(%#x, %#x, %#x+%#x) = %#x, want %#x below 2⁶¹+4", h, base, v, g, got, want)
	}
	want.Mul(new(big.Int).SetUint64(v), new(big.Int).SetUint64(c.basek))
	want.Neg(want).Mod(want, p)
	if got := c.gone(v); got != want.Uint64() {
		t.Fatalf("gone(%#x) = %#x, want %#x", v, got, want)
	}
}

// slide61's one fold and reduce61 are exact at the ends of their ranges
// and between.
func TestSlide61(t *testing.T) {
	c, err := NewCharShingle(testSecret(t), DefaultCharShingleParams())
	if err != nil {
		t.Fatal(err)
	}
	const p = mersenne61
	edges := []uint64{0, 1, 2, p / 2, p - 2, p - 1}
	for _, h := range append(edges, p, p+1, 2*p-2, 1<<62-1) {
		for _, base := range edges {
			for _, v := range edges {
				for _, g := range edges {
					checkSlide61(t, c, h, base, v, g)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(61, 61))
	for range 100000 {
		checkSlide61(t, c, rng.Uint64N(1<<62), rng.Uint64N(p), rng.Uint64N(p), rng.Uint64N(p))
	}
	for b, l := range c.ascii {
		if want := (letterValues{c.table[b], c.gone(c.table[b])}); l != want {
			t.Fatalf("ascii[%#x] = %#x, want %#x", b, l, want)
		}
	}
}

// FuzzSlide61: slide61 against math/big for any inputs in its ranges.
func FuzzSlide61(f *testing.F) {
	c, err := NewCharShingle(testSecret(f), DefaultCharShingleParams())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint64(1<<62-1), uint64(mersenne61-1), uint64(mersenne61-1), uint64(mersenne61-1))
	f.Fuzz(func(t *testing.T, h, base, v, g uint64) {
		checkSlide61(t, c, h%(1<<62), base%mersenne61, v%mersenne61, g%mersenne61)
	})
}
