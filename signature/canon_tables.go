package signature

import (
	"sort"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// Script classes of letters, as far as canonicalisation cares.
const (
	scNone     uint8 = iota // not a letter
	scLatin                 // Latin, including IPA and small capitals
	scCyrillic              //
	scGreek                 //
	scCJK                   // scripts written without spaces: Han, Hiragana, Thai, Lao, Khmer, Myanmar
	scOther                 // any other letter
)

// scriptOf classifies r; fast for the ranges mail text is made of.
func scriptOf(r rune) uint8 {
	switch {
	case r < 0x80:
		if 'a' <= r|0x20 && r|0x20 <= 'z' {
			return scLatin
		}
		return scNone
	case r < 0x250:
		if r == 0xD7 || r == 0xF7 || r < 0xC0 && r != 0xAA && r != 0xBA {
			return scNone
		}
		return scLatin
	case r < 0x2B0:
		return scLatin // IPA extensions
	case r < 0x370:
		return scNone // modifier letters and combining marks
	case r < 0x400:
		if unicode.IsLetter(r) {
			return scGreek
		}
		return scNone
	case r < 0x530:
		if unicode.IsLetter(r) {
			return scCyrillic
		}
		return scNone
	case r >= 0x1D00 && r < 0x1DC0:
		if r >= 0x1D26 && r <= 0x1D2A || r >= 0x1D5D && r <= 0x1D6A {
			return scGreek
		}
		if r == 0x1D2B || r == 0x1D78 {
			return scCyrillic
		}
		return scLatin
	case r >= 0x1E00 && r < 0x1F00:
		return scLatin
	case r >= 0x1F00 && r < 0x2000:
		if unicode.IsLetter(r) {
			return scGreek
		}
		return scNone
	}
	if isCJK(r) {
		return scCJK
	}
	if !unicode.IsLetter(r) {
		return scNone
	}
	switch {
	case unicode.Is(unicode.Latin, r):
		return scLatin
	case unicode.Is(unicode.Cyrillic, r):
		return scCyrillic
	case unicode.Is(unicode.Greek, r):
		return scGreek
	}
	return scOther
}

// isCJK reports letters of scripts written without spaces between words,
// which UAX #29 segments one character (or grapheme) at a time.
func isCJK(r rune) bool {
	switch {
	case r < 0x0E00:
		return false
	case r < 0x0F00: // Thai, Lao
		return true
	case r >= 0x1000 && r < 0x10A0: // Myanmar
		return true
	case r >= 0x1780 && r < 0x1800: // Khmer
		return true
	case r >= 0x2E80 && r < 0x2FE0, r >= 0x3005 && r <= 0x3007, r >= 0x3021 && r <= 0x3029,
		r >= 0x3038 && r <= 0x303B, r >= 0x3400 && r < 0x4DC0, r >= 0x4E00 && r < 0xA000,
		r >= 0xF900 && r < 0xFB00, r >= 0x20000 && r < 0x32400: // Han
		return true
	case r >= 0x3040 && r < 0x30A0: // Hiragana
		return true
	}
	return false
}

// isMark reports combining marks (Mn, Me).
func isMark(r rune) bool {
	if r >= 0x300 && r < 0x370 {
		return true
	}
	if r < 0x483 {
		return false
	}
	return unicode.In(r, unicode.Mn, unicode.Me)
}

// ignorable is a bitmap of the BMP's default-ignorable code points (format
// characters Cf, variation selectors, Other_Default_Ignorable_Code_Point):
// invisible characters a sender inserts to break words for filters only.
// Blank-looking fillers are not here: they are read as spaces.
var ignorable [0x10000 / 64]uint64

// blank lists characters that render as blank space but are not Unicode
// spaces: they separate words like a space does.
func isBlankRune(r rune) bool {
	switch r {
	case 0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800:
		return true
	}
	return false
}

func isIgnorable(r rune) bool {
	if r < 0xAD {
		return false
	}
	if r < 0x10000 {
		return ignorable[r>>6]&(1<<(uint(r)&63)) != 0
	}
	return r >= 0xE0000 && r < 0xE1000 || r >= 0x1BCA0 && r <= 0x1BCA3 || r >= 0x1D173 && r <= 0x1D17A ||
		unicode.Is(unicode.Cf, r)
}

// stripDiacritic maps a precomposed Latin, Greek or Cyrillic letter in
// [0xC0, 0x2000) to its base letter ("é" → "e", "ё" → "е", "ά" → "α"):
// accents are a cheap per-copy variation and carry no meaning a near-
// duplicate detector needs. й/Й and ў/Ў are kept: they are letters of
// their own, not accented forms.
var stripDiacritic [0x2000 - 0xC0]uint16

// confusableDense maps runes below 0x600 to their ASCII lookalike (0: none);
// confusableRest is the sorted remainder of confusableASCII.
var (
	confusableDense [0x600]byte
	confusableRest  []struct {
		r rune
		c byte
	}
)

func init() {
	for _, t := range []*unicode.RangeTable{unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point} {
		for _, r16 := range t.R16 {
			for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
				if !isBlankRune(r) {
					ignorable[r>>6] |= 1 << (uint(r) & 63)
				}
			}
		}
	}
	for r := rune(0xC0); r < 0x2000; r++ {
		switch r {
		case 'й', 'Й', 'ў', 'Ў':
			continue
		}
		if sc := scriptOf(r); sc != scLatin && sc != scGreek && sc != scCyrillic {
			continue
		}
		d := []rune(norm.NFD.String(string(r)))
		if len(d) < 2 || d[0] >= 0x10000 || !unicode.IsLetter(d[0]) {
			continue
		}
		allMarks := true
		for _, m := range d[1:] {
			if !unicode.Is(unicode.Mn, m) {
				allMarks = false
			}
		}
		if allMarks {
			stripDiacritic[r-0xC0] = uint16(d[0])
		}
	}
	// Letters with a stroke or bar have no decomposition but read as their
	// base letter, and senders use them so ("đrugs", "ħot").
	for _, p := range [...][2]rune{{'ø', 'o'}, {'Ø', 'O'}, {'đ', 'd'}, {'Đ', 'D'}, {'ł', 'l'}, {'Ł', 'L'},
		{'ħ', 'h'}, {'Ħ', 'H'}, {'ŧ', 't'}, {'Ŧ', 'T'}, {'ƀ', 'b'}, {'Ƀ', 'B'}, {'ɨ', 'i'}, {'Ɨ', 'I'},
		{'ʉ', 'u'}, {'Ʉ', 'U'}, {'ƶ', 'z'}, {'Ƶ', 'Z'}, {'ǥ', 'g'}, {'Ǥ', 'G'}, {'ɍ', 'r'}, {'Ɍ', 'R'},
		{'ɏ', 'y'}, {'Ɏ', 'Y'}, {'ȼ', 'c'}, {'Ȼ', 'C'}, {'ð', 'd'}, {'Ð', 'D'}} {
		stripDiacritic[p[0]-0xC0] = uint16(p[1])
	}
	for _, e := range confusableASCII {
		if e.r < 0x600 {
			confusableDense[e.r] = e.c
		} else {
			confusableRest = append(confusableRest, e)
		}
	}
}

