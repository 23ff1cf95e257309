package signature

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/transform"
)

// Steps 5 to 7 of Canonicalize: case and diacritic folding, word
// segmentation, CJK bigrams and the stripped words.

// emitRunes finishes a chunk (steps 4 end, 5, 6): removes inner
// punctuation, folds case and diacritics, segments and emits tokens.
func (st *canonState) emitRunes(rs []rune) {
	out := st.out[:0]
	needFold := false
	prevBase := false // the previous kept rune is a Latin/Greek/Cyrillic letter
	prevCJK := false  // the previous kept rune is CJK: punctuation ends the run
	for _, r := range rs {
		switch {
		case r < 0x80:
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			if !('a' <= r && r <= 'z' || '0' <= r && r <= '9') {
				if prevCJK {
					out = append(out, ' ')
					prevCJK = false
				}
				continue // inner punctuation
			}
			out = append(out, byte(r))
			prevBase, prevCJK = r >= 'a', false
			continue
		case isMark(r):
			if prevBase {
				continue // a stray accent or "Zalgo" mark on a letter
			}
			out = utf8.AppendRune(out, r)
			continue
		case !unicode.IsLetter(r) && !unicode.IsNumber(r):
			if prevCJK || isCJKPunct(r) {
				out = append(out, ' ') // keeps CJK runs apart
				prevCJK = false
			}
			continue
		}
		r = foldRune(r, &needFold)
		if r >= 0xC0 && r < 0x2000 {
			if b := stripDiacritic[r-0xC0]; b != 0 {
				r = rune(b)
			}
		}
		sc := scriptOf(r)
		prevBase = sc == scLatin || sc == scGreek || sc == scCyrillic
		prevCJK = sc == scCJK
		out = utf8.AppendRune(out, r)
	}
	if needFold {
		out = st.fullFold(out)
	}
	// l and i are one class (Latin only: this is the ASCII l).
	for i, c := range out {
		if c == 'l' {
			out[i] = 'i'
		}
	}
	st.out = out
	st.segment(out)
}

// isCJKPunct reports punctuation that separates CJK runs.
func isCJKPunct(r rune) bool {
	return r >= 0x3000 && r < 0x3040 || r >= 0xFF00 && r < 0xFF10 || r == 0x0E2F || r == 0x0E5A || r == 0x0E5B
}

// foldRune lower-cases r with full case folding for the scripts below
// U+0590; it sets *full for runes that need golang.org/x/text's folding.
func foldRune(r rune, full *bool) rune {
	switch r {
	case 'ß', 'ẞ', 'İ', 'ŉ', 'ǰ', 'ΐ', 'ΰ', 'և':
		*full = true
		return r
	case 'ς':
		return 'σ'
	}
	if r < 0x590 {
		return unicode.ToLower(r)
	}
	*full = true
	return r
}

// fullFold applies Unicode full case folding (golang.org/x/text/cases) to
// b in place of the simple per-rune fold, then strips diacritics again.
func (st *canonState) fullFold(b []byte) []byte {
	st.fold.Reset()
	out, _, err := transform.Append(st.fold, st.tmp[:0], b)
	if err != nil {
		return b
	}
	st.tmp = out
	b = b[:0]
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRune(out[i:])
		i += n
		if r >= 0xC0 && r < 0x2000 {
			if d := stripDiacritic[r-0xC0]; d != 0 {
				r = rune(d)
			}
		}
		if isMark(r) && r < 0x370 {
			continue
		}
		b = utf8.AppendRune(b, r)
	}
	return b
}

// segment splits a canonical chunk into words (UAX #29) and emits them:
// CJK runs as bigrams, digit runs as "0", digit-only words dropped.
func (st *canonState) segment(b []byte) {
	if len(b) == 0 {
		return
	}
	ascii := true
	for _, c := range b {
		if c >= 0x80 || c == ' ' {
			ascii = false
			break
		}
	}
	if ascii {
		st.word(b)
		return
	}
	units := st.units[:0]
	st.it.SetText(b)
	for st.it.Next() {
		w := st.it.Value()
		r, _ := utf8.DecodeRune(w)
		if scriptOf(r) == scCJK {
			s := st.it.Start()
			units = append(units, [2]int{s, s + len(w)})
			continue
		}
		if !hasAlnum(w) {
			st.cjkRun(b, units)
			units = units[:0]
			continue
		}
		st.cjkRun(b, units)
		units = units[:0]
		st.word(w)
	}
	st.cjkRun(b, units)
	st.units = units[:0]
}

