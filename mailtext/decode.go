package mailtext

import (
	"bytes"
	"encoding/binary"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/emersion/go-message/charset"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/unicode"
)

// The blank use of go-message's charset package registers its charset
// reader with go-message (message.CharsetReader); this package decodes
// bodies with the same lookup, through [lookupCharset].
var _ = charset.Reader

const (
	cteIdentity = iota
	cteBase64
	cteQP
	cteUnknown
)

func cteKind(v string) int {
	v = strings.ToLower(strings.Trim(strings.TrimSpace(v), "\"'"))
	switch v {
	case "", "7bit", "8bit", "binary", "7-bit", "8-bit":
		return cteIdentity
	case "base64", "x-base64":
		return cteBase64
	case "quoted-printable", "x-quoted-printable", "quoted_printable":
		return cteQP
	}
	return cteUnknown
}

var b64 = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	const alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := 0; i < len(alpha); i++ {
		t[alpha[i]] = int8(i)
	}
	// The URL-safe alphabet, seen in broken mailers.
	t['-'], t['_'] = 62, 63
	return t
}()

// decodeBase64 decodes src into dst, skipping anything outside the alphabet
// (reported as bad) and treating '=' as the end of one encoded run, so
// concatenated base64 blocks decode too.
func decodeBase64(dst, src []byte) (out []byte, bad bool) {
	var acc uint32
	n := 0
	for _, c := range src {
		v := b64[c]
		if v < 0 {
			switch c {
			case '=':
				switch n {
				case 2:
					dst = append(dst, byte(acc>>4))
				case 3:
					dst = append(dst, byte(acc>>10), byte(acc>>2))
				}
				acc, n = 0, 0
			case ' ', '\t', '\r', '\n':
			default:
				bad = true
			}
			continue
		}
		acc = acc<<6 | uint32(v)
		n++
		if n == 4 {
			dst = append(dst, byte(acc>>16), byte(acc>>8), byte(acc))
			acc, n = 0, 0
		}
	}
	switch n {
	case 1:
		bad = true
	case 2:
		dst = append(dst, byte(acc>>4))
	case 3:
		dst = append(dst, byte(acc>>10), byte(acc>>2))
	}
	return dst, bad
}

// decodeQP decodes quoted-printable (RFC 2045 §6.7) leniently: an '=' not
// followed by two hex digits or a line break is kept literally (reported),
// and trailing whitespace is removed from each line.
func decodeQP(dst, src []byte) (out []byte, bad bool) {
	for len(src) > 0 {
		nl := bytes.IndexByte(src, '\n')
		var line []byte
		hasNL := nl >= 0
		if hasNL {
			line, src = src[:nl], src[nl+1:]
		} else {
			line, src = src, nil
		}
		line = bytes.TrimRight(line, " \t\r")
		soft := false
		for len(line) > 0 { // runs up to each '=' copied at once
			eq := bytes.IndexByte(line, '=')
			if eq < 0 {
				dst = append(dst, line...)
				break
			}
			dst = append(dst, line[:eq]...)
			line = line[eq:]
			if len(line) == 1 {
				soft = true
				break
			}
			if len(line) > 2 {
				if hi, lo := unhex(line[1]), unhex(line[2]); hi >= 0 && lo >= 0 {
					dst = append(dst, byte(hi<<4|lo))
					line = line[3:]
					continue
				}
			}
			bad = true
			dst = append(dst, '=')
			line = line[1:]
		}
		if hasNL && !soft {
			dst = append(dst, '\n')
		}
	}
	return dst, bad
}

// charsetCache maps a lower-case label to its encoding (nil: unknown).
var charsetCache sync.Map

// lookupCharset finds the encoding of a charset label the way go-message's
// charset package does (its quirks, then IANA MIME names, "cs"+name, then
// WHATWG labels), plus a few labels seen in spam. It returns ok=false for an
// unknown label. A nil encoding with ok=true means UTF-8.
func lookupCharset(label string) (enc encoding.Encoding, ok bool) {
	if v, hit := charsetCache.Load(label); hit {
		e, _ := v.(encoding.Encoding)
		return e, e != nil || isUTF8Label(label)
	}
	enc = findCharset(label)
	if enc == unicode.UTF8 {
		enc = nil
	}
	if enc == nil && !isUTF8Label(label) {
		charsetCache.Store(label, nil)
		return nil, false
	}
	charsetCache.Store(label, enc)
	return enc, true
}

