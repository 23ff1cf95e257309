package eval

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime/quotedprintable"
	"strings"
	"unicode/utf8"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // decode the bases' charsets
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"

	"github.com/bulkmilter/bulkmilter/mailtext"
)

// Mail is a real message reduced to what the copies of a campaign vary: the
// Subject, the text/plain and text/html bodies (decoded to UTF-8), a few
// header fields, and how the copy is encoded. Attachments are dropped: no
// family reads them.
type Mail struct {
	From    string
	Subject string
	Date    string
	Plain   string // text/plain body; "" when the message has none
	HTML    string // text/html body; "" when the message has none

	// Rendering of one copy.
	To       Person // the recipient; its Name goes into the To header
	Cc       Person // when its Address is set, a Cc field with its Name
	MsgID    string
	Charset  string // charset of the text parts; "" is utf-8
	Subj8    string // charset of the Subject's encoded-words; "" is utf-8
	CTE      string // transfer encoding: "" (7bit/8bit as needed), "base64", "quoted-printable"
	AltPlain string // when set, the plain alternative says this instead of Plain
	Boundary string
}

// Clone returns a copy that can be edited independently.
func (m *Mail) Clone() *Mail {
	c := *m
	return &c
}

// errNoText is returned by Load for a message without a usable text part.
var errNoText = errors.New("no text part")

// Load reads a real message into a Mail: the first text/plain and the first
// text/html part that are not attachments, and the decoded Subject.
func Load(raw []byte) (*Mail, error) {
	e, err := message.Read(bytes.NewReader(raw))
	if err != nil && e == nil {
		return nil, fmt.Errorf("parse message: %w", err)
	}
	m := &Mail{
		From: oneLine(e.Header.Get("From")),
		Date: oneLine(e.Header.Get("Date")),
		// mailtext decodes broken encoded-words as the pipeline does.
		Subject: mailtext.Extract(bytes.NewReader(raw), mailtext.DefaultLimits).Subject,
	}
	if m.From == "" {
		m.From = "sender@example.com"
	}
	werr := e.Walk(func(_ []int, part *message.Entity, err error) error {
		if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
			return err
		}
		if part.MultipartReader() != nil {
			return nil
		}
		if disp, _, _ := part.Header.ContentDisposition(); disp == "attachment" {
			return nil
		}
		t, params, _ := part.Header.ContentType()
		if t == "" {
			t = "text/plain"
		}
		if t != "text/plain" && t != "text/html" {
			return nil
		}
		body, err := io.ReadAll(io.LimitReader(part.Body, 1<<20))
		if err != nil {
			return err
		}
		// go-message converts a charset it knows; bytes it left as they
		// came (no label, a wrong or unknown one) are read as the
		// pipeline reads them, so that a campaign is made of the base's
		// text and not of replacement characters.
		s := string(body)
		if !utf8.Valid(body) {
			s = mailtext.DecodeCharset(body, params["charset"])
		}
		switch {
		case t == "text/plain" && m.Plain == "":
			m.Plain = s
		case t == "text/html" && m.HTML == "":
			m.HTML = s
		}
		return nil
	})
	if werr != nil {
		return nil, fmt.Errorf("read parts: %w", werr)
	}
	if strings.TrimSpace(m.Plain) == "" && strings.TrimSpace(m.HTML) == "" {
		return nil, errNoText
	}
	return m, nil
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// charsets the copies may be written in, by label.
var charsets = map[string]encoding.Encoding{
	"iso-8859-1":   charmap.ISO8859_1,
	"iso-8859-15":  charmap.ISO8859_15,
	"windows-1252": charmap.Windows1252,
	"koi8-r":       charmap.KOI8R,
	"windows-1251": charmap.Windows1251,
	"iso-8859-5":   charmap.ISO8859_5,
	"ibm866":       charmap.CodePage866,
	"utf-16":       unicode.UTF16(unicode.BigEndian, unicode.UseBOM),
	"utf-16le":     unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM),
}

// encodeCharset converts UTF-8 text to a charset. ok is false when the
// charset cannot hold a letter or digit of the text (punctuation it cannot
// hold becomes "?", as mail software does).
func encodeCharset(s, label string) (b []byte, ok bool) {
	enc, known := charsets[label]
	if label == "" || label == "utf-8" || !known {
		return []byte(s), label == "" || label == "utf-8"
	}
	e := enc.NewEncoder()
	if b, err := e.Bytes([]byte(s)); err == nil {
		return b, true
	}
	// Something is not representable: go rune by rune.
	var out bytes.Buffer
	var buf [16]byte
	for _, r := range s {
		n := utf8.EncodeRune(buf[:], r)
		enc, err := e.Bytes(buf[:n])
		if err != nil {
			if isWordRune(r) {
				return nil, false
			}
			enc, _ = e.Bytes([]byte("?"))
		}
		out.Write(enc)
	}
	if label == "utf-16" {
		// UseBOM writes a BOM per call; keep the first.
		return utf16OneBOM(out.Bytes()), true
	}
	return out.Bytes(), true
}

