package signature

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"sync"
	"unicode/utf8"
)

// ShingleParams tune the word-shingle family.
type ShingleParams struct {
	Enabled bool
	// Width is the number of dictionary words per shingle.
	Width int
	// Sample sizes the min-hash sample and its bands; units are
	// dictionary words.
	Sample SampleParams
}

// DefaultShingleParams returns the defaults; docs/signatures.md gives the
// measurements behind them.
func DefaultShingleParams() ShingleParams {
	return ShingleParams{
		Enabled: true,
		Width:   2,
		Sample:  SampleParams{Rows: 3, MinBands: 2, MaxBands: 6, MinUnits: 12},
	}
}

// Validate reports every invalid parameter.
func (p ShingleParams) Validate() error {
	var errs []error
	if p.Width < 1 || p.Width > 16 {
		errs = append(errs, fmt.Errorf("shingle width %d must be within [1, 16]", p.Width))
	}
	if err := p.Sample.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("shingle sample: %w", err))
	}
	return errors.Join(errs...)
}

// Shingle signs the sequence of dictionary words with supershingles
// (Broder 1997; Yandex 2003). Words outside the frequency dictionary act
// as spaces, which neutralises random "hash-buster" strings; the share of
// such words is reported (it is a bulk feature in itself). The sequence is
// read as a ring (Yandex's wrap-around), so every word belongs to Width
// shingles and short texts still yield a full sample.
type Shingle struct {
	fam Family // FamilyShingle, or FamilyContain (contain.go)
	p   ShingleParams
	// minDF: dictionary words of fewer documents act as spaces
	// (ContainParams.MinDF; 0 for the shingle family).
	minDF uint32
	th    tokenHasher
	kl    *keyedLexicon
	seed  uint64
	mul   uint64
	smp   sampler
}

// NewShingle returns a word-shingle signer keyed with s; lex supplies the
// frequency dictionary.
func NewShingle(s Secret, lex *Lexicon, p ShingleParams) (*Shingle, error) {
	th, kl, _, err := keyedFor("shingle", s, lex, " (the frequency dictionary)", keepRule{})
	if err != nil {
		return nil, err
	}
	return newShingle(s, th, kl, p)
}

func newShingle(s Secret, th tokenHasher, kl *keyedLexicon, p ShingleParams) (*Shingle, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	k := s.derive("shingle/word")
	return &Shingle{
		fam: FamilyShingle, p: p, th: th, kl: kl, seed: k.k0, mul: k.k1 | 1,
		smp: newSampler(s, FamilyShingle, p.Sample),
	}, nil
}

// Family returns FamilyShingle (FamilyContain for a containment signer).
func (s *Shingle) Family() Family { return s.fam }

// Sign appends the document's supershingle keys to dst.
func (s *Shingle) Sign(d *Doc, dst []Key) ([]Key, Explain) {
	p := prepare(d, s.th, s.kl)
	defer p.release()
	return s.sign(p, dst)
}

// OutOfDictionary returns the share of the document's tokens that are not
// dictionary words (Yandex: unusually high under hash-buster and
// space-insertion tricks).
func (s *Shingle) OutOfDictionary(d *Doc) float64 {
	if len(d.Tokens) == 0 {
		return 0
	}
	p := prepare(d, s.th, s.kl)
	defer p.release()
	in := 0
	for _, idx := range p.lex {
		if idx >= 0 {
			in++
		}
	}
	return 1 - float64(in)/float64(len(d.Tokens))
}

type wordScratch struct {
	seq []uint64
	o   oph
}

var wordPool = sync.Pool{New: func() any { return new(wordScratch) }}

func (s *Shingle) sign(p *prepared, dst []Key) ([]Key, Explain) {
	e := Explain{Family: s.fam}
	sc := wordPool.Get().(*wordScratch)
	defer func() { recycle(&wordPool, sc, cap(sc.seq)) }()
	sc.seq = sc.seq[:0]
	for i, idx := range p.lex {
		if idx >= 0 && (s.minDF == 0 || s.kl.df(idx, p.info[i]) >= s.minDF) {
			sc.seq = append(sc.seq, p.th[i])
		}
	}
	n := len(sc.seq)
	oov := len(p.th) - n
	unread, words := " out_of_dictionary=", "dictionary words"
	if s.minDF > 0 {
		unread, words = " rare_or_out_of_dictionary=", "common dictionary words"
	}
	detail := func() string {
		b := make([]byte, 0, 64)
		b = append(b, "words="...)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, unread...)
		b = strconv.AppendInt(b, int64(oov), 10)
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(len(p.th)), 10)
		return string(b)
	}
	bands := s.p.Sample.bands(n)
	if bands == 0 {
		e.Declined = "too few " + words + ": " + strconv.Itoa(n) + " < " + strconv.Itoa(s.p.Sample.MinUnits)
		e.Detail = detail()
		return dst, e
	}
	// Ring: append the first Width-1 words (repeating when n < Width).
	w := s.p.Width
	for i := 0; i < w-1; i++ {
		sc.seq = append(sc.seq, sc.seq[i%n])
	}
	o := &sc.o
	add := s.smp.reset(o)
	for i := range n {
		h := s.seed
		for _, t := range sc.seq[i : i+w] {
			h = (h ^ t) * s.mul
			h ^= h >> 29
		}
		add.add(h) // the sampler re-keys h with a keyed mix
	}
	before := len(dst)
	dst = s.smp.keys(o, bands, dst)
	e.Keys = len(dst) - before
	e.Detail = detail()
	return dst, e
}

