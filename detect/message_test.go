package detect

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		fields    []Field
		body      string
	}{
		{"simple", "A: 1\nB:2\n\nbody\n", []Field{{"A", "1"}, {"B", "2"}}, "body\r\n"},
		{"crlf", "A: 1\r\n\r\nbody", []Field{{"A", "1"}}, "body\r\n"},
		{"folded, LF", "A: 1\n 2\n\t3\nB: x\n\nb", []Field{{"A", "1\n 2\n\t3"}, {"B", "x"}}, "b\r\n"},
		{"folded, CRLF", "A: 1\r\n 2\r\n\t3\r\n\r\nb\r\n", []Field{{"A", "1\n 2\n\t3"}}, "b\r\n"},
		{"folded last", "A: 1\n 2\n", []Field{{"A", "1\n 2"}}, ""},
		{"blank continuation", "A: a\n   \n x\n\nb\n", []Field{{"A", "a\n   \n x"}}, "b\r\n"},
		{"one space only", "A:  two\nB:\ttab\nC:none\nD:\n\n", []Field{{"A", " two"}, {"B", "\ttab"}, {"C", "none"}, {"D", ""}}, ""},
		{"blanks before the colon", "X-Sp : spaced\nX-Tab\t:t\n\n", []Field{{"X-Sp", "spaced"}, {"X-Tab", "t"}}, ""},
		{"8-bit value", "X-8: caf\xc3\xa9 \xe9\n\nb\n", []Field{{"X-8", "caf\xc3\xa9 \xe9"}}, "b\r\n"},
		{"8-bit name is not a field", "Caf\xc3\xa9: x\n\nb\n", nil, "Caf\xc3\xa9: x\r\n\r\nb\r\n"},
		{"no header", "just text\n", nil, "just text\r\n"},
		{"leading continuation", " x\nA: 1\n", nil, " x\r\nA: 1\r\n"},
		{"body without empty line", "A: 1\nnot a field\nmore", []Field{{"A", "1"}}, "not a field\r\nmore\r\n"},
		{"no newline", "A: 1", []Field{{"A", "1"}}, ""},
		{"mbox From line", "From a@b Mon Jan  1 00:00:00 2024\nA: 1\n\nb\n", []Field{{"A", "1"}}, "b\r\n"},
		{"mixed line ends in the body", "A: 1\n\nx\r\ny\nz", []Field{{"A", "1"}}, "x\r\ny\r\nz\r\n"},
		{"bare CR a space, as Postfix", "A: a\rb\n\nc\rd\n", []Field{{"A", "a b"}}, "c d\r\n"},
		{"CRs before LF dropped", "A: a\r\r\n b\r\n\r\n\r\r\nc\r\r\n", []Field{{"A", "a\n b"}}, "\r\nc\r\n"},
		{"empty", "", nil, ""},
	} {
		fields, body := Split([]byte(tc.msg))
		if !reflect.DeepEqual(fields, tc.fields) || string(body) != tc.body {
			t.Errorf("%s: Split = %q, %q; want %q, %q", tc.name, fields, body, tc.fields, tc.body)
		}
	}
}

// A header folded many thousand times splits whole, in linear time.
func TestSplitLongFoldedHeader(t *testing.T) {
	msg := "Subject: x" + strings.Repeat("\n folded", 200_000) + "\n\nbody"
	fields, body := Split([]byte(msg))
	if len(fields) != 1 || len(fields[0].Value) != len(msg)-len("Subject: \n\nbody") || string(body) != "body\r\n" {
		t.Fatalf("Split: %d fields, value %d bytes, body %q", len(fields), len(fields[0].Value), body)
	}
}

// A CRLF body ending in CRLF is handed over as it is, without a copy.
func TestSplitKeepsCRLFBody(t *testing.T) {
	raw := []byte("A: 1\r\n\r\nline\r\nline\r\n")
	_, body := Split(raw)
	if &body[0] != &raw[len("A: 1\r\n\r\n")] {
		t.Error("a CRLF body was copied")
	}
}

