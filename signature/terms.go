package signature

import (
	"unicode"
	"unicode/utf8"
)

// IMatchTerm reports whether a canonical token is an I-Match term. The rule
// is Kolcz & Chowdhury's email preprocessing (2008 §6.3; KDD 2004 §6.3):
// words "containing more than one digit as well as those having fewer than
// four characters were removed". The lexicon builder, the I-Match signer
// and context hardening all use this one function, so the lexicon and the
// documents it is applied to agree on what a term is.
func IMatchTerm(t string) bool {
	// ASCII, as canonical tokens mostly are: a byte a character.
	digits := 0
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c >= utf8.RuneSelf {
			return imatchTermRunes(t)
		}
		digits += int(digitByte[c])
	}
	return digits <= 1 && len(t) >= 4
}

var digitByte = [256]uint8{'0': 1, '1': 1, '2': 1, '3': 1, '4': 1, '5': 1, '6': 1, '7': 1, '8': 1, '9': 1}

// imatchTermRunes is IMatchTerm for a term that is not all ASCII.
func imatchTermRunes(t string) bool {
	chars, digits := 0, 0
	for i := 0; i < len(t); {
		c := t[i]
		if c < utf8.RuneSelf {
			if '0' <= c && c <= '9' {
				digits++
				if digits > 1 {
					return false
				}
			}
			chars++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(t[i:])
		if unicode.IsDigit(r) {
			digits++
			if digits > 1 {
				return false
			}
		}
		chars++
		i += size
	}
	return chars >= 4
}
