package mailtext

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/emersion/go-message/textproto"
)

// maxFieldValue bounds the stored value of one header field we use.
const maxFieldValue = 16 << 10

// partHeader holds the few header fields extraction uses.
type partHeader struct {
	contentType string // raw Content-Type value; empty when absent
	cte         string // raw Content-Transfer-Encoding
	disposition string // raw Content-Disposition
	subject     string // raw Subject (top level and message/rfc822 only)
	hasSubject  bool

	// Parsed from contentType by parse.
	mediaType string // lower-case; "text/plain" when absent or unusable
	hasCT     bool
	charset   string // lower-case, unquoted
	boundary  string
	flowed    bool
	delsp     bool
}

// which header fields a line belongs to
const (
	fieldOther = iota
	fieldContentType
	fieldCTE
	fieldDisposition
	fieldSubject
)

func fieldKind(name []byte) int {
	switch len(name) {
	case 7:
		if asciiEqualFold(name, "subject") {
			return fieldSubject
		}
	case 12:
		if asciiEqualFold(name, "content-type") {
			return fieldContentType
		}
	case 19:
		if asciiEqualFold(name, "content-disposition") {
			return fieldDisposition
		}
	case 25:
		if asciiEqualFold(name, "content-transfer-encoding") {
			return fieldCTE
		}
	}
	return fieldOther
}

func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// fieldName returns the name of a "Name: value" line and the index of the
// colon, or ok=false. Spaces between the name and the colon are tolerated
// (obsolete syntax, seen in the wild).
func fieldName(line []byte) (name []byte, colon int, ok bool) {
	i := 0
	for i < len(line) {
		c := line[i]
		if c == ':' {
			break
		}
		if c < 33 || c > 126 {
			break
		}
		i++
	}
	if i == 0 {
		return nil, 0, false
	}
	j := i
	for j < len(line) && (line[j] == ' ' || line[j] == '\t') {
		j++
	}
	if j >= len(line) || line[j] != ':' {
		return nil, 0, false
	}
	return line[:i], j, true
}

// readHeader reads header fields until the blank line that ends them.
//
// It is tolerant: an mbox "From " line at the top of a message is skipped; a
// line that is neither a field nor a continuation is dropped when the next
// line is a field again, and otherwise ends the header (it is then the first
// body line, pushed back: SpamAssassin reads such headers the same way).
// When a boundary line ends the header, readHeader returns it.
func (w *walker) readHeader(s *stream, h *partHeader, top bool) (hit, bool) {
	var (
		cur     = fieldOther // field being continued
		curBuf  []byte       // value of the field being read, for the fields we keep
		pending []byte       // a malformed line waiting for the next one
		first   = true
	)
	flush := func() {
		if cur == fieldOther {
			return
		}
		v := string(unfold(curBuf))
		switch cur {
		case fieldContentType:
			if h.contentType == "" {
				h.contentType = v
			}
		case fieldCTE:
			if h.cte == "" {
				h.cte = v
			}
		case fieldDisposition:
			if h.disposition == "" {
				h.disposition = v
			}
		case fieldSubject:
			if !h.hasSubject {
				h.subject, h.hasSubject = v, true
			}
		}
		cur, curBuf = fieldOther, curBuf[:0]
	}
	appendValue := func(b []byte) {
		if cur == fieldOther {
			return
		}
		if len(curBuf)+len(b) > maxFieldValue {
			w.defect(DefectHeaderLong, "header field longer than "+strconv.Itoa(maxFieldValue)+" bytes")
			b = b[:max(0, maxFieldValue-len(curBuf))]
		}
		curBuf = append(curBuf, b...)
	}
	defer h.parse()
	for {
		line, start, ok := s.lr.next()
		if !ok {
			flush()
			if pending != nil {
				s.lr.push(pending)
				w.defect(DefectHeaderNoBlank, "header ended by end of input")
			}
			return hit{}, false
		}
		if !start {
			// The rest of a line longer than the line buffer.
			if pending == nil {
				appendValue(line)
			}
			continue
		}
		if first && top {
			first = false
			if bytes.HasPrefix(line, []byte("From ")) {
				w.defect(DefectMboxFrom, "")
				s.skipRestOfLine(line)
				continue
			}
		}
		first = false
		if hh, ok := s.match(line); ok {
			flush()
			return hh, true
		}
		if isBlank(line) {
			flush()
			if pending != nil {
				w.defect(DefectHeaderMalformed, quoteLine(pending))
			}
			return hit{}, false
		}
		if line[0] == ' ' || line[0] == '\t' {
			if pending == nil {
				appendValue(line)
			}
			continue
		}
		if name, colon, ok := fieldName(line); ok {
			if pending != nil {
				w.defect(DefectHeaderMalformed, quoteLine(pending))
				pending = nil
			}
			flush()
			if bytes.HasPrefix(line, []byte(">From ")) {
				continue
			}
			cur = fieldKind(name)
			appendValue(line[colon+1:])
			continue
		}
		if bytes.HasPrefix(line, []byte(">From ")) || (top && bytes.HasPrefix(line, []byte("From "))) {
			continue
		}
		// Neither a field nor a continuation.
		flush()
		if pending == nil {
			pending = bytes.Clone(line)
			if s.lr.midLine {
				// A fragment of a long line cannot be looked ahead of.
				s.lr.push(pending)
				w.defect(DefectHeaderNoBlank, quoteLine(pending))
				return hit{}, false
			}
			continue
		}
		// Two non-field lines in a row: the header ended at the first.
		s.lr.push(line)
		s.lr.push(pending)
		w.defect(DefectHeaderNoBlank, quoteLine(pending))
		return hit{}, false
	}
}