func isUTF8Label(label string) bool {
	switch label {
	case "utf-8", "utf8", "us-ascii", "ascii", "unicode-1-1-utf-8", "x-unicode20utf8", "ansi_x3.4-1968", "iso-646-us", "x-utf_8j":
		return true
	}
	return false
}

var charsetAliases = map[string]encoding.Encoding{
	"ansi_x3.110-1983": charmap.ISO8859_1,
	"x-user-defined":   charmap.Windows1252,
	"latin1":           charmap.ISO8859_1,
	"latin-1":          charmap.ISO8859_1,
	"iso8859-1":        charmap.ISO8859_1,
	"iso-8859-8-i":     charmap.ISO8859_8,
	"win-1251":         charmap.Windows1251,
	"cp-1251":          charmap.Windows1251,
	"windows-1251-i":   charmap.Windows1251,
	"koi8r":            charmap.KOI8R,
	"koi-8-r":          charmap.KOI8R,
	"x-koi8-r":         charmap.KOI8R,
	"x-cp1251":         charmap.Windows1251,
	"x-sjis":           japanese.ShiftJIS,
	"x-gbk":            nil,
}

func findCharset(label string) encoding.Encoding {
	if isUTF8Label(label) {
		return unicode.UTF8
	}
	if e, ok := charsetAliases[label]; ok && e != nil {
		return e
	}
	if e, err := ianaindex.MIME.Encoding(label); err == nil && e != nil {
		return e
	}
	if e, err := ianaindex.MIME.Encoding("cs" + label); err == nil && e != nil {
		return e
	}
	if e, err := htmlindex.Get(label); err == nil && e != nil {
		return e
	}
	// "cp1251", "windows1251", "win1251"
	for _, p := range []string{"windows-", "cp", "win"} {
		if n, ok := strings.CutPrefix(label, p); ok {
			if e, err := htmlindex.Get("windows-" + strings.TrimLeft(n, "-_")); err == nil && e != nil {
				return e
			}
		}
	}
	return nil
}

// windowsOf maps ISO-8859 charsets to the Windows code page that extends
// them in 0x80–0x9F.
var windowsOf = map[encoding.Encoding]encoding.Encoding{
	charmap.ISO8859_1:  charmap.Windows1252,
	charmap.ISO8859_15: charmap.Windows1252,
	charmap.ISO8859_2:  charmap.Windows1250,
	charmap.ISO8859_7:  charmap.Windows1253,
	charmap.ISO8859_9:  charmap.Windows1254,
	charmap.ISO8859_8:  charmap.Windows1255,
	charmap.ISO8859_13: charmap.Windows1257,
}

func hasC1(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 && c < 0xA0 {
			return true
		}
	}
	return false
}

// isSingleByte reports whether enc maps each byte to one character: such
// labels are the ones mislabelled UTF-8 text most often hides behind.
func isSingleByte(enc encoding.Encoding) bool {
	_, ok := enc.(*charmap.Charmap)
	return ok
}

// decodeText turns the decoded bytes of a text part into valid UTF-8.
//
// Labels lie: UTF-8 labelled as latin-1, koi8-r labelled as UTF-8, no label
// at all. The rules: valid UTF-8 that contains multi-byte sequences is UTF-8
// whatever a single-byte label says; bytes that are not valid UTF-8 under a
// UTF-8, ASCII, missing or unknown label are decoded with a guessed legacy
// charset (hint first, then Cyrillic or Western by byte statistics); any
// byte still invalid becomes U+FFFD.
func (w *walker) decodeText(raw []byte, label, hint string) string {
	if isASCII(raw) && !bytes.Contains(raw, []byte{0x1b}) && !isWideLabel(label) {
		return string(raw)
	}
	if label == "utf-7" {
		return decodeUTF7(raw)
	}
	enc, known := lookupCharset(label)
	switch {
	case (!known || enc == nil) && (bytes.Contains(raw, []byte("\x1b$B")) || bytes.Contains(raw, []byte("\x1b$@"))):
		// ISO-2022-JP escape sequences under no or a wrong label.
		w.defect(DefectCharsetGuessed, "iso-2022-jp escapes")
		return w.decodeWith(japanese.ISO2022JP, raw)
	case known && enc == nil:
		if utf8.Valid(raw) {
			return string(raw)
		}
		w.defect(DefectCharsetMismatch, "not "+label)
		return w.guessDecode(raw, hint)
	case known:
		if isSingleByte(enc) && looksUTF8(raw) {
			w.defect(DefectCharsetMismatch, "utf-8 labelled "+label)
			return string(raw)
		}
		if isWestern(enc) {
			// A Western label decodes any bytes, so only their layout
			// tells Big5 or GBK sent as latin-1.
			if cjk := sniffCJK(raw); cjk != nil {
				w.defect(DefectCharsetMismatch, charsetName(cjk)+" labelled "+label)
				return w.decodeWith(cjk, raw)
			}
		}
		if win, ok := windowsOf[enc]; ok && hasC1(raw) {
			// Bytes 0x80–0x9F are controls in ISO-8859 and never text: the
			// sender meant the Windows superset (quotes, dashes), as
			// browsers read latin-1.
			enc = win
		}
		s := w.decodeWith(enc, raw)
		if strings.Count(s, "\uFFFD") > 2 && looksUTF8(raw) {
			w.defect(DefectCharsetMismatch, "utf-8 labelled "+label)
			return string(raw)
		}
		return s
	case label == "":
		if utf8.Valid(raw) {
			return string(raw)
		}
		w.defect(DefectCharsetGuessed, "")
		return w.guessDecode(raw, hint)
	default:
		w.defect(DefectCharsetUnknown, truncate(label, 40))
		if utf8.Valid(raw) {
			return string(raw)
		}
		return w.guessDecode(raw, hint)
	}
}