// utf16OneBOM removes the byte-order marks the per-rune encoder wrote,
// keeping the first.
func utf16OneBOM(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i+1 < len(b); i += 2 {
		if b[i] == 0xFE && b[i+1] == 0xFF && i > 0 {
			continue
		}
		out = append(out, b[i], b[i+1])
	}
	return out
}

// CanEncode reports whether a charset holds every letter of the copy's text.
func (m *Mail) CanEncode(label string) bool {
	for _, s := range []string{m.Plain, m.HTML, m.AltPlain} {
		if _, ok := encodeCharset(s, label); !ok {
			return false
		}
	}
	return true
}

// Render writes the copy as an RFC 5322 message with CRLF line endings:
// text/plain, text/html, or multipart/alternative when both are present.
func (m *Mail) Render() []byte {
	var b bytes.Buffer
	hdr := func(name, value string) { b.WriteString(name + ": " + value + "\r\n") }
	hdr("From", m.From)
	to := m.To.Address
	if to == "" {
		to = "recipient@example.net"
	}
	if m.To.Name != "" {
		to = encodeWord(m.To.Name, "", true) + " <" + to + ">"
	}
	hdr("To", to)
	if m.Cc.Address != "" {
		hdr("Cc", encodeWord(m.Cc.Name, "", true)+" <"+m.Cc.Address+">")
	}
	hdr("Subject", encodeWord(m.Subject, m.Subj8, false))
	if m.Date != "" {
		hdr("Date", m.Date)
	}
	if m.MsgID != "" {
		hdr("Message-ID", "<"+m.MsgID+">")
	}
	hdr("MIME-Version", "1.0")

	plain := m.Plain
	if m.AltPlain != "" {
		plain = m.AltPlain
	}
	switch {
	case m.HTML != "" && plain != "":
		boundary := m.Boundary
		if boundary == "" {
			boundary = "=_alt_boundary"
		}
		hdr("Content-Type", `multipart/alternative; boundary="`+boundary+`"`)
		b.WriteString("\r\nThis is a multi-part message in MIME format.\r\n")
		for _, p := range []struct{ typ, text string }{{"text/plain", plain}, {"text/html", m.HTML}} {
			b.WriteString("\r\n--" + boundary + "\r\n")
			m.writePart(&b, p.typ, p.text)
		}
		b.WriteString("\r\n--" + boundary + "--\r\n")
	case m.HTML != "":
		m.writePart(&b, "text/html", m.HTML)
	default:
		m.writePart(&b, "text/plain", plain)
	}
	return b.Bytes()
}

// writePart writes one text part's header, blank line and encoded body.
func (m *Mail) writePart(b *bytes.Buffer, typ, text string) {
	label := m.Charset
	text = string(crlf([]byte(text)))
	data, ok := encodeCharset(text, label)
	if !ok || label == "" {
		label, data = "utf-8", []byte(text)
	}
	cte := m.CTE
	wide := strings.HasPrefix(label, "utf-16")
	if wide {
		// NUL bytes cannot travel as 8bit, and quoted-printable is a
		// line-oriented text encoding: mailers send UTF-16 in base64.
		cte = "base64"
	}
	if cte == "" {
		cte = "7bit"
		for _, c := range data {
			if c >= 0x80 {
				cte = "8bit"
				break
			}
		}
	}
	b.WriteString("Content-Type: " + typ + "; charset=\"" + label + "\"\r\n")
	b.WriteString("Content-Transfer-Encoding: " + cte + "\r\n\r\n")
	switch cte {
	case "base64":
		enc := base64.StdEncoding.EncodeToString(data)
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\r\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\r\n")
	case "quoted-printable":
		w := quotedprintable.NewWriter(b)
		w.Write(data)
		w.Close()
		b.WriteString("\r\n")
	default:
		b.Write(data)
		b.WriteString("\r\n")
	}
}

// crlf normalises line endings to CRLF.
func crlf(data []byte) []byte {
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	return bytes.ReplaceAll(data, []byte("\n"), []byte("\r\n"))
}

// encodeWord returns s as a header value: as is when it is ASCII, otherwise
// RFC 2047 base64 encoded-words in the given charset (utf-8 when it cannot
// hold s). A phrase (a display name) is quoted when it needs to be.
func encodeWord(s, label string, phrase bool) string {
	s = oneLine(s)
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 || s[i] < 0x20 {
			ascii = false
			break
		}
	}
	if ascii {
		if phrase && strings.ContainsAny(s, `"(),.:;<>@[\]`) {
			return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
		}
		return s
	}
	if strings.HasPrefix(label, "utf-16") {
		label = ""
	}
	data, ok := encodeCharset(s, label)
	if !ok || label == "" {
		label, data = "utf-8", []byte(s)
	}
	// Encoded-words of at most 75 characters, never splitting a UTF-8
	// sequence.
	var words []string
	for len(data) > 0 {
		n := min(len(data), 39)
		if label == "utf-8" {
			for n < len(data) && n > 0 && !utf8.RuneStart(data[n]) {
				n--
			}
			if n == 0 {
				n = min(len(data), 4)
			}
		}
		words = append(words, "=?"+label+"?B?"+base64.StdEncoding.EncodeToString(data[:n])+"?=")
		data = data[n:]
	}
	return strings.Join(words, "\r\n ")
}
