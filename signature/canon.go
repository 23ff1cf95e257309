package signature

//go:generate go run ./internal/confgen

import (
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/clipperhouse/uax29/v2/words"
	"golang.org/x/net/idna"
	"golang.org/x/text/cases"
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
	for i, sp := range st.spans {
		b := st.norm[sp.start:sp.end]
		mark := LinePart
		if i == 0 {
			mark |= LineSubject
		}
		st.line(mark | lineMark(b))
		st.text(b, sp.ascii)
		if i == 0 {
			st.subjRefs = len(st.refs)
		}
	}
	d := st.doc(src.Domains)
	d.Attachments = src.Attachments
	d.Images = src.Images
	return d
}

// canonState is the scratch space of one Canonicalize call, pooled.
type canonState struct {
	norm    []byte // normalised texts, concatenated
	spans   []span // each text in norm
	tmp     []byte
	sbuf    []byte // a Strip word, normalised (buildStrip)
	rs      []rune
	out     []byte // one chunk, canonical
	join    []byte
	chunks  []chunkRef
	letters []byte // the letters stream when it is not the tokens end to end
	tok     []byte // every token, concatenated
	refs    []tokRef
	// subjRefs is the number of refs the Subject (the first span) gave.
	subjRefs int
	units    [][2]int // CJK units of the current run, in out
	lines    []Line   // Start is an index of refs until doc
	strip    []string
	// stripLens has bit n set for a Strip word of n bytes (63: 63 or
	// more): most tokens need no comparison with them.
	stripLens uint64
	it        *words.Iterator[[]byte]
	fold      cases.Caser
	stats     DocStats

	latin, cyrillic, greek int
	latinCounted           bool // the letters of the ASCII spans are in latin
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
	st.lines = st.lines[:0]
	st.strip, st.stripLens = st.strip[:0], 0
	st.stats = DocStats{}
	st.latin, st.cyrillic, st.greek = 0, 0, 0
	st.latinCounted = false
	st.dominant = scLatin
	st.stripping = false
}

func (st *canonState) release() {
	const big = 1 << 20
	if cap(st.norm) > big || cap(st.tok) > big {
		st.norm, st.tok, st.tmp, st.sbuf, st.out, st.join, st.letters = nil, nil, nil, nil, nil, nil, nil
		st.refs, st.chunks, st.rs, st.lines = nil, nil, nil, nil
	}
	statePool.Put(st)
}

// span is a text in st.norm; ascii says it is ASCII only, and that
// normalize did not count its letters.
type span struct {
	start, end int
	ascii      bool
}

// addText normalises s (steps 1–2) onto st.norm.
func (st *canonState) addText(s string) {
	start := len(st.norm)
	var ascii bool
	st.norm, ascii = st.normalize(st.norm, s)
	st.spans = append(st.spans, span{start, len(st.norm), ascii})
}

// normalize appends s to dst without ignorable characters, with control
// characters and blank fillers as spaces, overrides applied, in NFKC. It
// counts the letters of each script on the way (not for Strip words),
// but for ASCII text, the common case, which it copies as it is
// (ascii): the chunk scanner reads its control characters as spaces
// (wordClassASCII), and its Latin letters are counted only if the
// document has letters of another script (countLatin).
func (st *canonState) normalize(dst []byte, s string) (out []byte, ascii bool) {
	if !isASCII(s) {
		return st.normalizeSlow(dst, s), false
	}
	return append(dst, s...), true
}

