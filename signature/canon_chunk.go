package signature

import (
	"unicode"
	"unicode/utf8"
)

// Steps 3 and 4 of Canonicalize: chunks, spaced letters, trimming, links,
// leetspeak, dates and mixed scripts.

// spaced joins a run of single-character chunks that spells words, split
// where the spacing widens. It reports false when the run is no such thing
// (fewer than three letters or digits).
func (st *canonState) spaced(b []byte, run []chunkRef) bool {
	alnum := 0
	for _, c := range run {
		if c.alnum {
			alnum++
		}
	}
	if len(run) < 3 || alnum < 3 {
		return false
	}
	minGap := run[1].gap
	for _, c := range run[1:] {
		minGap = min(minGap, c.gap)
	}
	for i := 0; i < len(run); {
		j := i + 1
		for j < len(run) && run[j].gap <= minGap {
			j++
		}
		sub := run[i:j]
		n := 0
		for _, c := range sub {
			if c.alnum {
				n++
			}
		}
		if n >= 2 && len(sub) >= 2 {
			st.join = st.join[:0]
			for _, c := range sub {
				st.join = append(st.join, b[c.start:c.end]...)
			}
			if !st.stripping {
				st.stats.Joined++
			}
			st.chunk(st.join)
		} else {
			for _, c := range sub {
				st.chunk(b[c.start:c.end])
			}
		}
		i = j
	}
	return true
}