// CharShingleParams tune the character-shingle family.
type CharShingleParams struct {
	Enabled bool
	// Width is the number of letters per shingle.
	Width int
	// Sample sizes the min-hash sample and its bands; units are letters.
	Sample SampleParams
}

// DefaultCharShingleParams returns the defaults; docs/signatures.md gives
// the measurements behind them.
func DefaultCharShingleParams() CharShingleParams {
	return CharShingleParams{
		Enabled: true,
		Width:   12,
		Sample:  SampleParams{Rows: 4, MinBands: 2, MaxBands: 6, MinUnits: 40, BandUnits: 80},
	}
}

// Validate reports every invalid parameter.
func (p CharShingleParams) Validate() error {
	var errs []error
	if p.Width < 2 || p.Width > 64 {
		errs = append(errs, fmt.Errorf("char shingle width %d must be within [2, 64]", p.Width))
	}
	if err := p.Sample.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("char shingle sample: %w", err))
	}
	return errors.Join(errs...)
}

// CharShingle signs Doc.Letters, the text with everything but letters and
// digits removed, with supershingles of Width-letter shingles (Yandex: "all
// the words of the text glued into one chain of letters, shingles computed
// with a fixed window"). Inserting or removing spaces does not change it.
//
// Shingles are hashed with a rolling polynomial hash modulo 2⁶¹−1 whose
// base and per-letter values are secret (SipHash-derived): a keyed
// universal hash at two multiplications per letter, where SipHash per
// window would cost more than all other families together.
type CharShingle struct {
	p     CharShingleParams
	base  uint64 // secret polynomial base, in [1, 2⁶¹−1)
	basek uint64 // base^Width mod 2⁶¹−1
	runes sipKey
	table *[0x1000]uint64              // letter values for runes below len(table)
	ascii *[utf8.RuneSelf]letterValues // the ASCII letters' values, together
	smp   sampler
}

const mersenne61 = 1<<61 - 1

func mulmod61(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	r := (hi<<3 | lo>>61) + (lo & mersenne61)
	r = (r & mersenne61) + (r >> 61)
	if r >= mersenne61 {
		r -= mersenne61
	}
	return r
}

