package signature

//go:generate go run ./internal/confgen

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/clipperhouse/uax29/v2/words"
	"golang.org/x/net/idna"
	"golang.org/x/text/cases"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// CanonVersion identifies the canonical form. It is bumped whenever
// Canonicalize changes its output for some input, so that stored counts of
// the old form never mix with the new one. The Unicode tables of
// golang.org/x/text (NFKC, case folding) follow the Go toolchain: a
// toolchain that moves to a newer Unicode version changes the output for
// newly assigned characters too. Version 2 reads leetspeak at word starts
// and ends and in runs of four ("7housands", "cred17", "c0n501!dation")
// and keeps ordinals and times ("3rd", "5pm") as numbers.
const CanonVersion = 2

// Canonicalize folds the text a reader sees into the canonical form every
// Signer consumes. The steps, for each text (the Subject, then each part):
//
//  1. Format and other default-ignorable characters (zero-width space and
//     joiners, soft hyphen, bidi controls, variation selectors, tag
//     characters) are removed; text under a right-to-left override is
//     reversed as it is displayed; blank-looking fillers become spaces.
//  2. NFKC: fullwidth, mathematical, circled and other compatibility forms
//     become their plain letters.
//  3. The text is split into whitespace-separated chunks. Three or more
//     single-character chunks in a row are letters spaced apart
//     ("V i a g r a", "V - I - A"): they are joined, split where the
//     spacing widens ("F R E E  M O N E Y" is two words).
//  4. Each chunk is cleaned: punctuation around it is trimmed; links and
//     e-mail addresses are dropped (link domains are features of their
//     own); letters drawn with digits and symbols are read as letters when
//     they sit among letters or begin or end a word written that way
//     ("v1@gr@", "$ale", "7h!nk", "|<", "\/"; see readLeet); a chunk whose
//     letters mix scripts is folded to its majority script through the
//     Unicode confusables table ("Рaypal" with a Cyrillic Р becomes
//     "paypal", "cкидка" with a Latin c becomes "скидка"); a chunk written
//     wholly in Cyrillic or Greek lookalikes inside a Latin text is folded
//     to Latin; Latin lookalike letters (ɑ, ı, small capitals) are always
//     folded. A chunk in one script only is left alone, so plain Russian or
//     Greek stays Russian or Greek. Punctuation inside a chunk is removed
//     ("e-mail", "Vi.agra", "Vi*agra").
//  5. Full case folding; diacritics are removed from Latin, Greek and
//     Cyrillic letters (except й and ў) and stray combining marks
//     dropped; in Latin letters, l is folded into i (I, l, 1 and | are one
//     glyph class in print; the canonical form keeps one of them).
//  6. UAX #29 word segmentation. Runs of Han, Hiragana, Thai, Lao, Khmer or
//     Myanmar characters, which are written without spaces, become
//     overlapping character bigrams. Digit runs inside a word become "0";
//     words made only of digits (prices, ids, dates) are dropped.
//  7. Words that canonicalise to a word of Source.Strip are removed.
//
// Letters is the concatenation of the words (each CJK run once, not its
// bigrams): inserting or removing spaces does not change it. Domains are
// lower-cased, converted to ASCII and deduplicated.
func Canonicalize(src Source) *Doc {
	st := statePool.Get().(*canonState)
	defer st.release()
	st.reset()

	// Normalise every text first: the document's dominant script decides
	// how ambiguous chunks are folded.
	st.addText(src.Subject)
	for _, p := range src.Parts {
		st.addText(p)
	}
	st.countScripts()

	if len(src.Strip) > 0 {
		st.buildStrip(src.Strip)
	}
	for _, sp := range st.spans {
		st.text(st.norm[sp[0]:sp[1]])
	}
	return st.doc(src.Domains)
}

// canonState is the scratch space of one Canonicalize call, pooled.
type canonState struct {
	norm   []byte   // normalised texts, concatenated
	spans  [][2]int // each text in norm
	tmp    []byte
	rs     []rune
	out    []byte // one chunk, canonical
	join   []byte
	chunks []chunkRef
	tok    []byte // every token, concatenated
	refs   []tokRef
	units  [][2]int // CJK units of the current run, in out
	strip  []string
	it     *words.Iterator[[]byte]
	fold   cases.Caser
	stats  DocStats

	latin, cyrillic, greek int
	dominant               uint8
	stripping              bool // building the Strip set: no stats
}

