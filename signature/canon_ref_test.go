package signature

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The canonicaliser as it was before ASCII text was copied without a scan
// (normalize blanking control characters and counting Latin letters in
// every text, so that the chunk scanner reads every text with its general
// byte classes) and before the letters stream was copied in runs: the
// reference TestCanonicalizeAsReference and FuzzCanonicalizeAsReference
// hold the current one to; and the chunk scanner as it was before it
// folded ASCII words while reading them. Only the functions that changed
// are here.

func refCanonicalize(src Source) *Doc {
	st := statePool.Get().(*canonState)
	defer st.release()
	st.reset()

	// Normalise every text first: the document's dominant script decides
	// how ambiguous chunks are folded.
	for _, p := range append([]string{src.Subject}, src.Parts...) {
		start := len(st.norm)
		st.norm = st.refNormalize(st.norm, p)
		st.spans = append(st.spans, span{start: start, end: len(st.norm)}) // counted
	}
	st.countScripts()

	if len(src.Strip) > 0 {
		st.refBuildStrip(src.Strip)
	}
	for _, sp := range st.spans {
		st.refText(st.norm[sp.start:sp.end], false)
	}
	d := st.refDoc(src.Domains)
	d.Attachments = src.Attachments
	return d
}

func (st *canonState) refNormalize(dst []byte, s string) []byte {
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

func (st *canonState) refDoc(domains []string) *Doc {
	d := &Doc{}
	// One string for all tokens; each token is a slice of it. The tokens
	// lie end to end in it, so it is the letters stream too, unless a
	// token was stripped, a CJK bigram repeats a character, or a letter
	// ends one token and begins the next (letters collapse doubled
	// letters across words too, so that a space inside "tif f" changes
	// nothing).
	all := string(st.tok)
	d.Tokens = make([]string, 0, len(st.refs))
	// One pass: each token is tested against Strip once. The letters are
	// built only from the first token that breaks the stream (most
	// messages have one early: "the end"), replaying the tokens before it.
	contiguous := true
	prev := ""
	letters := st.letters[:0]
	// addLetters appends a token to the letters stream, without its first
	// character when the last token that added any ends with it; that
	// token is letters[lastStart:].
	lastStart := 0
	addLetters := func(r tokRef) {
		part := st.tok[r.start+r.lskip : r.end]
		if len(letters) > 0 && len(part) > 0 {
			a, b := letters[len(letters)-1], part[0]
			if a < utf8.RuneSelf && b < utf8.RuneSelf {
				if a == b {
					part = part[1:]
				}
			} else {
				r1, _ := utf8.DecodeLastRune(letters[lastStart:])
				r2, n := utf8.DecodeRune(part)
				if r1 == r2 && !isCJK(r1) {
					part = part[n:]
				}
			}
		}
		if len(part) > 0 {
			lastStart = len(letters)
			letters = append(letters, part...)
		}
	}
	for i, r := range st.refs {
		if len(st.strip) > 0 && st.stripped(st.tok[r.start:r.end]) {
			st.stats.Stripped++
			if contiguous {
				contiguous = false
				for _, q := range st.refs[:i] {
					addLetters(q)
				}
			}
			continue
		}
		tok := all[r.start:r.end]
		if contiguous && (r.lskip > 0 || prev != "" && boundaryDouble(prev, tok)) {
			contiguous = false
			for _, q := range st.refs[:i] {
				addLetters(q) // no token before i was stripped
			}
		}
		if !contiguous {
			addLetters(r)
		}
		d.Tokens = append(d.Tokens, tok)
		prev = tok
	}
	if contiguous {
		d.Letters = all
	} else {
		d.Letters = string(letters)
	}
	st.letters = letters
	d.Domains = canonDomains(domains)
	st.stats.Words = len(d.Tokens)
	d.Stats = st.stats
	return d
}

func (st *canonState) refBuildStrip(strip []string) {
	st.stripping = true
	for _, s := range strip {
		n0 := len(st.refs)
		t0 := len(st.tok)
		var buf [256]byte
		b := st.refNormalize(buf[:0], s)
		st.refText(b, false)
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

// refText is the chunk scanner before it folded ASCII words as it read
// them (with asciiWord, below): its letters-only words are those with no
// other class than wcLetter, punctuated ones go to chunk.
func (st *canonState) refText(b []byte, ascii bool) {
	cls := &wordClass
	if ascii {
		cls = &wordClassASCII
	}
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
		if cls[c] == wcSpace {
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
		// ASCII first, one lookup a byte: the commonest word is ASCII
		// letters only.
		var seen uint8
		for i < len(b) {
			k := cls[b[i]]
			if k&(wcSpace|wcHigh) != 0 {
				break
			}
			seen |= k
			i++
		}
		letters := seen == wcLetter
		for i < len(b) { // from the first byte of another script on
			if k := cls[b[i]]; k != wcHigh {
				if k == wcSpace {
					break
				}
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
		w := b[start:i]
		if letters && !(len(w) > 4 && (w[0]|0x20) == 'w' && (w[1]|0x20) == 'w' && (w[2]|0x20) == 'w') {
			st.refASCIIWord(w)
		} else {
			st.chunk(w)
		}
	}
	flush()
	st.chunks = run[:0]
}

// refASCIIWord emits a chunk of ASCII letters only: lower-cased, l folded
// into i.
func (st *canonState) refASCIIWord(w []byte) {
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

// sameDoc reports how two canonical forms differ, or "".
func sameDoc(a, b *Doc) string {
	if x, y := renderDoc(a), renderDoc(b); x != y {
		return fmt.Sprintf("got\n%s\nreference\n%s", x, y)
	}
	if fmt.Sprintf("%q", a.Tokens) != fmt.Sprintf("%q", b.Tokens) { // renderDoc joins with spaces
		return fmt.Sprintf("tokens %q, reference %q", a.Tokens, b.Tokens)
	}
	return ""
}

// refAlphabet mixes what the fast paths and the slow ones each take: ASCII
// letters, doubled letters across spaces, control bytes, digits, leetspeak,
// Cyrillic and Greek lookalikes, CJK, format characters, invalid UTF-8.
var refAlphabet = []string{
	"a", "b", "l", "L", "I", "x", "tt", "T", "e", "E", " ", "  ", "\n", "\t", "\r", "\f", "\v",
	"\x00", "\x01", "\x1b", "\x7f", "0", "7", "@", "$", "!", ".", "-", "'", "www.", "http://", "|<",
	",", "?", "(", ")", "\"", "WwW", "ll,", "s.", ";", "/", "+", "*",
	"е", "Р", "а", "α", "Ω", "й", "東京", "谢谢", "\u200b", "\u202e", "\u00a0", "é", "ﬁ", "Ａ",
	"\xff", "\xc3", "😀", "v i a g r a", "the end", "ii", "Iil",
}

func randomText(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(refAlphabet[r.IntN(len(refAlphabet))])
	}
	return b.String()
}

// TestCanonicalizeAsReference holds Canonicalize to refCanonicalize on the
// golden fixtures and on random texts, ASCII-only ones, ones with a part
// in another script, and Strip words of each kind.
func TestCanonicalizeAsReference(t *testing.T) {
	files, err := filepath.Glob("testdata/canon/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v", err)
	}
	var srcs []Source
	for _, f := range files {
		srcs = append(srcs, readCanonFixture(t, f))
	}
	long := strings.Repeat("ab", 40) // a Strip word past stripLens' last bit
	srcs = append(srcs, Source{Subject: "Hi John", Parts: []string{"to " + long + " and " + long + "x john smith"},
		Strip: []string{long, "John", "Smith"}})
	r := rand.New(rand.NewPCG(1, 2))
	ascii := refAlphabet[:slices.Index(refAlphabet, "е")]
	for i := range 3000 {
		src := Source{Subject: randomText(r, r.IntN(8))}
		for range r.IntN(4) {
			src.Parts = append(src.Parts, randomText(r, r.IntN(200)))
		}
		if i%2 == 0 { // ASCII only
			var b strings.Builder
			for range r.IntN(300) {
				b.WriteString(ascii[r.IntN(len(ascii))])
			}
			src.Parts = append(src.Parts, b.String())
		}
		if i%3 == 0 {
			src.Strip = []string{randomText(r, 1+r.IntN(3)), "Рaypal", "ella"}
		}
		srcs = append(srcs, src)
	}
	for i, src := range srcs {
		if diff := sameDoc(Canonicalize(src), refCanonicalize(src)); diff != "" {
			t.Fatalf("source %d %+q: %s", i, src, diff)
		}
	}
}

// FuzzCanonicalizeAsReference holds Canonicalize to refCanonicalize.
func FuzzCanonicalizeAsReference(f *testing.F) {
	for _, s := range []string{
		"Buy V1@GR@ now", "V i a g r a", "Рaypal ве\u200bрификация", "東京都に住んで", "\u202Eargaiv",
		"the end\x01of it\x7f", "a\x00b", "ASCII then Ωμέγα", "tif f", "ii ii ll",
	} {
		f.Add(s, "plain ascii part", "name")
	}
	f.Fuzz(func(t *testing.T, text, part, strip string) {
		src := Source{Subject: text, Parts: []string{part, text}, Strip: []string{strip}}
		if diff := sameDoc(Canonicalize(src), refCanonicalize(src)); diff != "" {
			t.Fatalf("%+q: %s", src, diff)
		}
		src.Strip = nil
		src.Parts = []string{part}
		if diff := sameDoc(Canonicalize(src), refCanonicalize(src)); diff != "" {
			t.Fatalf("%+q: %s", src, diff)
		}
	})
}
