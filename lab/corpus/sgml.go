package corpus

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/bulkmilter/bulkmilter/mailbox"
)

var (
	reutersOpen  = []byte("<REUTERS")
	reutersClose = []byte("</REUTERS>")
)

// splitSGML calls emit for each <REUTERS ...>...</REUTERS> element of r, in order, with
// its id and bytes. An element larger than limit (limit < 0: no limit) is emitted with
// nil doc and not held in memory.
func splitSGML(r io.Reader, limit int64, emit func(id string, doc []byte, size int64) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		doc     []byte
		size    int64
		inDoc   bool
		ordinal int
		id      string
		line    []byte
	)
	// Lines are kept whole so that no tag is missed; a line beyond this bound is an error.
	lineCap := int64(-1)
	if limit >= 0 && limit < math.MaxInt64 {
		lineCap = max(limit+1, 1<<20)
	}
	add := func(b []byte) {
		size += int64(len(b))
		if limit >= 0 && size > limit {
			doc = nil
		} else {
			doc = append(doc, b...)
		}
	}
	for n := 1; ; n++ {
		var total int64
		var err error
		line, total, err = mailbox.ReadLine(br, line[:0], lineCap)
		if total > int64(len(line)) {
			// The end tag could hide in the part not kept: refuse rather than guess.
			return fmt.Errorf("line %d: longer than %d bytes", n, lineCap)
		}
		rest := line
		for len(rest) > 0 {
			if !inDoc {
				i := bytes.Index(rest, reutersOpen)
				if i < 0 {
					break
				}
				rest = rest[i:]
				inDoc, doc, size = true, nil, 0
				ordinal++
				id = newID(rest, ordinal)
			}
			j := bytes.Index(rest, reutersClose)
			if j < 0 {
				add(rest)
				break
			}
			add(rest[:j+len(reutersClose)])
			rest = rest[j+len(reutersClose):]
			inDoc = false
			d := doc
			if limit >= 0 && size > limit {
				d = nil
			}
			if err := emit(id, d, size); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			if inDoc {
				return fmt.Errorf("document %s: no </REUTERS> before the end (truncated?)", id)
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// newID returns the NEWID attribute of the start tag at the beginning of tag, or the
// ordinal when there is none.
func newID(tag []byte, ordinal int) string {
	if end := bytes.IndexByte(tag, '>'); end >= 0 {
		tag = tag[:end]
	}
	const attr = `NEWID="`
	if i := bytes.Index(tag, []byte(attr)); i >= 0 {
		v := tag[i+len(attr):]
		if j := bytes.IndexByte(v, '"'); j > 0 {
			v = v[:j]
			if _, err := strconv.Atoi(string(v)); err == nil {
				return string(v)
			}
		}
	}
	return strconv.Itoa(ordinal)
}

// element returns the content of the first <tag>...</tag> in doc.
func element(doc []byte, tag string) ([]byte, bool) {
	start, end := []byte("<"+tag+">"), []byte("</"+tag+">")
	i := bytes.Index(doc, start)
	if i < 0 {
		return nil, false
	}
	doc = doc[i+len(start):]
	j := bytes.Index(doc, end)
	if j < 0 {
		return nil, false
	}
	return doc[:j], true
}

// reutersMessage turns one <REUTERS> element into "Subject: TITLE", a blank line and
// the BODY text, entities decoded. ok is false when the document has no BODY (the
// BRIEF and UNPROC documents of the collection).
func reutersMessage(doc []byte) (msg []byte, ok bool) {
	body, ok := element(doc, "BODY")
	if !ok {
		return nil, false
	}
	title, _ := element(doc, "TITLE")
	body = decodeEntities(body)
	msg = make([]byte, 0, len(title)+len(body)+16)
	msg = append(msg, "Subject: "...)
	msg = appendHeaderText(msg, decodeEntities(title))
	msg = append(msg, "\n\n"...)
	msg = append(msg, body...)
	if len(body) > 0 && body[len(body)-1] != '\n' {
		msg = append(msg, '\n')
	}
	return msg, true
}

// appendHeaderText appends b on one line: whitespace runs become one space, other
// control characters are dropped.
func appendHeaderText(dst, b []byte) []byte {
	space := false
	start := len(dst)
	for _, c := range b {
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f':
			space = true
		case c < 0x20 || c == 0x7f:
		default:
			if space && len(dst) > start {
				dst = append(dst, ' ')
			}
			space = false
			dst = append(dst, c)
		}
	}
	return dst
}

// decodeEntities decodes the SGML entities of the Reuters files: &lt; &gt; &amp;
// &quot; &apos; and numeric references. Numeric references to control characters
// (Reuters uses &#2; &#3; &#5; &#22; ... as wire-service framing) are dropped, except
// tab and line breaks. Unknown or malformed references are left as they are.
func decodeEntities(b []byte) []byte {
	if bytes.IndexByte(b, '&') < 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		i := bytes.IndexByte(b, '&')
		if i < 0 {
			return append(out, b...)
		}
		out = append(out, b[:i]...)
		b = b[i:]
		semi := bytes.IndexByte(b, ';')
		if semi < 0 || semi > 10 {
			out = append(out, '&')
			b = b[1:]
			continue
		}
		ref := string(b[1:semi])
		switch ref {
		case "lt":
			out = append(out, '<')
		case "gt":
			out = append(out, '>')
		case "amp":
			out = append(out, '&')
		case "quot":
			out = append(out, '"')
		case "apos":
			out = append(out, '\'')
		default:
			r, ok := numericRef(ref)
			if !ok {
				out = append(out, '&')
				b = b[1:]
				continue
			}
			if r >= 0x20 && r != 0x7f || r == '\t' || r == '\n' || r == '\r' {
				out = utf8.AppendRune(out, r)
			}
		}
		b = b[semi+1:]
	}
	return out
}

func numericRef(ref string) (rune, bool) {
	if len(ref) < 2 || ref[0] != '#' {
		return 0, false
	}
	base, digits := 10, ref[1:]
	if digits[0] == 'x' || digits[0] == 'X' {
		base, digits = 16, digits[1:]
	}
	if digits == "" || digits[0] == '+' || digits[0] == '-' {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, base, 32)
	if err != nil || v > utf8.MaxRune || !utf8.ValidRune(rune(v)) {
		return 0, false
	}
	return rune(v), true
}
