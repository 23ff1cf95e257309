package mailtext

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
)

func TestLinkDomain(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"http://www.example.com/path", "example.com", true},
		{"HTTPS://WWW.EXAMPLE.COM", "example.com", true},
		{"https://a.b.example.co.uk/x?y#z", "example.co.uk", true},
		{"http://paypal.com@evil.example.org/", "example.org", true},
		{"http://user:pass@host.example.net:8080/", "example.net", true},
		{"http://example.com./", "example.com", true},
		{"http://%65xample.com/", "example.com", true},
		{"http://пример.рф/", "xn--e1afmkfd.xn--p1ai", true},
		{"http://xn--e1afmkfd.xn--p1ai/", "xn--e1afmkfd.xn--p1ai", true},
		{"http://ＥＸＡＭＰＬＥ.com/", "example.com", true},
		{"http:\\\\evil.example.com\\x", "example.com", true},
		{"http:/one-slash.example.com", "example.com", true},
		{"  http://spaces.example.com  ", "example.com", true},
		{"http://ex\tample.com/", "example.com", true},
		{"//proto.example.com/", "example.com", true},
		{"www.example.com", "example.com", true},
		{"ftp://files.example.com/", "example.com", true},
		{"http://192.0.2.1/", "192.0.2.1", true},
		{"http://[2001:db8::1]/", "2001:db8::1", true},
		{"mailto:a@example.com", "", false},
		{"tel:+123", "", false},
		{"javascript:void(0)", "", false},
		{"cid:abc@def", "", false},
		{"/relative/path", "", false},
		{"#anchor", "", false},
		{"http://localhost/", "", false},
		{"http://com/", "", false},
		{"http://bad host.com/", "", false},
		{"", "", false},
	}
	for _, tc := range tests {
		got, ok := linkDomain(tc.in, &domainMemo{})
		if got != tc.want || ok != tc.ok {
			t.Errorf("linkDomain(%q): got %q %v, want %q %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestTextDomains(t *testing.T) {
	text := "Go to http://one.example.com/a, or www.two.example.org. Not mywww.three.example.net nor mailto:x@four.example.com; HTTPS://FIVE.EXAMPLE.CO.UK/x."
	got := strings.Join(appendTextDomains(nil, text, &domainMemo{}), " ")
	if want := "example.com example.org example.co.uk"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestDecodeBase64(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{"aGVsbG8=", "hello", false},
		{"aGVs\r\nbG8=\n", "hello", false},
		{"  aGVs bG8= ", "hello", false},
		{"aGVs!bG8=", "hello", true},
		{"aGVsbG8=d29ybGQ=", "helloworld", false}, // concatenated blocks
		{"aGVsbG8", "hello", false},               // missing padding
		{"a", "", true},
		{"", "", false},
	}
	for _, tc := range tests {
		got, bad := decodeBase64(nil, []byte(tc.in))
		if string(got) != tc.want || bad != tc.bad {
			t.Errorf("decodeBase64(%q): got %q bad=%v, want %q bad=%v", tc.in, got, bad, tc.want, tc.bad)
		}
	}
}

func TestDecodeQP(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{"caf=C3=A9", "caf\u00e9", false},
		{"soft=\nbreak", "softbreak", false},
		{"soft=  \r\nbreak", "softbreak", false},
		{"trailing   \nspace", "trailing\nspace", false},
		{"bad =ZZ seq", "bad =ZZ seq", true},
		{"lower =c3=a9", "lower \u00e9", false},
		{"end =", "end ", false},
		{"a=3", "a=3", true},
	}
	for _, tc := range tests {
		got, bad := decodeQP(nil, []byte(tc.in))
		if string(got) != tc.want || bad != tc.bad {
			t.Errorf("decodeQP(%q): got %q bad=%v, want %q bad=%v", tc.in, got, bad, tc.want, tc.bad)
		}
	}
}

// TestDecodeText checks the charset fallback rules on each kind of lie.
func TestDecodeText(t *testing.T) {
	ru := "Привет, это проверка кодировки"
	koi, _ := charmap.KOI8R.NewEncoder().String(ru)
	cp1251, _ := charmap.Windows1251.NewEncoder().String(ru)
	cp866, _ := charmap.CodePage866.NewEncoder().String(ru)
	latin, _ := charmap.Windows1252.NewEncoder().String("Café crème")
	tests := []struct {
		name, raw, label, want string
		defect                 DefectKind
	}{
		{"ascii", "plain", "", "plain", ""},
		{"utf8 valid", "Café", "utf-8", "Café", ""},
		{"utf8 labelled latin1", "Café crème", "iso-8859-1", "Café crème", DefectCharsetMismatch},
		{"latin1 labelled", latin, "iso-8859-1", "Café crème", ""},
		{"latin2 with windows-1250 quotes", "We\x92re \x96 ok", "iso-8859-2", "We\u2019re \u2013 ok", ""},
		{"latin1 labelled utf8", latin, "utf-8", "Café crème", DefectCharsetMismatch},
		{"koi8r labelled", koi, "koi8-r", ru, ""},
		{"koi8r labelled utf8", koi, "utf-8", ru, DefectCharsetMismatch},
		{"koi8r unlabelled", koi, "", ru, DefectCharsetGuessed},
		{"cp1251 unknown label", cp1251, "x-bogus", ru, DefectCharsetUnknown},
		{"cp1251 labelled us-ascii", cp1251, "us-ascii", ru, DefectCharsetMismatch},
		{"cp866 unlabelled", cp866, "", ru, DefectCharsetGuessed},
		{"alias cp1251", cp1251, "cp1251", ru, ""},
		{"alias win-1251", cp1251, "win-1251", ru, ""},
		{"iso-2022-jp unlabelled", "\x1b$B$3$s$K$A$O\x1b(B", "", "こんにちは", DefectCharsetGuessed},
		{"utf-16 labelled", "\x00h\x00i", "utf-16be", "hi", ""},
		{"utf-7", "Hi +Jjo-", "utf-7", "Hi ☺", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := getWalker(DefaultLimits)
			defer putWalker(w)
			got := w.decodeText([]byte(tc.raw), tc.label, "")
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			var kinds []DefectKind
			for _, d := range w.t.Defects {
				kinds = append(kinds, d.Kind)
			}
			if tc.defect == "" && len(kinds) > 0 || tc.defect != "" && (len(kinds) != 1 || kinds[0] != tc.defect) {
				t.Errorf("defects: got %v, want %q", kinds, tc.defect)
			}
		})
	}
}

