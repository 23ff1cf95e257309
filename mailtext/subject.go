package mailtext

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
)

// decodeSubject decodes a raw Subject value: raw 8-bit bytes that are not
// UTF-8 are decoded with hint (the charset of the message's first text
// part) or a guess, then RFC 2047 encoded-words in any known charset are
// decoded. Encoded-words in an unknown charset are decoded by guess too.
func (w *walker) decodeSubject(raw, hint string) string {
	if raw == "" {
		return ""
	}
	if !utf8.ValidString(raw) {
		w.defect(DefectSubject8bit, "")
		raw = w.guessDecode([]byte(raw), hint)
	}
	if strings.Contains(raw, "=?") {
		raw = w.decodeWords(raw, hint)
	}
	return cleanHeaderText(raw)
}

// decodeWords decodes the RFC 2047 encoded-words of a header value.
// Adjacent encoded-words separated only by whitespace are joined (RFC 2047
// §6.2); a malformed word is left as it is. The words' charsets go through
// the same fallback as bodies, so UTF-8 labelled latin-1 still reads right.
func (w *walker) decodeWords(s, hint string) string {
	var b strings.Builder
	b.Grow(len(s))
	lastWasWord := false
	pendingSpace := ""
	for len(s) > 0 {
		i := strings.Index(s, "=?")
		if i < 0 {
			b.WriteString(pendingSpace)
			b.WriteString(s)
			break
		}
		text, charset, enc, rest, ok := splitEncodedWord(s[i:])
		before := s[:i]
		if !ok {
			b.WriteString(pendingSpace)
			b.WriteString(before)
			b.WriteString("=?")
			s = s[i+2:]
			pendingSpace, lastWasWord = "", false
			continue
		}
		if lastWasWord && strings.TrimLeft(before, " \t\r\n") == "" {
			// whitespace between two encoded-words is dropped
		} else {
			b.WriteString(pendingSpace)
			b.WriteString(before)
		}
		var raw []byte
		switch enc {
		case 'b', 'B':
			raw, _ = decodeBase64(nil, []byte(text))
		default:
			raw = decodeQWord(text)
		}
		b.WriteString(w.wordText(strings.ToLower(charset), raw, hint))
		s = rest
		lastWasWord = true
		// Keep whitespace after a word pending: it is dropped if another
		// word follows.
		j := 0
		for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r' || s[j] == '\n') {
			j++
		}
		pendingSpace, s = s[:j], s[j:]
	}
	return b.String()
}

// splitEncodedWord parses "=?charset?e?text?=" at the start of s.
func splitEncodedWord(s string) (text, charset string, enc byte, rest string, ok bool) {
	s = s[2:]
	q1 := strings.IndexByte(s, '?')
	if q1 <= 0 || q1 > 64 || q1+3 > len(s) || s[q1+2] != '?' {
		return
	}
	charset = s[:q1]
	if star := strings.IndexByte(charset, '*'); star >= 0 {
		charset = charset[:star] // RFC 2231 language suffix
	}
	enc = s[q1+1]
	if enc != 'b' && enc != 'B' && enc != 'q' && enc != 'Q' {
		return
	}
	body := s[q1+3:]
	end := strings.Index(body, "?=")
	if end < 0 {
		return
	}
	return body[:end], charset, enc, body[end+2:], true
}

// decodeQWord decodes the "Q" encoding: '_' is a space, =XX a byte.
func decodeQWord(s string) []byte {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_':
			b = append(b, ' ')
		case c == '=' && i+2 < len(s) && unhex(s[i+1]) >= 0 && unhex(s[i+2]) >= 0:
			b = append(b, byte(unhex(s[i+1])<<4|unhex(s[i+2])))
			i += 2
		default:
			b = append(b, c)
		}
	}
	return b
}

// wordText decodes the bytes of one encoded-word. It never fails: an
// unknown charset is replaced by the hint or a guess.
func (w *walker) wordText(label string, b []byte, hint string) string {
	if label == "utf-7" {
		return decodeUTF7(b)
	}
	enc, ok := lookupCharset(label)
	switch {
	case ok && enc == nil:
		if utf8.Valid(b) {
			return string(b)
		}
		w.defect(DefectCharsetMismatch, "encoded-word not "+label)
		return w.guessDecode(b, hint)
	case ok:
		if isSingleByte(enc) && looksUTF8(b) {
			w.defect(DefectCharsetMismatch, "utf-8 encoded-word labelled "+label)
			return string(b)
		}
		return w.decodeWith(enc, b)
	default:
		w.defect(DefectCharsetUnknown, truncate(label, 40))
		if utf8.Valid(b) {
			return string(b)
		}
		return w.guessDecode(b, hint)
	}
}

// cleanHeaderText makes a decoded header valid UTF-8 on one line.
func cleanHeaderText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.ContainsAny(s, "\r\n\t") {
		s = strings.Map(func(r rune) rune {
			switch r {
			case '\r', '\n':
				return -1 // unfold
			case '\t':
				return ' '
			}
			return r
		}, s)
	}
	return strings.TrimSpace(s)
}

// decodeUTF7 decodes UTF-7 (RFC 2152), which x/text does not provide and
// which spam still uses: "+" starts modified base64 of UTF-16BE, "-" or any
// character outside the base64 alphabet ends it, "+-" is a literal "+".
func decodeUTF7(b []byte) string {
	var out []rune
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '+' {
			if c < 0x80 {
				out = append(out, rune(c))
			} else {
				out = append(out, rune(charmap.Windows1252.DecodeByte(c)))
			}
			continue
		}
		i++
		if i < len(b) && b[i] == '-' {
			out = append(out, '+')
			continue
		}
		var acc uint32
		bits := 0
		var hi rune
		for ; i < len(b); i++ {
			if b[i] == '-' || b[i] == '_' {
				break // '-' ends the run; '_' is not in UTF-7's alphabet
			}
			v := b64[b[i]]
			if v < 0 {
				break
			}
			acc = acc<<6 | uint32(v)
			bits += 6
			if bits >= 16 {
				bits -= 16
				u := rune(acc >> uint(bits) & 0xFFFF)
				switch {
				case u >= 0xD800 && u < 0xDC00:
					hi = u
				case u >= 0xDC00 && u < 0xE000 && hi != 0:
					out = append(out, (hi-0xD800)<<10+(u-0xDC00)+0x10000)
					hi = 0
				default:
					out = append(out, u)
					hi = 0
				}
			}
		}
		if i < len(b) && b[i] != '-' {
			i-- // the terminating character is text
		}
	}
	return strings.ToValidUTF8(string(out), "\uFFFD")
}