func hasAlnum(w []byte) bool {
	for i := 0; i < len(w); {
		if w[i] < 0x80 {
			if c := w[i]; 'a' <= c && c <= 'z' || '0' <= c && c <= '9' {
				return true
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(w[i:])
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			return true
		}
		i += n
	}
	return false
}

// cjkRun emits the bigrams of a run of CJK units (one unit alone is
// emitted as is).
func (st *canonState) cjkRun(b []byte, units [][2]int) {
	switch len(units) {
	case 0:
		return
	case 1:
		start := len(st.tok)
		st.tok = append(st.tok, b[units[0][0]:units[0][1]]...)
		st.refs = append(st.refs, tokRef{start: start, end: len(st.tok)})
		return
	}
	for i := 0; i+1 < len(units); i++ {
		start := len(st.tok)
		st.tok = append(st.tok, b[units[i][0]:units[i][1]]...)
		mid := len(st.tok)
		st.tok = append(st.tok, b[units[i+1][0]:units[i+1][1]]...)
		ref := tokRef{start: start, end: len(st.tok)}
		if i > 0 {
			ref.lskip = mid - start
		}
		st.refs = append(st.refs, ref)
	}
}

// word emits one word: digit runs become "0", digit-only words are
// dropped.
func (st *canonState) word(w []byte) {
	letters := false
	for i := 0; i < len(w); {
		if w[i] < 0x80 {
			if c := w[i]; 'a' <= c && c <= 'z' {
				letters = true
				break
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(w[i:])
		if unicode.IsLetter(r) {
			letters = true
			break
		}
		i += n
	}
	if !letters {
		if !st.stripping {
			st.stats.NonLetterRun++
		}
		return
	}
	start := len(st.tok)
	inDigits := false
	var prev rune // the last letter written, for doubled letters
	for i := 0; i < len(w); {
		r, n := rune(w[i]), 1
		if r >= 0x80 {
			r, n = utf8.DecodeRune(w[i:])
		}
		i += n
		if r < 0x80 && '0' <= r && r <= '9' || r >= 0x80 && unicode.IsDigit(r) {
			if !inDigits {
				st.tok = append(st.tok, '0')
				inDigits = true
			}
			continue
		}
		inDigits = false
		if r < 0x80 && !('a' <= r && r <= 'z') {
			continue // punctuation UAX #29 keeps inside words
		}
		if r >= 0x80 && !unicode.IsLetter(r) && !isMark(r) && !unicode.IsNumber(r) {
			continue
		}
		if r == prev {
			continue // doubled letter
		}
		prev = r
		st.tok = utf8.AppendRune(st.tok, r)
	}
	st.refs = append(st.refs, tokRef{start: start, end: len(st.tok)})
}

// buildStrip canonicalises the Strip words into st.strip.
func (st *canonState) buildStrip(strip []string) {
	st.stripping = true
	for _, s := range strip {
		n0 := len(st.refs)
		t0 := len(st.tok)
		// In the state, not an array on the stack: text's callees keep
		// the slice, so the array escaped, 256 bytes a Strip word.
		b, ascii := st.normalize(st.sbuf[:0], s)
		st.sbuf = b
		st.text(b, ascii)
		for _, r := range st.refs[n0:] {
			w := string(st.tok[r.start:r.end])
			if utf8.RuneCountInString(w) >= 2 {
				st.strip = append(st.strip, w)
				st.stripLens |= 1 << min(len(w), 63)
			}
		}
		st.refs = st.refs[:n0]
		st.tok = st.tok[:t0]
	}
	st.stripping = false
}

func (st *canonState) stripped(w []byte) bool {
	for _, s := range st.strip {
		if string(w) == s {
			return true
		}
	}
	return false
}
