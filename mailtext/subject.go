package mailtext

import (
	"bytes"
	"io"
	"mime"
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
		dec := mime.WordDecoder{CharsetReader: func(label string, input io.Reader) (io.Reader, error) {
			return w.wordCharsetReader(strings.ToLower(label), input, hint)
		}}
		if s, err := dec.DecodeHeader(raw); err == nil {
			raw = s
		}
	}
	return cleanHeaderText(raw)
}

// wordCharsetReader decodes the bytes of one encoded-word. It never fails:
// an unknown charset is replaced by the hint or a guess.
func (w *walker) wordCharsetReader(label string, input io.Reader, hint string) (io.Reader, error) {
	// Encoded-words are short (the header value is bounded).
	b, _ := io.ReadAll(io.LimitReader(input, maxFieldValue))
	if label == "utf-7" {
		return strings.NewReader(decodeUTF7(b)), nil
	}
	enc, ok := lookupCharset(label)
	switch {
	case ok && enc == nil:
		if utf8.Valid(b) {
			return bytes.NewReader(b), nil
		}
		w.defect(DefectCharsetMismatch, "encoded-word not "+label)
		return strings.NewReader(w.guessDecode(b, hint)), nil
	case ok:
		if isSingleByte(enc) && looksUTF8(b) {
			w.defect(DefectCharsetMismatch, "utf-8 encoded-word labelled "+label)
			return bytes.NewReader(b), nil
		}
		return strings.NewReader(w.decodeWith(enc, b)), nil
	default:
		w.defect(DefectCharsetUnknown, truncate(label, 40))
		if utf8.Valid(b) {
			return bytes.NewReader(b), nil
		}
		return strings.NewReader(w.guessDecode(b, hint)), nil
	}
}

// cleanHeaderText makes a decoded header valid UTF-8 on one line.
func cleanHeaderText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.ContainsAny(s, "\r\n\t") {
		s = strings.Map(func(r rune) rune {
			switch r {
			case '\r', '\n', '\t':
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
