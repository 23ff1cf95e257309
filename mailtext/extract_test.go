package mailtext

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/emersion/go-message/textproto"
)

func extractString(s string, lim Limits) *Text {
	return Extract(strings.NewReader(s), lim)
}

func hasDefect(t *Text, k DefectKind) bool {
	for _, d := range t.Defects {
		if d.Kind == k {
			return true
		}
	}
	return false
}

func allText(t *Text) string {
	var b strings.Builder
	for _, p := range t.Parts {
		b.WriteString(p.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// nested builds a message of n nested multipart/mixed levels with text at
// the bottom.
func nested(n int, text string) string {
	var b strings.Builder
	b.WriteString("Subject: deep\nContent-Type: multipart/mixed; boundary=\"b0\"\n\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "--b%d\nContent-Type: multipart/mixed; boundary=\"b%d\"\n\n", i, i+1)
	}
	fmt.Fprintf(&b, "--b%d\nContent-Type: text/plain\n\n%s\n--b%d--\n", n, text, n)
	for i := n - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "--b%d--\n", i)
	}
	return b.String()
}

// TestDeepNesting checks that nesting is cut at the depth limit (the text
// below it is not read, the walk does not descend) while shallower text
// survives.
func TestDeepNesting(t *testing.T) {
	lim := Limits{MaxDepth: 32, MaxParts: 100000, MaxTextBytes: 1 << 20}
	tx := extractString(nested(10, "shallow text"), lim)
	if !strings.Contains(allText(tx), "shallow text") || hasDefect(tx, DefectDepthLimit) {
		t.Errorf("10 levels: got %q, defects %v", allText(tx), tx.Defects)
	}
	tx = extractString(nested(10000, "too deep"), lim)
	if strings.Contains(allText(tx), "too deep") {
		t.Error("text below the depth limit was read")
	}
	if !hasDefect(tx, DefectDepthLimit) {
		t.Errorf("depth limit not reported: %v", tx.Defects)
	}
	if tx.Stats.MaxDepth > lim.MaxDepth {
		t.Errorf("walked to depth %d, limit %d", tx.Stats.MaxDepth, lim.MaxDepth)
	}
	if tx.Stats.Parts > lim.MaxDepth+1 {
		t.Errorf("visited %d parts under a depth limit of %d", tx.Stats.Parts, lim.MaxDepth)
	}
}

// TestNestedRFC822 checks that message/rfc822 counts toward the depth.
func TestNestedRFC822(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, "Subject: level %d\nContent-Type: message/rfc822\n\n", i)
	}
	b.WriteString("Subject: bottom\n\nbottom text\n")
	tx := extractString(b.String(), Limits{MaxDepth: 8})
	if !hasDefect(tx, DefectDepthLimit) || strings.Contains(allText(tx), "bottom text") {
		t.Errorf("message/rfc822 nesting not limited: %q %v", allText(tx), tx.Defects)
	}
	if tx.Subject != "level 0" || len(tx.Parts) == 0 || tx.Parts[0].Text != "level 1" {
		t.Errorf("forwarded subjects: got %q and %v", tx.Subject, tx.Parts)
	}
}

func TestPartLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("Content-Type: multipart/mixed; boundary=x\n\n")
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&b, "--x\nContent-Type: text/plain\n\npart%d\n", i)
	}
	b.WriteString("--x--\n")
	tx := extractString(b.String(), Limits{MaxParts: 10})
	if tx.Stats.Parts != 10 || len(tx.Parts) != 9 || !hasDefect(tx, DefectPartLimit) {
		t.Errorf("got %d parts visited, %d text parts, defects %v", tx.Stats.Parts, len(tx.Parts), tx.Defects)
	}
}

func TestTextLimit(t *testing.T) {
	body := strings.Repeat("word ", 10000) // 50,000 bytes
	tx := extractString("Content-Type: multipart/mixed; boundary=x\n\n--x\n\n"+body+"\n--x\n\nsecond part\n--x--\n", Limits{MaxTextBytes: 1000})
	if tx.Stats.TextBytes > 1000 {
		t.Errorf("kept %d bytes, limit 1000", tx.Stats.TextBytes)
	}
	if tx.Stats.TruncatedBytes < 40000 || !hasDefect(tx, DefectTextLimit) {
		t.Errorf("truncated=%d defects=%v", tx.Stats.TruncatedBytes, tx.Defects)
	}
	// Charset decoding can grow text (1 byte of windows-1251 → 2 of UTF-8);
	// the limit holds on the decoded text.
	cyr := bytes.Repeat([]byte{0xEF, 0xF0, 0xE8, 0x20}, 1000)
	tx = Extract(bytes.NewReader(append([]byte("Content-Type: text/plain; charset=windows-1251\n\n"), cyr...)), Limits{MaxTextBytes: 1000})
	if tx.Stats.TextBytes > 1000 || !utf8.ValidString(tx.Parts[0].Text) {
		t.Errorf("windows-1251 text: kept %d bytes, limit 1000", tx.Stats.TextBytes)
	}
}