// isASCII reports whether s is ASCII only, eight bytes a step.
func isASCII(s string) bool {
	for len(s) >= 8 {
		lo := uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
		hi := uint32(s[4]) | uint32(s[5])<<8 | uint32(s[6])<<16 | uint32(s[7])<<24
		if (lo|hi)&0x80808080 != 0 {
			return false
		}
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
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
	if st.cyrillic == 0 && st.greek == 0 {
		return // Latin however many letters it has
	}
	st.countLatin()
	if st.cyrillic > st.latin && st.cyrillic >= st.greek {
		st.dominant = scCyrillic
	} else if st.greek > st.latin && st.greek > st.cyrillic {
		st.dominant = scGreek
	}
}

// countLatin adds the letters of the ASCII texts to latin, once.
func (st *canonState) countLatin() {
	if st.latinCounted {
		return
	}
	st.latinCounted = true
	for _, sp := range st.spans {
		if sp.ascii {
			for _, c := range st.norm[sp.start:sp.end] {
				st.latin += int(letterByte[c])
			}
		}
	}
}

// latinContext reports a text that is clearly Latin, where a word written
// wholly in Cyrillic or Greek lookalikes is a disguise.
func (st *canonState) latinContext() bool {
	st.countLatin()
	return st.latin > 2*(st.cyrillic+st.greek)
}

// text canonicalises one normalised text (steps 3–6); ascii says it is
// ASCII text, whose control characters normalize left as they are.
func (st *canonState) text(b []byte, ascii bool) {
	cls := &wordClass
	if ascii {
		cls = &wordClassASCII
	}
	run := st.chunks[:0] // single-character chunks waiting: maybe spaced letters
	// A line that begins while a run waits begins after the run's tokens
	// (its letters may be spaced across the break).
	var waiting LineMark
	lineWaits := false
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
		if lineWaits {
			st.line(waiting)
			waiting, lineWaits = 0, false
		}
	}
	gap := 0
	for i := 0; i < len(b); {
		if len(run) == 0 {
			// The common chunks first, then the one they stopped at.
			if i, gap = st.foldWords(b, i, cls, gap); i == len(b) {
				break
			}
		}
		c := b[i]
		if cls[c] == wcSpace {
			gap++
			if c == '\n' {
				gap++ // a line break is a wider gap than a space
				if m := lineMark(b[i+1:]); len(run) > 0 {
					waiting, lineWaits = waiting&LineSep|m, true
				} else {
					st.line(m)
				}
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
		for i < len(b) {
			if k := cls[b[i]]; k != wcHigh {
				if k == wcSpace {
					break
				}
				i++
				continue
			}
			r, n := utf8.DecodeRune(b[i:])
			if unicode.IsSpace(r) {
				break
			}
			i += n
		}
		g := gap
		gap = 0
		if i-start == 1 || i-start <= utf8.UTFMax && b[start] >= utf8.RuneSelf {
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
		st.chunk(b[start:i])
	}
	flush()
	st.chunks = run[:0]
}

// foldWords emits the chunks of b from i on, and the ASCII white space
// between them, while each is two or more ASCII letters and plain
// punctuation, not a link: the commonest chunks, whose tokens (what
// fastChunk makes of them: lower-cased, l folded into i, doubled letters
// once, punctuation dropped) it writes as it reads them, in one pass
// without calls. It returns where the first other chunk begins, or
// len(b), and the gap before it.
func (st *canonState) foldWords(b []byte, i int, cls *[256]uint8, gap int) (int, int) {
	// A chunk writes at most a byte a byte: room for the rest of the text
	// is enough.
	if cap(st.tok)-len(st.tok) < len(b)-i {
		st.tok = slices.Grow(st.tok, len(b)-i)
	}
	room, n := st.tok[:cap(st.tok)], len(st.tok)
	for i < len(b) {
		if c := b[i]; cls[c] == wcSpace {
			gap++
			if c == '\n' {
				gap++ // a line break is a wider gap than a space
				st.line(lineMark(b[i+1:]))
			}
			i++
			continue
		}
		start, tok := i, n
		var prev uint8
		for ; i < len(b); i++ {
			c := b[i]
			f := foldByte[c]
			if f == 0 {
				if cls[c] != wcPunct {
					break
				}
				continue
			}
			if f != prev {
				room[n] = f
				n++
				prev = f
			}
		}
		if i < len(b) && cls[b[i]] != wcSpace || n == tok || i-start == 1 ||
			i-start > 4 && (b[start]|0x20) == 'w' && (b[start+1]|0x20) == 'w' && (b[start+2]|0x20) == 'w' {
			// Another chunk (no letter, or other bytes), a single
			// character or a link.
			i, n = start, tok
			break
		}
		st.refs = append(st.refs, tokRef{start: tok, end: n})
		gap = 0
	}
	st.tok = room[:n]
	return i, gap
}

var isSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true, '\f': true, '\v': true}

// letterByte is 1 for ASCII letters.
var letterByte = func() (t [256]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = 1, 1
	}
	return t
}()

// wordClass classifies bytes for the chunk scanner in one lookup; the
// classes are bits, so that a word's classes can be gathered with OR.
const (
	wcOther  = 1 << iota // digits and symbols that may be leetspeak or links
	wcLetter             // ASCII letters
	wcSpace
	wcHigh
	wcPunct // other ASCII punctuation: fastChunk drops it (acPunct)
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
		case asciiClass[c] == acPunct:
			t[c] = wcPunct
		default:
			t[c] = wcOther
		}
	}
	return t
}()

// wordClassASCII is wordClass for ASCII text, whose control characters
// but tab and line feed normalize would turn into spaces.
var wordClassASCII = func() (t [256]uint8) {
	t = wordClass
	for c := 0; c < 0x20; c++ {
		t[c] = wcSpace
	}
	t[0x7F] = wcSpace
	return t
}()

// foldByte is an ASCII letter lower-cased, l folded into i, and 0 for
// every other byte.
var foldByte = func() (t [256]uint8) {
	for c := byte('a'); c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = c, c
	}
	t['l'], t['L'] = 'i', 'i'
	return t
}()