// chunkRef is a single-character chunk of a possible run of spaced letters.
type chunkRef struct {
	start, end int
	gap        int  // width of the whitespace before the chunk (a line break counts two)
	alnum      bool // the character is a letter (or a digit of another script)
}

// tokRef is a token in st.tok; its first lskip bytes are not part of the
// letters stream (the first character of a CJK bigram after the first).
type tokRef struct{ start, end, lskip int }

var statePool = sync.Pool{New: func() any {
	return &canonState{it: words.FromBytes(nil), fold: cases.Fold()}
}}

func (st *canonState) reset() {
	st.norm, st.spans = st.norm[:0], st.spans[:0]
	st.tok, st.refs = st.tok[:0], st.refs[:0]
	st.strip = st.strip[:0]
	st.stats = DocStats{}
	st.latin, st.cyrillic, st.greek = 0, 0, 0
	st.dominant = scLatin
	st.stripping = false
}

func (st *canonState) release() {
	const big = 1 << 20
	if cap(st.norm) > big || cap(st.tok) > big {
		st.norm, st.tok, st.tmp, st.out, st.join = nil, nil, nil, nil, nil
		st.refs, st.chunks, st.rs = nil, nil, nil
	}
	statePool.Put(st)
}

// addText normalises s (steps 1–2) onto st.norm.
func (st *canonState) addText(s string) {
	start := len(st.norm)
	st.norm = st.normalize(st.norm, s)
	st.spans = append(st.spans, [2]int{start, len(st.norm)})
}

// normalize appends s to dst without ignorable characters, with control
// characters and blank fillers as spaces, overrides applied, in NFKC. It
// counts the letters of each script on the way (not for Strip words).
func (st *canonState) normalize(dst []byte, s string) []byte {
	// ASCII, the common case: copy, then blank out control characters.
	start := len(dst)
	dst = append(dst, s...)
	latin := 0
	for i := start; i < len(dst); i++ {
		c := dst[i]
		latin += int(letterByte[c])
		if c < 0x20 || c >= 0x7F {
			if c >= 0x80 {
				dst = dst[:start]
				return st.normalizeSlow(dst, s)
			}
			if c != '\n' && c != '\t' {
				dst[i] = ' '
			}
		}
	}
	if !st.stripping {
		st.latin += latin
	}
	return dst
}