// allocated runs f and returns the bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// patternReader yields n bytes of a repeated pattern without holding them.
type patternReader struct {
	pat []byte
	n   int64
	off int
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.n {
		p = p[:r.n]
	}
	for i := range p {
		p[i] = r.pat[r.off]
		r.off = (r.off + 1) % len(r.pat)
	}
	r.n -= int64(len(p))
	return len(p), nil
}

// TestHugeInputsBounded checks that memory stays bounded by the limits, not
// by the input: a 50 MB body, a 50 MB attachment, a 1 MB header line, a
// 50 MB line.
func TestHugeInputsBounded(t *testing.T) {
	const mb = 1 << 20
	tests := []struct {
		name string
		r    func() io.Reader
	}{
		{"50MB text body", func() io.Reader {
			return io.MultiReader(strings.NewReader("Subject: big\n\n"), &patternReader{pat: []byte("spam spam spam\n"), n: 50 * mb})
		}},
		{"50MB attachment", func() io.Reader {
			return io.MultiReader(strings.NewReader("Content-Type: multipart/mixed; boundary=x\n\n--x\n\nhello\n--x\nContent-Type: application/zip\nContent-Transfer-Encoding: base64\n\n"),
				&patternReader{pat: []byte("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=\n"), n: 50 * mb},
				strings.NewReader("\n--x--\n"))
		}},
		{"1MB header line", func() io.Reader {
			return io.MultiReader(strings.NewReader("Subject: "), &patternReader{pat: []byte("x"), n: mb}, strings.NewReader("\n\nbody\n"))
		}},
		{"50MB line", func() io.Reader {
			return io.MultiReader(strings.NewReader("Subject: x\n\n"), &patternReader{pat: []byte("y"), n: 50 * mb})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tx *Text
			n := allocated(func() { tx = Extract(tc.r(), DefaultLimits) })
			// The text limit is 1 MB: decoding, HTML and the result may take
			// a few copies of it, never a copy of the input.
			t.Logf("allocated %.1f MB", float64(n)/mb)
			if n > 12*mb {
				t.Errorf("allocated %d MB for a message bounded to %d MB of text", n/mb, DefaultLimits.MaxTextBytes/mb)
			}
			if tx.Stats.TextBytes > DefaultLimits.MaxTextBytes {
				t.Errorf("kept %d bytes of text", tx.Stats.TextBytes)
			}
		})
	}
}

// TestExtractParts checks that the milter path (header already parsed)
// gives the same result as Extract.
func TestExtractParts(t *testing.T) {
	for _, f := range []string{"base64-qp-alternative.eml", "rfc822-forward.eml", "koi8r.eml", "hidden-html.eml", "links.eml"} {
		raw, err := os.ReadFile("testdata/golden/" + f)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(bytes.NewReader(raw))
		h, err := textproto.ReadHeader(br)
		if err != nil {
			t.Fatalf("%s: read header: %v", f, err)
		}
		want := render(Extract(bytes.NewReader(raw), DefaultLimits))
		got := render(ExtractParts(h, br, DefaultLimits))
		if got != want {
			t.Errorf("%s: ExtractParts differs from Extract:\n got %s\nwant %s", f, got, want)
		}
	}
}

// TestNeverFails feeds broken and degenerate messages; each must give a
// Text with valid UTF-8.
func TestNeverFails(t *testing.T) {
	inputs := []string{
		"",
		"\n",
		"Subject: only a header",
		"no header at all, just text",
		"\x00\x01\x02\xff\xfe binary",
		"Content-Type: multipart/mixed\n\nno boundary parameter",
		"Content-Type: multipart/mixed; boundary=\"\"\n\n--\n\nempty boundary",
		"Content-Type: multipart/mixed; boundary=x\n\n--x",
		"Content-Type: multipart/mixed; boundary=x\n\n--x--\n",
		"Content-Type: multipart/alternative; boundary=x\n\n--x\n--x\n--x--",
		"Content-Type: message/rfc822\n\n",
		"Content-Type: message/rfc822\nContent-Transfer-Encoding: base64\n\n!!!!",
		"Content-Type: text/html\n\n<" + strings.Repeat("<a ", 1000),
		"Content-Type: text/plain; charset=utf-16\n\n\xff\xfeh\x00i\x00",
		"Subject: =?utf-8?B?////?=\n\nx",
		"Subject: =?\n\nx",
		" leading continuation\nSubject: x\n\nbody",
		"From \nFrom \nFrom x\n\nbody",
	}
	for _, in := range inputs {
		tx := extractString(in, DefaultLimits)
		if !utf8.ValidString(tx.Subject) {
			t.Errorf("%q: invalid UTF-8 subject %q", in, tx.Subject)
		}
		for _, p := range tx.Parts {
			if !utf8.ValidString(p.Text) {
				t.Errorf("%q: invalid UTF-8 text %q", in, p.Text)
			}
		}
	}
}