func TestDecodeSubject(t *testing.T) {
	koi, _ := charmap.KOI8R.NewEncoder().String("Скидка")
	tests := []struct{ raw, hint, want string }{
		{"plain subject", "", "plain subject"},
		{"=?utf-8?B?0J/RgNC40LLQtdGC?=", "", "Привет"},
		{"=?koi8-r?B?8NLJ18XU?=", "", "Привет"},
		{"=?windows-1251?Q?=CF=F0=E8=E2=E5=F2?= world", "", "Привет world"},
		{"=?utf-8?q?a?= =?utf-8?q?b?=", "", "ab"},
		{"=?x-unknown?Q?=CF=F0=E8=E2=E5=F2?=", "", "Привет"},
		{"=?iso-8859-1?Q?caf=C3=A9?=", "", "café"}, // UTF-8 bytes labelled latin-1
		{koi, "koi8-r", "Скидка"},
		{koi, "", "Скидка"},
		{"multi\r\n line", "", "multi line"},
		{"=?utf-8?B?broken", "", "=?utf-8?B?broken"},
		{"=?utf-8?Q?a_b?= x =?utf-8?Q?c?=", "", "a b x c"},
		{"pre=?utf-8?Q?fix?=", "", "prefix"},
		{"=?UTF-8*en?Q?lang?=", "", "lang"},
	}
	for _, tc := range tests {
		w := getWalker(DefaultLimits)
		got := w.decodeSubject(tc.raw, tc.hint)
		putWalker(w)
		if got != tc.want {
			t.Errorf("decodeSubject(%q, %q): got %q, want %q", tc.raw, tc.hint, got, tc.want)
		}
	}
}

func TestUnflow(t *testing.T) {
	tests := []struct {
		in    string
		delsp bool
		want  string
	}{
		{"a \nb\n", false, "a b\n"},
		{"wra \npped\n", true, "wrapped\n"},
		{" stuffed\n", false, "stuffed\n"},
		{"-- \nsig\n", false, "-- \nsig\n"},
		{"fixed\nlines\n", false, "fixed\nlines\n"},
	}
	for _, tc := range tests {
		if got := unflow(tc.in, tc.delsp); got != tc.want {
			t.Errorf("unflow(%q, %v): got %q, want %q", tc.in, tc.delsp, got, tc.want)
		}
	}
}