func (st *canonState) normalizeSlow(dst []byte, s string) []byte {
	t := st.tmp[:0]
	for i := 0; i < len(s); {
		if c := s[i]; c < 0x80 {
			switch asciiClass[c] {
			case acLower, acUpper:
				if !st.stripping {
					st.latin++
				}
			case acPunct:
				if c < 0x20 && c != '\n' && c != '\t' || c == 0x7F {
					c = ' '
				}
			}
			t = append(t, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == utf8.RuneError && n == 1:
			t = append(t, ' ')
		case r == '\n' || r == '\t':
			t = append(t, byte(r))
		case r < 0x20 || r == 0x7F || r >= 0x80 && r < 0xA0:
			t = append(t, ' ')
		case r == 0x202E: // RIGHT-TO-LEFT OVERRIDE: shown reversed
			end := len(s)
			if j := strings.IndexAny(s[i:], "\u202C\n"); j >= 0 {
				end = i + j
			}
			t = appendReversed(t, s[i:end])
			st.removed(1)
			i = end
		case isIgnorable(r):
			st.removed(1)
		case isBlankRune(r):
			t = append(t, ' ')
		case r == 0x2122 || r == 0x2120 || r == 0x2121:
			// ™ ℠ ℡: symbols whose NFKC is letters ("Cialis™" is not
			// "cialistm").
		case r >= 0x1F150 && r <= 0x1F169:
			// Negative circled, negative squared letters and regional
			// indicators: "fancy text" letters NFKC leaves alone.
			t = append(t, byte('A'+r-0x1F150))
		case r >= 0x1F170 && r <= 0x1F189:
			t = append(t, byte('A'+r-0x1F170))
		case r >= 0x1F1E6 && r <= 0x1F1FF:
			t = append(t, byte('A'+r-0x1F1E6))
		default:
			if !st.stripping {
				switch scriptOf(r) {
				case scLatin:
					st.latin++
				case scCyrillic:
					st.cyrillic++
				case scGreek:
					st.greek++
				}
			}
			t = utf8.AppendRune(t, r)
		}
	}
	st.tmp = t
	return norm.NFKC.Append(dst, t...)
}

func (st *canonState) removed(n int) {
	if !st.stripping {
		st.stats.Removed += n
	}
}

// appendReversed appends the visible characters of s in reverse order.
func appendReversed(dst []byte, s string) []byte {
	var buf [64]rune
	rs := buf[:0]
	for _, r := range s {
		if !isIgnorable(r) {
			rs = append(rs, r)
		}
	}
	for i := len(rs) - 1; i >= 0; i-- {
		dst = utf8.AppendRune(dst, rs[i])
	}
	return dst
}

// countScripts picks the dominant script from the letters normalize
// counted.
func (st *canonState) countScripts() {
	st.dominant = scLatin
	if st.cyrillic > st.latin && st.cyrillic >= st.greek {
		st.dominant = scCyrillic
	} else if st.greek > st.latin && st.greek > st.cyrillic {
		st.dominant = scGreek
	}
}

// latinContext reports a text that is clearly Latin, where a word written
// wholly in Cyrillic or Greek lookalikes is a disguise.
func (st *canonState) latinContext() bool {
	return st.latin > 2*(st.cyrillic+st.greek)
}

// text canonicalises one normalised text (steps 3–6).
func (st *canonState) text(b []byte) {
	run := st.chunks[:0] // single-character chunks waiting: maybe spaced letters
	flush := func() {
		if len(run) == 0 {
			return
		}
		if !st.spaced(b, run) {
			for _, c := range run {
				st.chunk(b[c.start:c.end])
			}
		}
		run = run[:0]
	}
	gap := 0
	for i := 0; i < len(b); {
		c := b[i]
		if isSpace[c] {
			gap++
			if c == '\n' {
				gap++ // a line break is a wider gap than a space
			}
			i++
			continue
		}
		if c >= 0x80 {
			r, n := utf8.DecodeRune(b[i:])
			if unicode.IsSpace(r) {
				gap++
				if r == 0x2028 || r == 0x2029 || r == 0x85 {
					gap++
				}
				i += n
				continue
			}
		}
		start := i
		letters := true // only ASCII letters so far: the commonest word
		for i < len(b) {
			c := b[i]
			if k := wordClass[c]; k != wcHigh {
				if k == wcSpace {
					break
				}
				letters = letters && k == wcLetter
				i++
				continue
			}
			letters = false
			r, n := utf8.DecodeRune(b[i:])
			if unicode.IsSpace(r) {
				break
			}
			i += n
		}
		g := gap
		gap = 0
		if i-start <= utf8.UTFMax {
			// A single character, unless it is a digit: a lone digit is a
			// number, and reading it as a letter of spaced-apart letters
			// would make the letters stream depend on stray spaces ("saw a
			// 3 hour" split as "sa w a 3 h our").
			r, n := utf8.DecodeRune(b[start:i])
			if n == i-start && scriptOf(r) != scCJK && !('0' <= r && r <= '9') {
				run = append(run, chunkRef{start: start, end: i, gap: g,
					alnum: unicode.IsLetter(r) || unicode.IsDigit(r)})
				continue
			}
		}
		flush()
		w := b[start:i]
		if letters && !(len(w) > 4 && (w[0]|0x20) == 'w' && (w[1]|0x20) == 'w' && (w[2]|0x20) == 'w') {
			st.asciiWord(w)
		} else {
			st.chunk(w)
		}
	}
	flush()
	st.chunks = run[:0]
}

var isSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true, '\f': true, '\v': true}

// letterByte is 1 for ASCII letters.
var letterByte = func() (t [256]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = 1, 1
	}
	return t
}()

// wordClass classifies bytes for the chunk scanner in one lookup.
const (
	wcOther = iota
	wcLetter
	wcSpace
	wcHigh
)

var wordClass = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		switch {
		case c >= 0x80:
			t[c] = wcHigh
		case isSpace[c]:
			t[c] = wcSpace
		case 'a' <= c|0x20 && c|0x20 <= 'z':
			t[c] = wcLetter
		}
	}
	return t
}()