// skipRestOfLine consumes the fragments of a line longer than the buffer.
func (s *stream) skipRestOfLine(line []byte) {
	if len(line) > 0 && line[len(line)-1] == '\n' {
		return
	}
	for s.lr.midLine {
		if _, _, ok := s.lr.next(); !ok {
			return
		}
	}
}

func quoteLine(b []byte) string {
	b = trimEOL(b)
	if len(b) > 60 {
		b = b[:60]
	}
	return strconv.QuoteToASCII(string(b))
}

// unfold turns a folded field value into one line: CR and LF are dropped
// and the surrounding whitespace trimmed (RFC 5322 §2.2.3).
func unfold(v []byte) []byte {
	out := v[:0]
	for _, c := range v {
		if c == '\r' || c == '\n' {
			continue
		}
		out = append(out, c)
	}
	return bytes.TrimSpace(out)
}

// headerFrom picks the fields extraction uses out of a go-message header.
func headerFrom(th *textproto.Header) partHeader {
	h := partHeader{
		contentType: th.Get("Content-Type"),
		cte:         th.Get("Content-Transfer-Encoding"),
		disposition: th.Get("Content-Disposition"),
	}
	if th.Has("Subject") {
		h.subject, h.hasSubject = th.Get("Subject"), true
	}
	h.parse()
	return h
}

// parse fills the parsed fields from the raw Content-Type. It never fails:
// a missing or unusable type is text/plain (RFC 2045 §5.2).
func (h *partHeader) parse() {
	mt, params := splitMediaType(h.contentType)
	h.hasCT = mt != ""
	if mt == "" || !strings.Contains(mt, "/") {
		mt = "text/plain"
	}
	h.mediaType = mt
	h.charset, h.boundary, h.flowed, h.delsp = "", "", false, false
	forEachParam(params, func(k, v string) {
		switch k {
		case "charset":
			if h.charset == "" {
				h.charset = strings.ToLower(strings.TrimSpace(v))
			}
		case "boundary":
			if h.boundary == "" {
				h.boundary = v
			}
		case "format":
			h.flowed = strings.EqualFold(v, "flowed")
		case "delsp":
			h.delsp = strings.EqualFold(v, "yes")
		}
	})
}

// splitMediaType returns the lower-case media type and the parameter text.
// The type ends at ';' or at whitespace ("text/html charset=x" is seen).
func splitMediaType(v string) (mt, params string) {
	v = strings.TrimSpace(v)
	end := len(v)
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == ';' || c == ' ' || c == '\t' || c == ',' {
			end = i
			break
		}
	}
	mt = strings.ToLower(strings.Trim(v[:end], "\"'"))
	if end < len(v) {
		params = v[end+1:]
	}
	return mt, params
}

// forEachParam calls fn for each key=value parameter of a Content-Type or
// Content-Disposition, tolerating missing separators, unbalanced quotes and
// RFC 2231 extended values (key*=charset'lang'value, key*0=…).
func forEachParam(s string, fn func(k, v string)) {
	var cont map[string][]string
	for len(s) > 0 {
		// Skip separators.
		for len(s) > 0 && (s[0] == ';' || s[0] == ' ' || s[0] == '\t' || s[0] == ',') {
			s = s[1:]
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return
		}
		k := strings.ToLower(strings.TrimSpace(s[:eq]))
		if i := strings.LastIndexAny(k, " \t;"); i >= 0 {
			k = k[i+1:] // junk before the key
		}
		s = s[eq+1:]
		for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
			s = s[1:]
		}
		var v string
		if len(s) > 0 && s[0] == '"' {
			var b strings.Builder
			i := 1
			for ; i < len(s); i++ {
				c := s[i]
				if c == '\\' && i+1 < len(s) {
					i++
					b.WriteByte(s[i])
					continue
				}
				if c == '"' {
					break
				}
				b.WriteByte(c)
			}
			v = b.String()
			if i < len(s) {
				i++
			}
			s = s[i:]
		} else {
			end := strings.IndexAny(s, "; \t")
			if end < 0 {
				end = len(s)
			}
			v, s = s[:end], s[end:]
		}
		// RFC 2231.
		if star := strings.IndexByte(k, '*'); star >= 0 {
			base := k[:star]
			extended := strings.HasSuffix(k, "*")
			idx := strings.TrimSuffix(k[star+1:], "*")
			if extended {
				if idx == "" || idx == "0" {
					// charset'language'value
					if q := strings.IndexByte(v, '\''); q >= 0 {
						if q2 := strings.IndexByte(v[q+1:], '\''); q2 >= 0 {
							v = v[q+1+q2+1:]
						}
					}
				}
				v = percentDecode(v)
			}
			if idx == "" {
				fn(base, v)
				continue
			}
			n, err := strconv.Atoi(idx)
			if err != nil || n < 0 || n > 64 {
				continue
			}
			if cont == nil {
				cont = map[string][]string{}
			}
			segs := cont[base]
			for len(segs) <= n {
				segs = append(segs, "")
			}
			segs[n] = v
			cont[base] = segs
			continue
		}
		fn(k, v)
	}
	for k, segs := range cont {
		v := strings.Join(segs, "")
		if len(v) > maxFieldValue {
			v = v[:maxFieldValue]
		}
		fn(k, v)
	}
}

func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if hi, lo := unhex(s[i+1]), unhex(s[i+2]); hi >= 0 && lo >= 0 {
				b = append(b, byte(hi<<4|lo))
				i += 2
				continue
			}
		}
		b = append(b, s[i])
	}
	return string(b)
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// dispositionIsAttachment reports whether a Content-Disposition marks the
// part as an attachment (not shown inline).
func dispositionIsAttachment(v string) bool {
	v = strings.TrimSpace(v)
	if len(v) < len("attachment") {
		return false
	}
	return strings.EqualFold(v[:len("attachment")], "attachment")
}