// TestBoundaryTolerance covers the boundary cases go-message's reader
// stops on.
func TestBoundaryTolerance(t *testing.T) {
	tests := []struct {
		name, msg string
		want      []string
		defect    DefectKind
	}{
		{"mixed line endings", "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\none\r\n--b\n\ntwo\n--b--\n", []string{"one", "two"}, ""},
		{"missing final boundary", "Content-Type: multipart/mixed; boundary=b\n\n--b\n\none\n--b\n\ntwo\n", []string{"one", "two"}, DefectBoundaryMissing},
		{"boundary never appears", "Content-Type: multipart/mixed; boundary=b\n\njust text\n", []string{"just text"}, DefectBoundaryNotFound},
		{"no boundary parameter", "Content-Type: multipart/mixed\n\nloose text\n", []string{"loose text"}, DefectNoBoundary},
		{"boundary with trailing space", "Content-Type: multipart/mixed; boundary=b\n\n--b  \n\none\n--b-- \n", []string{"one"}, ""},
		{"boundary prefix of another", "Content-Type: multipart/mixed; boundary=ab\n\n--ab\nContent-Type: multipart/mixed; boundary=abc\n\n--abc\n\ninner\n--abc--\n--ab\n\nouter\n--ab--\n", []string{"inner", "outer"}, ""},
		{"part header without colon", "Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\nbroken line\nX-Y: z\n\nafter\n--b--\n", []string{"after"}, DefectHeaderMalformed},
		{"part without header", "Content-Type: multipart/mixed; boundary=b\n\n--b\nno header here\nsecond line\n--b--\n", []string{"no header here\nsecond line"}, DefectHeaderNoBlank},
		{"epilogue ignored", "Content-Type: multipart/mixed; boundary=b\n\npreamble\n--b\n\nbody\n--b--\nepilogue\n", []string{"body"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tx := extractString(tc.msg, DefaultLimits)
			var got []string
			for _, p := range tx.Parts {
				got = append(got, strings.TrimSpace(p.Text))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("parts: got %q, want %q", got, tc.want)
			}
			if tc.defect != "" && !hasDefect(tx, tc.defect) {
				t.Errorf("defect %s not reported: %v", tc.defect, tx.Defects)
			}
		})
	}
}

func TestAlternativeChoice(t *testing.T) {
	alt := func(parts ...string) string {
		var b strings.Builder
		b.WriteString("Content-Type: multipart/alternative; boundary=a\n\n")
		for _, p := range parts {
			b.WriteString("--a\n" + p + "\n")
		}
		b.WriteString("--a--\n")
		return b.String()
	}
	tests := []struct {
		name, msg, want string
	}{
		{"html last wins", alt("Content-Type: text/plain\n\nplain words", "Content-Type: text/html\n\n<p>html words</p>"), "html words"},
		{"html first still wins", alt("Content-Type: text/html\n\n<p>html words</p>", "Content-Type: text/plain\n\nplain words"), "html words"},
		{"empty html falls back", alt("Content-Type: text/plain\n\nplain words", "Content-Type: text/html\n\n<img src=x>"), "plain words"},
		{"hidden-only html falls back", alt("Content-Type: text/plain\n\nplain words", "Content-Type: text/html\n\n<p style=display:none>junk</p>"), "plain words"},
		{"related html", alt("Content-Type: text/plain\n\nplain words", "Content-Type: multipart/related; boundary=r\n\n--r\nContent-Type: text/html\n\n<p>related html</p>\n--r\nContent-Type: image/png\n\nxx\n--r--"), "related html"},
		{"last plain of two", alt("Content-Type: text/plain\n\nfirst", "Content-Type: text/enriched\n\nsecond"), "second"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tx := extractString(tc.msg, DefaultLimits)
			if got := strings.TrimSpace(allText(tx)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestAltMismatch checks that a plain alternative that disagrees with the
// HTML one is counted, and that agreeing ones are not.
func TestAltMismatch(t *testing.T) {
	msg := func(plain, html string) string {
		return "Content-Type: multipart/alternative; boundary=a\n\n--a\nContent-Type: text/plain\n\n" + plain +
			"\n--a\nContent-Type: text/html\n\n" + html + "\n--a--\n"
	}
	same := "the quick brown fox jumps over the lazy dog near the river bank today"
	tx := extractString(msg(same, "<p>"+same+"</p>"), DefaultLimits)
	if tx.Stats.AltMismatch != 0 || tx.Stats.Alternatives != 1 {
		t.Errorf("agreeing alternatives: %+v", tx.Stats)
	}
	tx = extractString(msg(same, "<p>buy cheap pills online now best prices no prescription needed order</p>"), DefaultLimits)
	if tx.Stats.AltMismatch != 1 || !hasDefect(tx, DefectAltMismatch) {
		t.Errorf("disagreeing alternatives: %+v %v", tx.Stats, tx.Defects)
	}
}