// asciiWord emits a chunk of ASCII letters only: lower-cased, l folded
// into i.
func (st *canonState) asciiWord(w []byte) {
	start := len(st.tok)
	st.tok = append(st.tok, w...)
	out := st.tok[start:]
	n := 0
	for _, c := range out {
		c |= 0x20
		if c == 'l' {
			c = 'i'
		}
		if n > 0 && out[n-1] == c {
			continue // doubled letter
		}
		out[n] = c
		n++
	}
	st.tok = st.tok[:start+n]
	st.refs = append(st.refs, tokRef{start: start, end: len(st.tok)})
}

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
		rev := &latinToCyrillic
		if target == scGreek {
			rev = &latinToGreek
		}
		for i, r := range rs {
			sc := scriptOf(r)
			if sc == target || sc == scNone && r >= 0x80 {
				continue
			}
			c := byte(0)
			if r < 0x80 {
				c = byte(r)
			} else {
				c = toASCII(r)
			}
			if c != 0 && rev[c] != 0 {
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
	rev := &latinToCyrillic
	if t == scGreek {
		rev = &latinToGreek
	}
	for _, r := range rs {
		sc := scriptOf(r)
		if sc == scNone || sc == t {
			continue
		}
		c := byte(0)
		if r < 0x80 {
			c = byte(r)
		} else {
			c = toASCII(r)
		}
		if c == 0 || t != scLatin && rev[c] == 0 {
			return false
		}
	}
	return true
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
			if i+n > len(rs) || !matchSeq(rs[i:i+n], sq.s) {
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
		var buf [256]byte
		b := st.normalize(buf[:0], s)
		st.text(b)
		for _, r := range st.refs[n0:] {
			w := string(st.tok[r.start:r.end])
			if utf8.RuneCountInString(w) >= 2 {
				st.strip = append(st.strip, w)
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

// doc assembles the result.
func (st *canonState) doc(domains []string) *Doc {
	d := &Doc{}
	// One string for all tokens; each token is a slice of it. The tokens
	// lie end to end in it, so it is the letters stream too, unless a
	// token was stripped, a CJK bigram repeats a character, or a letter
	// ends one token and begins the next (letters collapse doubled
	// letters across words too, so that a space inside "tif f" changes
	// nothing).
	all := string(st.tok)
	d.Tokens = make([]string, 0, len(st.refs))
	contiguous := true
	prev := ""
	for _, r := range st.refs {
		tok := all[r.start:r.end]
		if len(st.strip) > 0 && st.stripped(st.tok[r.start:r.end]) {
			st.stats.Stripped++
			contiguous = false
			continue
		}
		if r.lskip > 0 || prev != "" && boundaryDouble(prev, tok) {
			contiguous = false
		}
		d.Tokens = append(d.Tokens, tok)
		prev = tok
	}
	if contiguous {
		d.Letters = all
	} else {
		letters := make([]byte, 0, len(all))
		last := ""
		for _, r := range st.refs {
			if len(st.strip) > 0 && st.stripped(st.tok[r.start:r.end]) {
				continue
			}
			part := all[r.start+r.lskip : r.end]
			if last != "" && boundaryDouble(last, part) {
				_, n := utf8.DecodeRuneInString(part)
				part = part[n:]
			}
			letters = append(letters, part...)
			if part != "" {
				last = part
			}
		}
		d.Letters = string(letters)
	}
	d.Domains = canonDomains(domains)
	st.stats.Words = len(d.Tokens)
	d.Stats = st.stats
	return d
}

// boundaryDouble reports whether a ends with the letter b begins with (not
// a CJK character: those repeat on purpose, 谢谢).
func boundaryDouble(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if a[len(a)-1] < 0x80 && b[0] < 0x80 {
		return a[len(a)-1] == b[0]
	}
	r1, _ := utf8.DecodeLastRuneInString(a)
	r2, _ := utf8.DecodeRuneInString(b)
	return r1 == r2 && !isCJK(r1)
}

// canonDomains lower-cases domains, converts them to ASCII (punycode) and
// keeps each once, in order.
func canonDomains(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := make([]string, 0, len(in))
	for _, d := range in {
		d = strings.TrimRight(strings.ToLower(strings.TrimSpace(d)), ".")
		if d == "" {
			continue
		}
		if !isASCIIStr(d) {
			a, err := idna.Lookup.ToASCII(d)
			if err != nil {
				continue
			}
			d = a
		}
		dup := false
		for _, o := range out {
			if o == d {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, d)
		}
	}
	return out
}

func isASCIIStr(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