// isWideLabel reports labels whose text is not ASCII-compatible.
func isWideLabel(label string) bool {
	return strings.HasPrefix(label, "utf-16") || strings.HasPrefix(label, "utf-32") ||
		strings.HasPrefix(label, "ucs-") || label == "unicode" || label == "utf-7"
}

func truncate(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "?")
}

// guessDecode decodes 8-bit text whose label is missing or wrong. The hint
// (the charset of another part of the message) is used unless the bytes
// themselves say Cyrillic where the hint is Western.
//
// Double-byte text (Big5, GBK, EUC-KR, EUC-JP, Shift_JIS) is told by its
// layout (sniffCJK) before single-byte text by its letters (guessLegacy); a
// single-byte hint does not override the layout.
func (w *walker) guessDecode(raw []byte, hint string) string {
	var hinted encoding.Encoding
	if hint != "" {
		if enc, ok := lookupCharset(hint); ok && enc != nil {
			hinted = enc
		}
	}
	if hinted == nil || isSingleByte(hinted) {
		if cjk := sniffCJK(raw); cjk != nil {
			if w.sniffed == "" {
				w.sniffed = charsetName(cjk)
			}
			return w.decodeWith(cjk, raw)
		}
	}
	guess := guessLegacy(raw)
	if hinted != nil && !(guess != charmap.Windows1252 && isWestern(hinted)) {
		return w.decodeWith(hinted, raw)
	}
	return w.decodeWith(guess, raw)
}

// charsetName names enc in a defect's detail.
func charsetName(enc encoding.Encoding) string {
	if name, err := htmlindex.Name(enc); err == nil {
		return name
	}
	return "legacy"
}

func isWestern(enc encoding.Encoding) bool {
	switch enc {
	case charmap.Windows1252, charmap.ISO8859_1, charmap.ISO8859_15, charmap.Windows1250, charmap.ISO8859_2, charmap.Macintosh:
		return true
	}
	return false
}

// decodeWith decodes raw with enc; undecodable bytes become U+FFFD, which
// is recorded as a defect.
func (w *walker) decodeWith(enc encoding.Encoding, raw []byte) string {
	if cm, ok := enc.(*charmap.Charmap); ok {
		return w.decodeCharmap(cm, raw)
	}
	out, err := enc.NewDecoder().Bytes(raw)
	if err != nil {
		// Decoders replace bad input themselves; an error here is rare
		// (e.g. a transformer's internal limit). Keep what is valid.
		out = raw
	}
	s := strings.ToValidUTF8(string(out), "\uFFFD")
	if strings.ContainsRune(s, '\uFFFD') && !bytes.Contains(raw, []byte("\xef\xbf\xbd")) {
		w.defect(DefectInvalidUTF8, "")
	}
	return s
}