func TestBuilderLimits(t *testing.T) {
	lim := DefaultLimits
	lim.HeaderFields, lim.HeaderBytes, lim.FieldBytes = 3, 100, 40
	lim.BodyBytes, lim.Recipients, lim.RecipientBytes, lim.AddressBytes = 10, 3, 1000, 30
	for _, tc := range []struct {
		name      string
		build     func(b *Builder)
		check     func(t *testing.T, b *Builder, m *Message)
		truncated bool
	}{
		{"within limits", func(b *Builder) {
			b.Header("Subject", "hi")
			b.Body([]byte("body"))
			b.Recipient("a@example.test")
		}, func(t *testing.T, b *Builder, m *Message) {
			if m.Header.Get("Subject") != "hi" || len(m.Recipients) != 1 {
				t.Errorf("message %+v", m)
			}
		}, false},
		{"fields past the count", func(b *Builder) {
			for i := range 5 {
				b.Header(fmt.Sprintf("X-%d", i), "v")
			}
		}, func(t *testing.T, b *Builder, m *Message) {
			if n := m.Header.Len(); n != 3 {
				t.Errorf("%d fields kept, want 3", n)
			}
		}, true},
		{"a long value is cut, the next one kept", func(b *Builder) {
			b.Header("To", strings.Repeat("x", 100))
			b.Header("Subject", "kept")
		}, func(t *testing.T, b *Builder, m *Message) {
			if got := len(m.Header.Get("To")); got != 40 {
				t.Errorf("To kept %d bytes, want 40", got)
			}
			if m.Header.Get("Subject") != "kept" {
				t.Error("field after a cut one lost")
			}
		}, true},
		{"header bytes: a field that does not fit is dropped, a later one that fits kept", func(b *Builder) {
			b.Header("A", strings.Repeat("a", 40))
			b.Header("B", strings.Repeat("b", 40))
			b.Header("C", strings.Repeat("c", 40))
			b.Header("D", "d")
		}, func(t *testing.T, b *Builder, m *Message) {
			if m.Header.Has("C") || !m.Header.Has("D") {
				t.Errorf("fields %v", m.Header.Fields())
			}
		}, true},
		{"body cut", func(b *Builder) {
			b.Body([]byte("0123456"))
			b.Body([]byte("789abc"))
		}, func(t *testing.T, b *Builder, m *Message) {
			if body, _ := io.ReadAll(m.Body); string(body) != "0123456789" {
				t.Errorf("body %q", body)
			}
		}, true},
		{"recipients past the count", func(b *Builder) {
			for i := range 5 {
				b.Recipient(fmt.Sprintf("r%d@example.test", i))
			}
		}, func(t *testing.T, b *Builder, m *Message) {
			if len(m.Recipients) != 3 {
				t.Errorf("%d recipients, want 3", len(m.Recipients))
			}
		}, true},
		{"a long address is cut and marked", func(b *Builder) {
			b.Recipient(strings.Repeat("a", 100) + "@example.test")
		}, func(t *testing.T, b *Builder, m *Message) {
			if r := m.Recipients[0]; len(r) != 30 || !b.IsCut(r) {
				t.Errorf("recipient %q", r)
			}
		}, true},
		{"own headers counted, never analysed, names trimmed", func(b *Builder) {
			b.Header("X-Bulk", "yes; forged")
			b.Header("x-bulk ", "yes")
			b.Header(" X-BULK-FEEDBACK", "  not-bulk \n")
			b.Header("X-Bulk-Feedback", "bulk")
		}, func(t *testing.T, b *Builder, m *Message) {
			n, v := b.FeedbackHeaders()
			if b.VerdictHeaders() != 2 || n != 2 || v != "not-bulk" || m.Header.Len() != 0 {
				t.Errorf("verdict %d, feedback %d %q, fields %d", b.VerdictHeaders(), n, v, m.Header.Len())
			}
		}, false},
		{"the first Subject as sent, whatever is analysed", func(b *Builder) {
			for i := range 4 {
				b.Header(fmt.Sprintf("X-%d", i), "v")
			}
			b.Header("Subject", "late\n and long "+strings.Repeat("s", 60))
			b.Header("Subject", "second")
		}, func(t *testing.T, b *Builder, m *Message) {
			v, n, kept := b.Subject()
			if n != 2 || !kept || v != "late\n and long "+strings.Repeat("s", 60) {
				t.Errorf("Subject %q ×%d", v, n)
			}
			// The first Subject is analysed past the limits (cut), the
			// second is not.
			if got := m.Header.Values("Subject"); len(got) != 1 || got[0] != "late and long "+strings.Repeat("s", 25) {
				t.Errorf("analysed Subjects %q", got)
			}
		}, true},
		{"the fields the text is read from are kept past the limits", func(b *Builder) {
			for i := range 4 {
				b.Header(fmt.Sprintf("X-%d", i), "v")
			}
			b.Header("Content-Type", "text/html")
			b.Header("content-transfer-encoding", "base64")
			b.Header("Content-Type", "text/plain")
		}, func(t *testing.T, b *Builder, m *Message) {
			if got := m.Header.Values("Content-Type"); len(got) != 1 || got[0] != "text/html" || m.Header.Get("Content-Transfer-Encoding") != "base64" {
				t.Errorf("fields %v", m.Header.Fields())
			}
		}, true},
		{"envelope", func(b *Builder) {
			b.Sender("<news@example.org>")
			b.Client("IPv6:2001:db8::25")
		}, func(t *testing.T, b *Builder, m *Message) {
			if m.Sender != "<news@example.org>" || m.Client != netip.MustParseAddr("2001:db8::25") {
				t.Errorf("sender %q, client %v", m.Sender, m.Client)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder(lim, "X-Bulk", "X-Bulk-Feedback")
			tc.build(b)
			m := b.Message()
			tc.check(t, b, m)
			if m.Truncated != tc.truncated {
				t.Errorf("truncated = %v, want %v", m.Truncated, tc.truncated)
			}
			b.Reset()
			if m := b.Message(); m.Header.Len() != 0 || len(m.Recipients) != 0 || m.Truncated || b.Held() != 0 {
				t.Errorf("after Reset: %+v, held %d", m, b.Held())
			}
		})
	}
}

// The memory budget: within the floor every byte is granted; past it, a
// refusal cuts the message, which is analysed on what it has.
func TestBuilderGrant(t *testing.T) {
	b := NewBuilder(DefaultLimits, "X-Bulk", "X-Bulk-Feedback")
	var granted, refused int
	b.Grant = func(n int, must bool) bool {
		if must {
			granted += n
			return true
		}
		refused += n
		return false
	}
	b.Header("Subject", "hello")
	b.Body(bytes.Repeat([]byte("x"), floor-100))
	b.Body(bytes.Repeat([]byte("y"), 200))
	m := b.Message()
	body, _ := io.ReadAll(m.Body)
	if !m.Truncated || len(body) != floor-100 || granted != b.Held() || refused != 200 {
		t.Errorf("truncated %v, body %d, granted %d, held %d, refused %d", m.Truncated, len(body), granted, b.Held(), refused)
	}
}

func FuzzSplit(f *testing.F) {
	for _, s := range []string{
		"From a@b Mon Jan 1\nSubject: x\n folded\nX-Bulk: yes\n\nbody",
		"Subject: x\r\nX-Bulk-Feedback: not-bulk\r\n\r\nbody",
		"not a header\nSubject: x\n",
		"A: " + strings.Repeat("v", 20000) + "\n " + strings.Repeat("w", 20000) + "\n\nb",
		" leading fold\n\n",
		"A : b\r\nC:\td\r\n \r\n\r\nx\ry\nz",
	} {
		f.Add([]byte(s))
	}
	lim := DefaultLimits
	lim.HeaderFields, lim.FieldBytes, lim.BodyBytes = 8, 100, 1000
	f.Fuzz(func(t *testing.T, raw []byte) {
		fields, body := Split(raw)
		for _, fl := range fields {
			if fl.Name == "" || strings.ContainsAny(fl.Name, ": \t\r\n") || strings.Contains(fl.Value, "\r\n") {
				t.Fatalf("field %q", fl)
			}
		}
		if len(body) > 0 && !bytes.HasSuffix(body, []byte("\r\n")) {
			t.Fatalf("body %q does not end with CRLF", body)
		}
		if bytes.Count(body, []byte("\n")) != bytes.Count(body, []byte("\r\n")) {
			t.Fatalf("body %q has a bare LF", body)
		}
		b := NewBuilder(lim, "X-Bulk", "X-Bulk-Feedback")
		b.ReadRaw(raw)
		m := b.Message()
		n := 0
		for fl := m.Header.Fields(); fl.Next(); n++ {
			if strings.EqualFold(fl.Key(), "X-Bulk") || strings.EqualFold(fl.Key(), "X-Bulk-Feedback") {
				t.Errorf("kept %s", fl.Key())
			}
			if len(fl.Value()) > lim.FieldBytes {
				t.Errorf("field %s: %d bytes", fl.Key(), len(fl.Value()))
			}
		}
		if n > lim.HeaderFields {
			t.Errorf("%d fields kept", n)
		}
		if got, _ := io.ReadAll(m.Body); len(got) > lim.BodyBytes {
			t.Errorf("%d body bytes kept", len(got))
		}
		// ReadRaw on a builder that held another message, against the
		// former way on a fresh one.
		b.Reset()
		b.ReadRaw(raw)
		if diff := diffBuilt(b, lim, raw); diff != "" {
			t.Error(diff)
		}
	})
}

// diffBuilt compares what b built of raw with what a fresh builder builds
// the former way: Split, then every field through Header and the body
// through Body. Empty when they agree.
func diffBuilt(b *Builder, lim Limits, raw []byte) string {
	ref := NewBuilder(lim, "X-Bulk", "X-Bulk-Feedback")
	ref.Grant = b.Grant
	fields, body := Split(raw)
	for _, f := range fields {
		ref.Header(f.Name, f.Value)
	}
	ref.Body(body)
	got, want := b.Message(), ref.Message()
	gotBody, _ := io.ReadAll(got.Body)
	wantBody, _ := io.ReadAll(want.Body)
	var gotF, wantF [][2]string
	for f := got.Header.Fields(); f.Next(); {
		gotF = append(gotF, [2]string{f.Key(), f.Value()})
	}
	for f := want.Header.Fields(); f.Next(); {
		wantF = append(wantF, [2]string{f.Key(), f.Value()})
	}
	switch {
	case !bytes.Equal(gotBody, wantBody):
		return fmt.Sprintf("body %q, want %q", gotBody, wantBody)
	case !reflect.DeepEqual(gotF, wantF):
		return fmt.Sprintf("fields %q, want %q", gotF, wantF)
	case got.Truncated != want.Truncated || b.Held() != ref.Held():
		return fmt.Sprintf("truncated %v, held %d; want %v, %d", got.Truncated, b.Held(), want.Truncated, ref.Held())
	}
	return ""
}

// ReadRaw makes the body's line ends CRLF straight into the builder's
// buffer (readBody), and Runtime.Check reuses builders: each message,
// read after larger, cut or broken ones by one builder, is built as a
// fresh builder builds it from Split, cut at a line end with lines left
// (10 bytes) and without (20), or inside a line. A body or field left
// from the message before, or a cut at another byte, fails it.
func TestReadRawReused(t *testing.T) {
	big := "Subject: big\nX-A: 1\n\n" + strings.Repeat("a long line of the large message\n", 10000)
	msgs := []string{
		big,
		"Subject: lf\nX-B: 2\n folded\n\nline one\nline two\n",
		"Subject: crlf\r\n\r\nline\r\nline\r\n",
		"Subject: mixed\n\nx\r\ny\nz",
		"Subject: bare cr\n\nc\rd\n\r\r\ne\r\r\n",
		"not a header at all\nmore\n",
		"",
		"Subject: no body\n",
		big,
		"X-C: 3\n\n" + strings.Repeat("0123456789\n", 40),
	}
	for _, lim := range []Limits{DefaultLimits, {BodyBytes: 25}, {BodyBytes: 20}, {BodyBytes: 10}, {BodyBytes: 12, HeaderFields: 1}} {
		lim = lim.orDefault()
		for _, grant := range []func(int, bool) bool{nil, func(_ int, must bool) bool { return must }} {
			b := NewBuilder(lim, "X-Bulk", "X-Bulk-Feedback")
			b.Grant = grant
			for i, m := range msgs {
				b.ReadRaw([]byte(m))
				if diff := diffBuilt(b, lim, []byte(m)); diff != "" {
					t.Errorf("body limit %d, grant %v, message %d: %s", lim.BodyBytes, grant != nil, i, diff)
				}
				b.Reset()
			}
		}
	}
}