// NewCharShingle returns a character-shingle signer keyed with s.
func NewCharShingle(s Secret, p CharShingleParams) (*CharShingle, error) {
	if s.IsZero() {
		return nil, errors.New("charshingle: zero secret")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	k := s.derive("charshingle/poly")
	c := &CharShingle{
		p:     p,
		base:  k.k0%(mersenne61-2) + 2,
		runes: s.derive("charshingle/letter"),
		smp:   newSampler(s, FamilyCharShingle, p.Sample),
	}
	c.basek = 1
	for range p.Width {
		c.basek = mulmod61(c.basek, c.base)
	}
	// Latin, Greek, Cyrillic, Hebrew, Arabic and Indic letters come from a
	// table; rarer scripts are hashed as they come.
	c.table = new([0x1000]uint64)
	for r := range c.table {
		c.table[r] = c.runes.word(uint64(r)) % mersenne61
	}
	c.ascii = new([utf8.RuneSelf]letterValues)
	for b := range c.ascii {
		c.ascii[b] = letterValues{c.table[b], c.gone(c.table[b])}
	}
	return c, nil
}

// Family returns FamilyCharShingle.
func (c *CharShingle) Family() Family { return FamilyCharShingle }

func (c *CharShingle) letter(r rune) uint64 {
	if int(r) < len(c.table) && r >= 0 {
		return c.table[r]
	}
	return c.runes.word(uint64(r)) % mersenne61
}

type charScratch struct {
	vals []uint64
	o    oph
}

var charPool = sync.Pool{New: func() any { return new(charScratch) }}

// Sign appends the document's character supershingle keys to dst.
func (c *CharShingle) Sign(d *Doc, dst []Key) ([]Key, Explain) {
	e := Explain{Family: FamilyCharShingle}
	sc := charPool.Get().(*charScratch)
	defer func() { recycle(&charPool, sc, cap(sc.vals)) }()
	o := &sc.o
	// The body's letters, without the Subject's, when they are enough to
	// sign: in a short mailing the Subject is half the letters, and a
	// campaign that rotates its subjects over one body would split into one
	// campaign a subject (docs/signatures.md, "Character shingles").
	s := d.Letters[d.SubjectLetters:]
	n := c.roll(s, o)
	if n < c.p.Sample.MinUnits {
		s = d.Letters
		n = c.roll(s, o)
	}
	if n < c.p.Width {
		// Fewer letters than a shingle: the ring wraps around more than
		// once, which roll does not do (never with the default sample,
		// which signs from 40 letters).
		n = c.rollShort(s, sc)
	}
	bands := c.p.Sample.bands(n)
	detail := "letters=" + strconv.Itoa(n)
	if bands == 0 {
		e.Declined = "too few letters: " + strconv.Itoa(n) + " < " + strconv.Itoa(c.p.Sample.MinUnits)
		e.Detail = detail
		return dst, e
	}
	before := len(dst)
	dst = c.smp.keys(o, bands, dst)
	e.Keys = len(dst) - before
	e.Detail = detail
	return dst, e
}

// letterValues are a letter's value, which enters a window's hash, and
// its gone value, which leaves it.
type letterValues struct{ v, g uint64 }

// roll offers o the hash of every Width-letter shingle of s, read as a
// ring (the last shingles wrap around to the first letters, as for words),
// in one pass over s: the first Width−1 letters' values, and the gone
// values of the window's letters, are kept in two small arrays. It
// returns the number of letters; when it is below Width, o is incomplete
// and rollShort must sign s instead.
func (c *CharShingle) roll(s string, o *oph) int {
	w, base, ascii := c.p.Width, c.base, c.ascii
	var head [64]uint64 // the first w−1 letters' values; w ≤ 64
	var ring [64]uint64 // letter i's gone value at i%64
	add := c.smp.reset(o)
	var h uint64
	i, k := 0, 0
	for ; i < w-1; i++ { // no window is complete yet
		if k == len(s) {
			return i
		}
		var v uint64
		v, k = c.next(s, k)
		head[i], ring[i] = v, c.gone(v)
		h = mulmod61(h, base) + v
	}
	// At i = w−1 there is no letter to forget, and ring holds 0 there.
	for k < len(s) {
		var l letterValues
		if b := s[k]; b < utf8.RuneSelf {
			l = ascii[b]
			k++
		} else {
			l.v, k = c.next(s, k)
			l.g = c.gone(l.v)
		}
		h = slide61(h, base, l.v+ring[(i-w)&63])
		ring[i&63] = l.g
		add.add(reduce61(h))
		i++
	}
	// The wrap-around: the first w−1 letters again (none of which leaves
	// the window before the end).
	n := i
	for _, v := range head[:w-1] {
		h = slide61(h, base, v+ring[(i-w)&63])
		add.add(reduce61(h))
		i++
	}
	return n
}

// gone returns what a letter of value v takes away from a window's hash
// when it leaves it: −v·base^Width mod 2⁶¹−1.
func (c *CharShingle) gone(v uint64) uint64 { return mulmod61(mersenne61-v, c.basek) }

// next returns the value of the letter at s[k] and the index after it.
func (c *CharShingle) next(s string, k int) (uint64, int) {
	if b := s[k]; b < utf8.RuneSelf {
		return c.table[b], k + 1
	}
	r, size := utf8.DecodeRuneInString(s[k:])
	return c.letter(r), k + size
}

// slide61 moves a window hash h on by a letter: h·base + a mod 2⁶¹−1,
// where a is the letter's value plus the gone value of the letter it
// forgets (a < 2⁶², h < 2⁶², base < 2⁶¹). The result is below 2⁶¹+5 but
// not fully reduced: the next letter's multiplication waits for it, and
// reduce61 finishes it off that chain.
func slide61(h, base, a uint64) uint64 {
	hi, lo := bits.Mul64(h, base)
	// h·base < 2¹²³: the sum is below 2⁶³+2⁶¹, and r ≤ 2⁶¹+3.
	r := (hi<<3 | lo>>61) + (lo&mersenne61 + a)
	return (r & mersenne61) + (r >> 61)
}

// reduce61 fully reduces a value below 2·(2⁶¹−1) modulo 2⁶¹−1.
func reduce61(x uint64) uint64 {
	if x >= mersenne61 {
		x -= mersenne61
	}
	return x
}

// rollShort is roll for a text of fewer letters than a shingle, with
// every letter's value kept.
func (c *CharShingle) rollShort(s string, sc *charScratch) int {
	sc.vals = sc.vals[:0]
	for _, r := range s {
		sc.vals = append(sc.vals, c.letter(r))
	}
	o := &sc.o
	add := c.smp.reset(o)
	n := len(sc.vals)
	if n == 0 {
		return 0
	}
	w := c.p.Width
	for i := 0; i < w-1; i++ { // ring, as for words
		sc.vals = append(sc.vals, sc.vals[i%n])
	}
	var h uint64
	for i := range w - 1 {
		h = mulmod61(h, c.base) + sc.vals[i]
	}
	for i := w - 1; i < n+w-1; i++ {
		h = mulmod61(h, c.base) + sc.vals[i]
		if i >= w {
			h += mersenne61 - mulmod61(sc.vals[i-w], c.basek)
		}
		if h >= mersenne61 {
			h -= mersenne61
		}
		if h >= mersenne61 {
			h -= mersenne61
		}
		add.add(h)
	}
	return n
}