// chunk canonicalises one whitespace-separated chunk (steps 4–6) and emits
// its tokens.
func (st *canonState) chunk(b []byte) {
	if st.fastChunk(b) {
		return
	}
	rs := st.rs[:0]
	for i := 0; i < len(b); {
		if c := b[i]; c < utf8.RuneSelf {
			rs = append(rs, rune(c))
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		rs = append(rs, r)
		i += n
	}
	st.rs = rs
	rs = trimChunk(rs)
	if len(rs) == 0 || isLinkChunk(rs) {
		return
	}
	if rs[0] == 'ß' && len(rs) > 1 && unicode.IsLetter(rs[1]) {
		rs[0] = 'B' // no word begins with ß: it stands for B ("ßritish")
	}
	changed := false
	var letters, nl, nc, ng, nother, cand int
	for _, r := range rs {
		switch scriptOf(r) {
		case scNone:
			if leetLetter(r) != 0 || r == '\\' || r == '/' || r == '(' || r == '[' || r == '<' || r == '>' || r == '}' || r == '_' || r == '-' {
				cand++
			}
			continue
		case scLatin:
			nl++
		case scCyrillic:
			nc++
		case scGreek:
			ng++
		case scCJK:
			nother++
		default:
			if toASCII(r) != 0 {
				nother++ // Armenian, Cherokee… lookalikes
			}
		}
		letters++
	}
	// Leetspeak needs a letter and a word's length: "\\/1@9r@" has one
	// letter, "$5" none.
	if letters >= 1 && cand > 0 && letters+cand >= 3 && !isDate(rs) {
		rs, changed = readLeet(rs)
	}
	leet := changed
	// Target script: the majority of the chunk's letters, ties going to
	// the document's dominant script. A chunk that mixes scripts folds to
	// the dominant script whenever all its letters can be read in it: a
	// sender may replace most letters of a word ("Аmеrіса").
	target := scLatin
	switch {
	case nc > nl && nc >= ng:
		target = scCyrillic
	case ng > nl && ng > nc:
		target = scGreek
	case nl == 0 && nc == 0 && ng == 0:
		target = scNone
	case nl == nc && nl > 0 || nl == ng && nl > 0:
		target = st.dominant
	}
	// Leetspeak yields Latin letters, which a Cyrillic or Greek word
	// folds back into its own script.
	mixed := (nl > 0) && (nc > 0 || ng > 0) || nc > 0 && ng > 0 || nother > 0 && nl+nc+ng > 0 || leet && nc+ng > 0
	if mixed && target != st.dominant && convertible(rs, st.dominant) {
		target = st.dominant
	}
	switch {
	case target == scLatin:
		for i, r := range rs {
			if r >= 0x80 {
				if c := toASCII(r); c != 0 {
					rs[i] = rune(c)
					changed = true
				}
			}
		}
	case (target == scCyrillic || target == scGreek) && mixed:
		rev := lookalikes(target)
		for i, r := range rs {
			sc := scriptOf(r)
			if sc == target || sc == scNone && r >= 0x80 {
				continue
			}
			if c := latinOf(r); c != 0 && rev[c] != 0 {
				rs[i] = rev[c]
				changed = true
			}
		}
	case (target == scCyrillic || target == scGreek) && st.latinContext():
		// A word wholly in lookalikes inside a Latin text.
		all := true
		for _, r := range rs {
			if scriptOf(r) != scNone && toASCII(r) == 0 {
				all = false
				break
			}
		}
		if all {
			for i, r := range rs {
				if c := toASCII(r); c != 0 {
					rs[i] = rune(c)
				}
			}
			changed = true
		}
	}
	if changed && !st.stripping {
		st.stats.Folded++
	}
	st.emitRunes(rs)
}

// convertible reports whether every letter of rs is of script t or has a
// lookalike in it.
func convertible(rs []rune, t uint8) bool {
	rev := lookalikes(t)
	for _, r := range rs {
		sc := scriptOf(r)
		if sc == scNone || sc == t {
			continue
		}
		if c := latinOf(r); c == 0 || t != scLatin && rev[c] == 0 {
			return false
		}
	}
	return true
}

// lookalikes is the table of script t's (Cyrillic's unless Greek)
// lookalikes of the ASCII letters.
func lookalikes(t uint8) *[128]rune {
	if t == scGreek {
		return &latinToGreek
	}
	return &latinToCyrillic
}

// latinOf returns r if it is ASCII, else the ASCII letter it looks like,
// or 0.
func latinOf(r rune) byte {
	if r < 0x80 {
		return byte(r)
	}
	return toASCII(r)
}

// ASCII byte classes for fastChunk.
const (
	acPunct = iota // punctuation: trimmed or removed
	acLower
	acUpper
	acDigit
	acSlow  // may be leetspeak or a link: the general path decides
	acInner // leetspeak only between two letters or digits: '!', '+'
	acPair  // starts a two-character drawing or a link with the next byte
	acHigh  // not ASCII
)

var asciiClass = func() (t [256]uint8) {
	for c := 0x80; c < 256; c++ {
		t[c] = acHigh
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = acLower
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = acUpper
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = acDigit
	}
	for _, c := range "@$|\\" {
		t[c] = acSlow
	}
	t['!'], t['+'] = acInner, acInner
	for _, c := range "([>}/:" {
		t[c] = acPair
	}
	return t
}()

// pairClose is the byte that, after an acPair byte, makes a drawing
// ("()", "[]", "><", "}{", "/\\") or a link ("://").
var pairClose = [256]byte{'(': ')', '[': ']', '>': '<', '}': '{', '/': '\\', ':': '/'}

// fastChunk handles the common all-ASCII chunk without leetspeak or links:
// punctuation dropped, lower-cased, l folded into i, digit-only chunks
// dropped. It returns false when the general path must decide.
func (st *canonState) fastChunk(b []byte) bool {
	if len(b) > 4 && (b[0]|0x20) == 'w' && (b[1]|0x20) == 'w' && (b[2]|0x20) == 'w' && b[3] == '.' {
		return false // a link
	}
	letters, digits := 0, 0
	for i, c := range b {
		switch asciiClass[c] {
		case acLower, acUpper:
			letters++
		case acDigit:
			digits++
		case acHigh, acSlow:
			return false
		case acInner:
			if i > 0 && i+1 < len(b) && asciiClass[b[i-1]]-acLower < 3 && asciiClass[b[i+1]]-acLower < 3 {
				return false
			}
			if i == 0 && c == '!' && len(b) > 1 && asciiClass[b[1]]-acLower < 2 {
				return false // "!mprove": maybe leetspeak
			}
		case acPair:
			if i+1 < len(b) && b[i+1] == pairClose[c] {
				return false
			}
		}
	}
	if letters == 0 {
		if digits > 0 && !st.stripping {
			st.stats.NonLetterRun++
		}
		return true
	}
	if digits > 0 {
		return false // letters and digits: maybe leetspeak
	}
	start := len(st.tok)
	for _, c := range b {
		switch asciiClass[c] {
		case acUpper:
			c += 'a' - 'A'
			fallthrough
		case acLower:
			if c == 'l' {
				c = 'i'
			}
			if len(st.tok) > start && st.tok[len(st.tok)-1] == c {
				continue // doubled letter
			}
			st.tok = append(st.tok, c)
		}
	}
	st.refs = append(st.refs, tokRef{start: start, end: len(st.tok)})
	return true
}

// trimChunk removes punctuation around a chunk, keeping symbols that can
// be letters there ("$ale", "viagr@", a lone "!" before a letter:
// "!mprove", not "!!!free").
func trimChunk(rs []rune) []rune {
	if len(rs) > 1 && rs[0] == '!' && isAlphaLetter(rs[1]) {
		return trimEnd(rs)
	}
	for len(rs) > 0 {
		r := rs[0]
		if isAlnumRune(r) || isMark(r) || leetEdgeStart(r) || r == '|' || r == '\\' || r == '/' && len(rs) > 1 && rs[1] == '\\' {
			break
		}
		rs = rs[1:]
	}
	return trimEnd(rs)
}

func trimEnd(rs []rune) []rune {
	for len(rs) > 0 {
		r := rs[len(rs)-1]
		if isAlnumRune(r) || isMark(r) || leetEdgeEnd(r) || r == '/' || r == '|' || r == ')' && len(rs) > 1 && rs[len(rs)-2] == '|' {
			break
		}
		rs = rs[:len(rs)-1]
	}
	return rs
}

func isAlnumRune(r rune) bool {
	if r < 0x80 {
		return 'a' <= r|0x20 && r|0x20 <= 'z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// isLinkChunk reports URLs and e-mail addresses.
func isLinkChunk(rs []rune) bool {
	at, dotAfterAt := -1, false
	for i, r := range rs {
		switch r {
		case ':':
			if i+2 < len(rs) && rs[i+1] == '/' && rs[i+2] == '/' {
				return true
			}
		case '@':
			if at < 0 && i > 0 {
				at = i
			}
		case '.':
			if at >= 0 && i > at+1 && i+1 < len(rs) {
				dotAfterAt = true
			}
		}
	}
	if at > 0 && dotAfterAt {
		return true
	}
	if len(rs) > 4 && (rs[0]|0x20) == 'w' && (rs[1]|0x20) == 'w' && (rs[2]|0x20) == 'w' && rs[3] == '.' {
		return true
	}
	return false
}

// readLeet reads digits and symbols drawn as letters. A run of up to four
// such characters becomes letters when letters stand on both sides
// ("v1@gra", "he11o", "c0n501!dation"). A word with such a run, with a
// multi-character drawing, or with one such character at each edge
// ("1as7") is written in leetspeak: its edge runs of up to three are
// letters too ("7h!nk1n9", "ra7e5"). Otherwise an edge run is
// read when it holds a symbol that begins or ends words in that style and
// at most one digit ("$ale", "viagr@", "cial1$"), or is letter-shaped
// digits beside enough letters (edgeRun: "emai1", "0rder", "7housands",
// "10west", "cred17"), so that numbers with a unit ("10mg", "5pm",
// "10usd") keep their digits.
func readLeet(rs []rune) ([]rune, bool) {
	changed := false
	inLeet := false // a drawing or a run between letters was read
	// Multi-character drawings first: "|<" → k, "\/" → v.
	for i := 0; i < len(rs); i++ {
		switch rs[i] {
		case '|', '/', '\\', '(', '[', '}', '>':
		default:
			continue // no drawing starts here
		}
		for _, sq := range leetSeqs {
			n := len(sq.s)
			if rune(sq.s[0]) != rs[i] || i+n > len(rs) || !matchSeq(rs[i:i+n], sq.s) {
				continue
			}
			left := i > 0 && (isAlnumRune(rs[i-1]) || leetLetter(rs[i-1]) != 0)
			right := i+n < len(rs) && (isAlnumRune(rs[i+n]) || leetLetter(rs[i+n]) != 0)
			if !left && !right {
				continue
			}
			rs[i] = rune(sq.c)
			rs = append(rs[:i+1], rs[i+n:]...)
			changed, inLeet = true, true
			break
		}
	}
	// Other punctuation inside the word goes before symbols are read, so
	// that "v-i-@-g-r-@" reads like "vi@gr@".
	k := 0
	for _, r := range rs {
		if r < 0x80 && leetLetter(r) == 0 && !('a' <= r|0x20 && r|0x20 <= 'z' || '0' <= r && r <= '9') {
			continue
		}
		if r >= 0x80 && leetLetter(r) == 0 && !unicode.IsLetter(r) && !unicode.IsNumber(r) && !isMark(r) {
			continue
		}
		rs[k] = r
		k++
	}
	rs = rs[:k]
	// Runs between letters first, then runs at the edges, which need to
	// know how many letters the word has.
	for pass := 0; pass < 2; pass++ {
		letters := 0
		for _, r := range rs {
			if unicode.IsLetter(r) {
				letters++
			}
		}
		if pass == 1 && letters > 0 && len(rs) > 3 && leetLetter(rs[0]) != 0 && leetLetter(rs[len(rs)-1]) != 0 &&
			isAlphaLetter(rs[1]) && isAlphaLetter(rs[len(rs)-2]) {
			// One leet character at each edge: "1as7", "!nt0" ("10may03" and
			// "1.0rc1" are a date and a version).
			inLeet = true
		}
		for i := 0; i < len(rs); {
			if leetLetter(rs[i]) == 0 {
				i++
				continue
			}
			j := i
			for j < len(rs) && leetLetter(rs[j]) != 0 {
				j++
			}
			run := rs[i:j]
			leftLetter := i > 0 && isAlphaLetter(rs[i-1])
			rightLetter := j < len(rs) && isAlphaLetter(rs[j])
			ok := false
			switch {
			case len(run) > 4:
			case pass == 0:
				ok = leftLetter && rightLetter
				inLeet = inLeet || ok
			case i == 0 && rightLetter:
				ok = edgeRun(run, leetEdgeStart, letters, false, inLeet)
			case j == len(rs) && leftLetter:
				ok = edgeRun(run, leetEdgeEnd, letters, true, inLeet)
			}
			if ok {
				for k := i; k < j; k++ {
					rs[k] = rune(leetLetter(rs[k]))
				}
				changed = true
			}
			i = j
		}
	}
	return rs, changed
}

// months are the English month names and abbreviations: a chunk of digits
// around one of them is a date ("10May03", "15-Jun-2024"), not leetspeak.
var months = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
	"january", "february", "march", "april", "june", "july", "august", "september", "october", "november", "december"}

// isDate reports a chunk made of ASCII digits, punctuation and one month
// name.
func isDate(rs []rune) bool {
	var name [9]byte
	n, digits := 0, 0
	for i, r := range rs {
		switch {
		case '0' <= r && r <= '9':
			digits++
		case 'a' <= r|0x20 && r|0x20 <= 'z':
			if n == len(name) || n > 0 && !('a' <= rs[i-1]|0x20 && rs[i-1]|0x20 <= 'z') {
				return false // too long, or a second word
			}
			name[n] = byte(r | 0x20)
			n++
		case r >= 0x80:
			return false
		}
	}
	if digits == 0 || n < 3 {
		return false
	}
	for _, m := range months {
		if m == string(name[:n]) {
			return true
		}
	}
	return false
}

// edgeRun decides whether a run of leet characters at the edge of a word
// of the given number of letters is letters. In a word already read as
// leetspeak (inLeet), any run of up to three is. Otherwise a run holding a
// symbol allowed at that edge and at most one digit is ("bu¥", "c!@l!$"),
// and so is a "!" before three letters or more ("!mprove"). Digits: at the
// end of a word up to three ("emai1", "bu7", "cred17", "ra735"); at the
// start, where a number and its unit or ordinal are common ("5pm", "3rd",
// "10mg", "10usd"), one before three letters or more ("7housands"), two
// before four or more ("10west"), or a 0 before two ("0ur": numbers do not
// begin with 0).
func edgeRun(run []rune, edge func(rune) bool, letters int, atEnd, inLeet bool) bool {
	if letters < 2 {
		return false
	}
	if inLeet {
		return len(run) <= 3
	}
	if allDigits(run) {
		if atEnd {
			switch len(run) {
			case 1, 2, 3:
				return true
			}
			return false
		}
		switch len(run) {
		case 1:
			return letters >= 3 || run[0] == '0'
		case 2:
			return letters >= 4
		}
		return false
	}
	if !atEnd && len(run) == 1 && run[0] == '!' {
		return letters >= 3
	}
	digits, symbol := 0, false
	for _, r := range run {
		switch {
		case '0' <= r && r <= '9':
			digits++
		case edge(r):
			symbol = true
		}
	}
	return symbol && digits <= 1
}

// allDigits reports a run of digits only.
func allDigits(run []rune) bool {
	for _, r := range run {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// isAlphaLetter reports letters of alphabetic scripts: leetspeak is read
// between those, not next to Han or kana ("は30OFF" is a number).
func isAlphaLetter(r rune) bool {
	if r < 0x80 {
		return 'a' <= r|0x20 && r|0x20 <= 'z'
	}
	return unicode.IsLetter(r) && !isCJK(r)
}

func matchSeq(rs []rune, s string) bool {
	for i := 0; i < len(s); i++ {
		if rs[i] != rune(s[i]) {
			return false
		}
	}
	return true
}
