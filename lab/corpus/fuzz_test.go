package corpus

import (
	"bytes"
	"net/mail"
	"strings"
	"testing"
)

// FuzzEnron checks that the converted file is a message whose body is everything after
// the Subject line.
func FuzzEnron(f *testing.F) {
	f.Add([]byte("Subject: re : rankings\r\nthank you .\r\n"))
	f.Add([]byte("Subject: x\n  indented\nbody: like a header\n"))
	f.Add([]byte("Subject: only"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !bytes.HasPrefix(data, []byte("Subject:")) {
			data = append([]byte("Subject: "), data...)
		}
		out := enronToRFC822(data)
		first, rest, _ := bytes.Cut(data, []byte("\n"))
		if !bytes.HasPrefix(out, first) {
			t.Fatalf("subject line changed: %q -> %q", data, out)
		}
		msg, err := mail.ReadMessage(bytes.NewReader(out))
		if err != nil {
			// net/mail rejects some bytes in header values; the header block must still end
			// right after the Subject line.
			if !bytes.Contains(out, []byte("\n\n")) && !bytes.Contains(out, []byte("\n\r\n")) {
				t.Fatalf("no blank line in %q", out)
			}
			return
		}
		if len(msg.Header) != 1 {
			t.Fatalf("got headers %v, want only Subject", msg.Header)
		}
		body := new(bytes.Buffer)
		if _, err := body.ReadFrom(msg.Body); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(body.Bytes(), rest) {
			t.Fatalf("body %q, want %q", body.Bytes(), rest)
		}
	})
}

// escapeSGML is the inverse of decodeEntities for markup characters.
func escapeSGML(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// FuzzSGML checks that any input splits and converts without panic, and that an escaped
// title and body come back from a REUTERS element.
func FuzzSGML(f *testing.F) {
	f.Add([]byte("<REUTERS NEWID=\"1\">\n<TITLE>A &lt;B&gt;</TITLE><BODY>x &amp; y\n&#3;</BODY>\n</REUTERS>\n"), "TITLE", "body\n")
	f.Add([]byte("<REUTERS><REUTERS></REUTERS></REUTERS>&#x;&#99999999999;&"), "a\nb\tc", "Reuter\r\n")
	f.Fuzz(func(t *testing.T, data []byte, title, body string) {
		_ = splitSGML(bytes.NewReader(data), 1<<16, func(id string, doc []byte, _ int64) error {
			if id == "" {
				t.Fatal("empty id")
			}
			if msg, ok := reutersMessage(doc); ok {
				if !bytes.HasPrefix(msg, []byte("Subject: ")) {
					t.Fatalf("message %q does not start with Subject", msg)
				}
				hdr, _, found := bytes.Cut(msg, []byte("\n\n"))
				if !found || bytes.ContainsAny(hdr, "\r\n") {
					t.Fatalf("Subject is not one line: %q", msg)
				}
			}
			return nil
		})

		doc := "<REUTERS NEWID=\"7\">\n<TEXT>\n<TITLE>" + escapeSGML(title) + "</TITLE>\n<BODY>" +
			escapeSGML(body) + "</BODY></TEXT>\n</REUTERS>\n"
		var msgs [][]byte
		if err := splitSGML(strings.NewReader(doc), -1, func(id string, d []byte, _ int64) error {
			if id != "7" {
				t.Fatalf("id %q, want 7", id)
			}
			m, ok := reutersMessage(d)
			if !ok {
				t.Fatalf("no BODY found in %q", d)
			}
			msgs = append(msgs, m)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 {
			t.Fatalf("got %d documents, want 1", len(msgs))
		}
		want := "Subject: " + strings.Join(strings.FieldsFunc(stripControls(title), isASCIISpace), " ") + "\n\n" + body
		if body != "" && !strings.HasSuffix(body, "\n") {
			want += "\n"
		}
		if string(msgs[0]) != want {
			t.Fatalf("got %q, want %q", msgs[0], want)
		}
	})
}

func isASCIISpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\r' || r == '\n' || r == '\v' || r == '\f'
}

// stripControls drops the control characters that are not ASCII whitespace.
func stripControls(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 0x20 || c == 0x7f) && !isASCIISpace(rune(c)) {
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