// line begins a line at the next token. A line without tokens is
// replaced by the next one, which keeps its part and separator marks
// (not a separator before a new part: that part is not cut), so Lines
// hold no empty lines but a text's first.
func (st *canonState) line(m LineMark) {
	if st.stripping {
		return // a Strip word's line breaks are no line of the text
	}
	start := int32(len(st.refs))
	if n := len(st.lines); n > 0 && st.lines[n-1].Start == start && st.lines[n-1].Mark&LineSubject == 0 {
		old := st.lines[n-1].Mark
		if m&LinePart == 0 {
			m |= old & (LinePart | LineSep)
		}
		st.lines[n-1].Mark = m
		return
	}
	st.lines = append(st.lines, Line{Start: start, Mark: m})
}

// lineMark reads the line b begins with: quoted (its first character
// past blanks is '>' or '|') or a separator ("--" alone, the signature
// delimiter; a run of "____" or "-----", a list's footer or a forwarded
// or quoted message's header).
func lineMark(b []byte) LineMark {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	b = b[i:]
	if len(b) == 0 {
		return 0
	}
	switch b[0] {
	case '>', '|':
		return LineQuoted
	case '_':
		if len(b) >= 4 && string(b[:4]) == "____" {
			return LineSep
		}
	case '-':
		if len(b) >= 5 && string(b[:5]) == "-----" {
			return LineSep
		}
		if len(b) >= 2 && b[1] == '-' {
			j := 2
			for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\r') {
				j++
			}
			if j == len(b) || b[j] == '\n' {
				return LineSep
			}
		}
	}
	return 0
}

// doc assembles the result.
func (st *canonState) doc(domains []string) *Doc {
	d := &Doc{}
	// Lines count refs; stripped tokens are not in Tokens.
	lines, li := st.lines, 0
	// One string for all tokens; each token is a slice of it.
	all := string(st.tok)
	d.Tokens = make([]string, 0, len(st.refs))
	// The letters stream is the tokens end to end, less the stripped
	// ones, the first character of a CJK bigram after the first (lskip),
	// and a letter that repeats the last one across tokens (letters
	// collapse doubled letters across words too, so that a space inside
	// "tif f" changes nothing). It is copied from st.tok in runs between
	// those cuts, not a token at a time: st.tok[run:end] is letters not
	// yet copied. Without a cut it is a slice of all.
	letters := st.letters[:0]
	run, end := 0, 0
	d.SubjectLetters = -1
	for ri, r := range st.refs {
		if ri == st.subjRefs { // the letters so far: letters, then st.tok[run:end]
			d.SubjectLetters = len(letters) + end - run
		}
		for ; li < len(lines) && int(lines[li].Start) <= ri; li++ {
			lines[li].Start = int32(len(d.Tokens))
		}
		if st.stripLens&(1<<min(r.end-r.start, 63)) != 0 && st.stripped(st.tok[r.start:r.end]) {
			st.stats.Stripped++
			continue
		}
		d.Tokens = append(d.Tokens, all[r.start:r.end])
		from := r.start + r.lskip
		if from < r.end {
			if c := st.tok[from]; c < utf8.RuneSelf && end > run {
				if st.tok[end-1] == c { // the common case: ASCII, in a run
					from++
				}
			} else if end > run {
				from += repeatedLetter(st.tok[run:end], st.tok[from:r.end])
			} else {
				from += repeatedLetter(letters, st.tok[from:r.end])
			}
		}
		if from != end {
			letters = append(letters, st.tok[run:end]...)
			run = from
		}
		end = r.end
	}
	if len(letters) == 0 {
		d.Letters = all[run:end]
	} else {
		letters = append(letters, st.tok[run:end]...)
		d.Letters = string(letters)
	}
	st.letters = letters
	if d.SubjectLetters < 0 {
		d.SubjectLetters = len(d.Letters)
	}
	for ; li < len(lines); li++ {
		lines[li].Start = int32(len(d.Tokens))
	}
	d.Lines = slices.Clone(lines)
	d.Domains = canonDomains(domains)
	st.stats.Words = len(d.Tokens)
	d.Stats = st.stats
	return d
}

// repeatedLetter is the length of the letter b begins with when a ends
// with it (not a CJK character: those repeat on purpose, 谢谢), else 0.
func repeatedLetter(a, b []byte) int {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	if x, y := a[len(a)-1], b[0]; x < utf8.RuneSelf && y < utf8.RuneSelf {
		if x == y {
			return 1
		}
		return 0
	}
	r1, _ := utf8.DecodeLastRune(a)
	r2, n := utf8.DecodeRune(b)
	if r1 == r2 && !isCJK(r1) {
		return n
	}
	return 0
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
		if !slices.Contains(out, d) {
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