// toASCII returns the ASCII letter r looks like, or 0.
func toASCII(r rune) byte {
	if r < 0x600 {
		if r < 0 {
			return 0
		}
		return confusableDense[r]
	}
	i := sort.Search(len(confusableRest), func(i int) bool { return confusableRest[i].r >= r })
	if i < len(confusableRest) && confusableRest[i].r == r {
		return confusableRest[i].c
	}
	return 0
}

// leetLetter maps the digits and symbols used as letters ("v1@gr@",
// "$ale", "p0rn") to the letter they stand for. I, l, 1, | and ! all stand
// for the same letter class (see foldCase): they are interchangeable in
// print and senders use them so.
func leetLetter(r rune) byte {
	// A table, not a switch: a CJK text asks for every character, several
	// times a chunk.
	if 0 <= r && r < rune(len(leetLetters)) {
		return leetLetters[r]
	}
	if r == '€' {
		return 'e'
	}
	return 0
}

// leetLetters holds leetLetter below U+0100; '€' is the only one above.
var leetLetters = func() (t [0x100]byte) {
	for _, m := range []struct {
		rs string
		c  byte
	}{
		{"0°", 'o'}, {"1!|¡", 'i'}, {"3", 'e'}, {"4@", 'a'}, {"5$§", 's'}, {"7+", 't'},
		{"8", 'b'}, {"9", 'g'}, {"¢©", 'c'}, {"®", 'r'}, {"¥", 'y'},
	} {
		for _, r := range m.rs {
			t[r] = m.c
		}
	}
	return t
}()

// leetEdgeStart and leetEdgeEnd are the symbols read as letters at the
// start or end of a word; digits and '!' are not ("1st", "wow!").
func leetEdgeStart(r rune) bool {
	switch r {
	case '$', '@', '|', '€', '¢', '¥', '§':
		return true
	}
	return false
}

func leetEdgeEnd(r rune) bool {
	switch r {
	case '@', '$', '|', '€', '¢', '¥', '§':
		return true
	}
	return false
}

// leetSeqs are multi-character letter drawings, longest first.
var leetSeqs = []struct {
	s string
	c byte
}{
	{`|\/|`, 'm'}, {`/\/\`, 'm'}, {`\/\/`, 'w'}, {`|\|`, 'n'}, {`/\/`, 'n'}, {`|_|`, 'u'}, {`|-|`, 'h'},
	{`|<`, 'k'}, {`|{`, 'k'}, {`|)`, 'd'}, {`|3`, 'b'}, {`|2`, 'r'}, {`}{`, 'h'}, {`\/`, 'v'},
	{`/\`, 'a'}, {`()`, 'o'}, {`[]`, 'o'}, {`><`, 'x'}, {`|_`, 'l'},
}