func TestMediaTypeParams(t *testing.T) {
	tests := []struct {
		v                     string
		mt, charset, boundary string
		flowed, delsp         bool
	}{
		{`text/plain; charset="UTF-8"; format=flowed; delsp=yes`, "text/plain", "utf-8", "", true, true},
		{`multipart/mixed; boundary="----=_Part_1"`, "multipart/mixed", "", "----=_Part_1", false, false},
		{`multipart/mixed;boundary=abc;`, "multipart/mixed", "", "abc", false, false},
		{`text/html charset=koi8-r`, "text/html", "koi8-r", "", false, false},
		{`TEXT/HTML; CHARSET=Windows-1251`, "text/html", "windows-1251", "", false, false},
		{`text/plain; charset*=utf-8''iso-8859-1`, "text/plain", "iso-8859-1", "", false, false},
		{`multipart/mixed; boundary*0="ab"; boundary*1="cd"`, "multipart/mixed", "", "abcd", false, false},
		{`text/plain; charset="unterminated`, "text/plain", "unterminated", "", false, false},
		{``, "text/plain", "", "", false, false},
		{`garbage`, "text/plain", "", "", false, false},
	}
	for _, tc := range tests {
		h := partHeader{contentType: tc.v}
		h.parse()
		if h.mediaType != tc.mt || h.charset != tc.charset || h.boundary != tc.boundary || h.flowed != tc.flowed || h.delsp != tc.delsp {
			t.Errorf("parse(%q): got %q %q %q %v %v, want %q %q %q %v %v", tc.v,
				h.mediaType, h.charset, h.boundary, h.flowed, h.delsp, tc.mt, tc.charset, tc.boundary, tc.flowed, tc.delsp)
		}
	}
}

// charmaps is every single-byte charset x/text has.
func charmaps() []*charmap.Charmap {
	var out []*charmap.Charmap
	for _, e := range charmap.All {
		if cm, ok := e.(*charmap.Charmap); ok {
			out = append(out, cm)
		}
	}
	return out
}

// checkCharmap fails t unless decodeCharmap gives what the general path
// (x/text's transformer, then a repair of invalid UTF-8) gives, and records
// an invalid-UTF-8 defect exactly when it does.
func checkCharmap(t testing.TB, cm *charmap.Charmap, raw []byte) {
	t.Helper()
	var dec encoding.Encoding = cm
	out, err := dec.NewDecoder().Bytes(raw)
	if err != nil {
		out = raw
	}
	want := strings.ToValidUTF8(string(out), "\uFFFD")
	wantDefect := strings.ContainsRune(want, '\uFFFD') && !bytes.Contains(raw, []byte("\xef\xbf\xbd"))
	w := getWalker(DefaultLimits)
	defer putWalker(w)
	got := w.decodeCharmap(cm, raw)
	if got != want {
		t.Fatalf("%v: %q decodes to %q, want %q", cm, raw, got, want)
	}
	if gotDefect := len(w.t.Defects) > 0; gotDefect != wantDefect {
		t.Fatalf("%v: %q: defect %v, want %v", cm, raw, gotDefect, wantDefect)
	}
}

// The one-pass single-byte decoder equals x/text's transformer for every
// charset of x/text (EBCDIC ones included) on every byte.
func TestDecodeCharmap(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	rng := rand.New(rand.NewPCG(1, 252))
	for _, cm := range charmaps() {
		checkCharmap(t, cm, nil)
		checkCharmap(t, cm, []byte("plain ASCII, as most parts are"))
		checkCharmap(t, cm, all)
		checkCharmap(t, cm, []byte("\xef\xbf\xbd and \x81\x8d\x8f\x90\x9d"))
		for range 20 {
			raw := make([]byte, rng.IntN(64))
			for i := range raw {
				raw[i] = byte(rng.Uint32())
			}
			checkCharmap(t, cm, raw)
		}
	}
	if asciiSuperset[charmap.CodePage037] || !asciiSuperset[charmap.Windows1252] || !asciiSuperset[charmap.KOI8R] {
		t.Error("EBCDIC taken for an ASCII superset, or windows-1252 or KOI8-R not")
	}
}

// FuzzDecodeCharmap: the one-pass single-byte decoder equals x/text's
// transformer for any bytes and charset.
func FuzzDecodeCharmap(f *testing.F) {
	f.Add([]byte("Caf\xe9 cr\xe8me \x93quoted\x94"), uint8(0))
	f.Add([]byte("\xef\xbf\xbd\x81"), uint8(3))
	cms := charmaps()
	f.Fuzz(func(t *testing.T, raw []byte, which uint8) {
		checkCharmap(t, cms[int(which)%len(cms)], raw)
	})
}