// decodeCharmap is decodeWith for a single-byte charset, in one pass: its
// decoder's output is valid UTF-8 already (an unmapped byte is U+FFFD), and
// the general path's transformer and two scans of the result cost more than
// the table lookups.
func (w *walker) decodeCharmap(cm *charmap.Charmap, raw []byte) string {
	var b strings.Builder
	b.Grow(len(raw) + len(raw)/2)
	ascii, bad := asciiSuperset[cm], false
	for i := 0; i < len(raw); i++ {
		if ascii { // copy the run of ASCII at once
			j := i
			for j < len(raw) && raw[j] < utf8.RuneSelf {
				j++
			}
			b.Write(raw[i:j])
			if i = j; i == len(raw) {
				break
			}
		}
		r := cm.DecodeByte(raw[i])
		bad = bad || r == utf8.RuneError
		b.WriteRune(r)
	}
	if bad && !bytes.Contains(raw, []byte("\xef\xbf\xbd")) {
		w.defect(DefectInvalidUTF8, "")
	}
	return b.String()
}

// asciiSuperset holds the single-byte charsets that leave ASCII as it is
// (all but EBCDIC's).
var asciiSuperset = func() map[*charmap.Charmap]bool {
	m := make(map[*charmap.Charmap]bool)
	for _, e := range charmap.All {
		cm, ok := e.(*charmap.Charmap)
		if !ok {
			continue
		}
		m[cm] = true
		for c := range utf8.RuneSelf {
			if cm.DecodeByte(byte(c)) != rune(c) {
				m[cm] = false
				break
			}
		}
	}
	return m
}()

// guessLegacy picks a legacy charset for 8-bit text that is not UTF-8.
// Russian text (the bulk of legacy 8-bit spam) is mostly lower-case letters,
// which windows-1251 puts at 0xE0–0xFF and KOI8-R at 0xC0–0xDF, and CP866 at
// 0xA0–0xAF/0xE0–0xEF; Western text has few 8-bit bytes among ASCII letters.
func guessLegacy(raw []byte) encoding.Encoding {
	var n [5]int // by legacyClass
	for _, c := range raw {
		n[legacyClass[c]]++
	}
	ascii, a0, c0, e0 := n[1], n[2], n[3], n[4]
	high := c0 + e0 + a0
	if high == 0 || high*3 < ascii {
		return charmap.Windows1252
	}
	switch {
	case a0 > c0 && a0 > e0/2:
		return charmap.CodePage866
	case e0 >= c0:
		return charmap.Windows1251
	default:
		return charmap.KOI8R
	}
}

// legacyClass sorts bytes for guessLegacy: 1 an ASCII letter, 2 0x80–0xAF,
// 3 0xC0–0xDF, 4 0xE0–0xFF, 0 the rest.
var legacyClass = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c >= 0xE0:
			t[c] = 4
		case c >= 0xC0:
			t[c] = 3
		case c >= 0x80 && c < 0xB0:
			t[c] = 2
		case c < 0x80 && (c|0x20 >= 'a' && c|0x20 <= 'z'):
			t[c] = 1
		}
	}
	return t
}()

// looksUTF8 reports whether b is valid UTF-8 with at least one multi-byte
// sequence: legacy 8-bit text is almost never valid UTF-8 by accident.
func looksUTF8(b []byte) bool {
	return !isASCII(b) && utf8.Valid(b)
}

func isASCII(b []byte) bool {
	// Eight bytes at a time: most text parts are ASCII and long.
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b)&0x8080808080808080 != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// unflow undoes format=flowed (RFC 3676): a line ending in a space joins
// the next one (the space removed too with delsp=yes); a leading space is
// stuffing. The signature separator "-- " is not a flowed line.
func unflow(s string, delsp bool) string {
	if !strings.Contains(s, " \n") && !strings.Contains(s, "\n ") && !strings.HasPrefix(s, " ") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for len(s) > 0 {
		var line string
		nl := strings.IndexByte(s, '\n')
		if nl < 0 {
			line, s = s, ""
		} else {
			line, s = s[:nl], s[nl+1:]
		}
		quote := 0
		for quote < len(line) && line[quote] == '>' {
			quote++
		}
		b.WriteString(line[:quote])
		line = line[quote:]
		line = strings.TrimPrefix(line, " ") // space-stuffing
		if strings.HasSuffix(line, " ") && line != "-- " && nl >= 0 {
			if delsp {
				line = line[:len(line)-1]
			}
			b.WriteString(line)
			// The next line's quote marks repeat ours; drop them.
			if quote > 0 && strings.HasPrefix(s, strings.Repeat(">", quote)) {
				s = s[quote:]
				s = strings.TrimPrefix(s, " ")
				// Re-stuffing is handled by the loop on the joined text.
			}
			continue
		}
		b.WriteString(line)
		if nl >= 0 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}
