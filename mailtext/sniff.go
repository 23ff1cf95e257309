package mailtext

import (
	"strings"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

// sniffLimit bounds the bytes sniffCJK reads: the first 16 KiB of a part
// say which charset it is in as well as the whole.
const sniffLimit = 16 << 10

// cjkLayout is the byte layout of a double-byte legacy charset: which bytes
// lead a two-byte character and which may follow the lead.
type cjkLayout struct {
	lead, trail [256]bool
	single      [256]bool // 8-bit bytes that stand alone (Shift_JIS half-width kana)
}

func layout(lead, trail, single [][2]int) *cjkLayout {
	l := new(cjkLayout)
	for _, set := range []struct {
		t  *[256]bool
		rs [][2]int
	}{{&l.lead, lead}, {&l.trail, trail}, {&l.single, single}} {
		for _, r := range set.rs {
			for c := r[0]; c <= r[1]; c++ {
				set.t[c] = true
			}
		}
	}
	return l
}

var (
	eucLayout  = layout([][2]int{{0xA1, 0xFE}, {0x8E, 0x8E}}, [][2]int{{0xA1, 0xFE}}, nil)
	big5Layout = layout([][2]int{{0x81, 0xFE}}, [][2]int{{0x40, 0x7E}, {0xA1, 0xFE}}, nil)
	gbkLayout  = layout([][2]int{{0x81, 0xFE}}, [][2]int{{0x40, 0x7E}, {0x80, 0xFE}}, nil)
	sjisLayout = layout([][2]int{{0x81, 0x9F}, {0xE0, 0xFC}}, [][2]int{{0x40, 0x7E}, {0x80, 0xFC}}, [][2]int{{0xA1, 0xDF}})
)

// fit counts the two-byte characters of raw under l and the 8-bit bytes
// that break its layout (a lead without a trail, a byte that may not lead).
func (l *cjkLayout) fit(raw []byte) (pairs, bad int) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c < 0x80 || l.single[c]:
		case l.lead[c] && i+1 < len(raw) && l.trail[raw[i+1]]:
			pairs++
			i++
		default:
			bad++
		}
	}
	return pairs, bad
}

// fits: a layout fits when at most one 8-bit byte in 50 breaks it. Legacy
// Cyrillic or Western text read as pairs breaks at every word of odd length.
func fits(pairs, bad int) bool { return pairs >= 12 && bad*50 <= pairs }

// sniffCJK returns the double-byte legacy charset (Big5, GBK/GB18030,
// EUC-KR, EUC-JP, Shift_JIS) whose layout the 8-bit bytes of raw fit, or
// nil when they fit none or too few bytes are 8-bit to tell. It reads at
// most sniffLimit bytes and depends on nothing but them.
//
// Double-byte text comes in runs: at least half of its characters are
// followed by another. Accented letters of Western text are mostly
// followed by ASCII letters, which Big5 and GBK take for trail bytes
// ("PELÍCULA", "ATENÇÃO"), but not by another accented letter. (Chinese
// spaced out a character at a time is left to the single-byte guess.)
//
// The layouts overlap, so the bytes are weighed as well: Shift_JIS leads
// 0x81–0x9F (its kana) where the others lead above 0xA0; EUC text has
// trail bytes above 0xA0 only, where about a third of Big5's trails are
// ASCII (0x40–0x7E); in EUC, Japanese is read from its kana rows (0xA4,
// 0xA5) and Korean from its Hangul rows (0xB0–0xC8, nine pairs in ten), the rest
// is GB2312.
func sniffCJK(raw []byte) encoding.Encoding {
	if len(raw) > sniffLimit {
		raw = raw[:sniffLimit]
		// Do not cut a character in two: end at an ASCII byte.
		for len(raw) > 0 && raw[len(raw)-1] >= 0x80 {
			raw = raw[:len(raw)-1]
		}
	}
	var lowLead, kana, hangul, hanRows, lowTrail, n, runs int
	for i := 0; i+1 < len(raw); i++ {
		c, d := raw[i], raw[i+1]
		if c < 0x80 {
			continue
		}
		n++
		if i+2 < len(raw) && raw[i+2] >= 0x80 {
			runs++
		}
		switch {
		case c < 0xA1:
			lowLead++
		case c == 0xA4 || c == 0xA5:
			kana++
		case c >= 0xB0 && c <= 0xC8:
			hangul++
		}
		if c >= 0xB0 {
			hanRows++
		}
		if d >= 0x40 && d <= 0x7E {
			lowTrail++
		}
		i++ // c leads a pair in every layout, so d is its trail
	}
	if n < 12 || runs*2 < n {
		return nil
	}
	switch {
	case lowLead*2 > n:
		if fits(sjisLayout.fit(raw)) {
			return japanese.ShiftJIS
		}
	case fits(eucLayout.fit(raw)):
		switch {
		case kana*5 > n:
			return japanese.EUCJP
		case hanRows > 0 && hangul*10 >= hanRows*9:
			return korean.EUCKR
		}
		return simplifiedchinese.GB18030
	case lowTrail*5 > n && fits(big5Layout.fit(raw)):
		return traditionalchinese.Big5
	}
	if fits(gbkLayout.fit(raw)) {
		return simplifiedchinese.GB18030
	}
	return nil
}

// DecodeCharset returns the transfer-decoded bytes of a text part as UTF-8,
// read as Extract reads a part labelled charset: in that charset when the
// bytes fit it, else in the charset they fit (double-byte layouts, then
// Cyrillic or Western letters); what fits nothing becomes U+FFFD.
func DecodeCharset(raw []byte, charset string) string {
	w := getWalker(DefaultLimits)
	defer putWalker(w)
	return w.decodeText(raw, strings.ToLower(strings.TrimSpace(charset)), "")
}
