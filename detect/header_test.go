package detect

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/emersion/go-message/textproto"
)

// TestHeaderLayout: goHeader and goField are go-message's Header and
// headerField, field for field, so build writes through them; an upgrade
// that changes them fails here (and falls back to Header.Add in production).
func TestHeaderLayout(t *testing.T) {
	if layoutErr != nil {
		t.Fatal(layoutErr)
	}
	// The check itself sees a difference.
	//lint:ignore U1000 a layout to compare, never used
	type otherField struct {
		b    []byte
		v, k string
	}
	//lint:ignore U1000 a layout to compare, never used
	type otherHeader struct {
		l []*otherField
		m map[string][]*otherField
	}
	if err := sameLayout(reflect.TypeOf(otherHeader{}), reflect.TypeOf(textproto.Header{})); err == nil {
		t.Fatal("sameLayout accepts a header whose field has k and v swapped")
	}
}

// added is what Header.Add makes of the fields, one by one, unfolded.
func added(fields []Field) textproto.Header {
	var h textproto.Header
	for _, f := range fields {
		h.Add(f.Name, unfold(f.Value))
	}
	return h
}

func buildFields(fields []Field) textproto.Header {
	l := fieldList{arena: arena{limit: 1 << 20}}
	for _, f := range fields {
		l.add(f.Name, f.Value, textField(f.Name))
	}
	return l.build()
}

// sameHeaders fails unless the two headers are equal, down to go-message's
// unexported fields, and write the same bytes.
func sameHeaders(t *testing.T, got, want textproto.Header) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("built header %v, Header.Add's %v", got.Map(), want.Map())
	}
	g, gerr := writeHeader(got)
	w, werr := writeHeader(want)
	if g != w || (gerr == nil) != (werr == nil) {
		t.Fatalf("built header writes %q (%v), Header.Add's %q (%v)", g, gerr, w, werr)
	}
}

// writeHeader is textproto.WriteHeader with its panic turned into an error:
// go-message v0.18.2's foldLine indexes out of range when a field's name
// leaves no room on a 76-byte line (a 74-byte name: testdata's
// FuzzBuildHeader corpus). Nothing in production writes a header through
// go-message; the test only needs both headers to fare alike.
func writeHeader(h textproto.Header) (s string, err error) {
	var b bytes.Buffer
	defer func() {
		if r := recover(); r != nil {
			s, err = "", fmt.Errorf("go-message WriteHeader panicked: %v", r)
		}
	}()
	err = textproto.WriteHeader(&b, h)
	return b.String(), err
}

func TestBuildHeader(t *testing.T) {
	for _, tt := range []struct {
		name   string
		fields []Field
	}{
		{"none", nil},
		{"one", []Field{{"Subject", "hi"}}},
		{"repeated names", []Field{
			{"Received", "from a"}, {"subject", "x"}, {"Received", "from b"}, {"DKIM-Signature", "v=1"},
			{"RECEIVED", "from c"}, {"Content-Type", "text/plain"}, {"dkim-signature", "v=1; d=x"},
		}},
		{"names go-message keeps as they are", []Field{{"X Odd", "1"}, {"ſubject", "2"}, {"x odd", "3"}, {"X Odd", "4"}, {"", "5"}}},
		{"values", []Field{{"A", ""}, {"B", "two\n lines"}, {"A", strings.Repeat("v", 3000)}, {"C", "\r\n"}, {"B", "x\r\n\ty"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, want := buildFields(tt.fields), added(tt.fields)
			sameHeaders(t, got, want)
			var l fieldList
			for _, f := range tt.fields {
				l.add(f.Name, f.Value, textField(f.Name))
			}
			sameHeaders(t, l.buildByAdd(), want) // the fallback
			// Changed afterwards the way feedback and go-message do, they
			// stay equal: no name's slice runs into another's.
			for _, h := range []*textproto.Header{&got, &want} {
				h.Add("Received", "late")
				for f := h.Fields(); f.Next(); {
					if f.Key() == "Dkim-Signature" || f.Value() == "from b" {
						f.Del()
					}
				}
				h.Set("Subject", "new")
				h.Del("A")
			}
			sameHeaders(t, got, want)
		})
	}
}

// TestBuilderHeaderAllocs: a message of 20 header fields, 12 names, 5 of
// them folded, costs the Builder 8 objects: the Message with its body's
// reader, the header's 6 (the fields, the list and the names' slices in
// one array, the map's 4) and the arena the values are unfolded into (10
// with the reader and the names' slices objects of their own). Header.Add and an
// unfolded string for each folded value made 57 for the header alone.
// Through HeaderBytes, as the milter hands fields over, the fields' own
// bytes go into the arena too: 40 strings were one object each.
func TestBuilderHeaderAllocs(t *testing.T) {
	fields, _ := Split(allocHeader)
	b := NewBuilder(DefaultLimits, "X-Bulk", "X-Bulk-Feedback")
	for _, tt := range []struct {
		name  string
		add   func(Field)
		limit float64
	}{
		{"Header", func(f Field) { b.Header(f.Name, f.Value) }, 8},
		{"HeaderBytes", func(f Field) { b.HeaderBytes([]byte(f.Name), []byte(f.Value)) }, 8},
	} {
		n := testing.AllocsPerRun(100, func() {
			b.Reset()
			for _, f := range fields {
				tt.add(f)
			}
			b.Message()
		})
		t.Logf("%s, %d fields: %.0f objects a message", tt.name, len(fields), n)
		if n > tt.limit {
			t.Errorf("%s, %d fields: %.0f objects a message, want at most %.0f", tt.name, len(fields), n, tt.limit)
		}
	}
}

var allocHeader = []byte("Received: a\n by b\nReceived: b\n by c\nReceived: c\n by d\nReceived: d\nReturn-Path: <a@b>\n" +
	"DKIM-Signature: v=1;\n\tb=x\nDKIM-Signature: v=1;\n\tb=y\nFrom: a@b\nTo: c@d\nCc: e@f\nSubject: s\nDate: d\n" +
	"Message-ID: <x@y>\nMIME-Version: 1.0\nContent-Type: text/plain\nList-Id: <l>\nX-Mailer: m\n" +
	"List-Unsubscribe: <u>\nX-Spam: 1\nX-Other: 2\n\nbody\n")

// TestHeaderBytesOutliveReset: fields handed over as bytes that are
// overwritten after each call (the milter's packet buffer) make the same
// header as strings do, and a message's header stays intact after the
// Builder is reset and reused for others: the arena is let go, never
// written over. Past Limits.HeaderBytes fields are strings of their own.
func TestHeaderBytesOutliveReset(t *testing.T) {
	fields, _ := Split(allocHeader)
	for _, limit := range []int{DefaultLimits.HeaderBytes, 100} {
		lim := DefaultLimits
		lim.HeaderBytes = limit
		ref, b := NewBuilder(lim, "X-Bulk", "X-Bulk-Feedback"), NewBuilder(lim, "X-Bulk", "X-Bulk-Feedback")
		var packet []byte
		feed := func(fs []Field) *Message {
			b.Reset()
			for _, f := range fs {
				packet = append(append(packet[:0], f.Name...), f.Value...)
				b.HeaderBytes(packet[:len(f.Name)], packet[len(f.Name):])
				for i := range packet {
					packet[i] = '#'
				}
			}
			return b.Message()
		}
		for _, f := range fields {
			ref.Header(f.Name, f.Value)
		}
		want := ref.Message().Header
		got := feed(fields)
		sameHeaders(t, got.Header, want)
		for range 3 {
			other := make([]Field, len(fields))
			for i, f := range fields {
				other[i] = Field{f.Name, strings.Repeat("z", len(f.Value)+3)}
			}
			feed(other)
		}
		sameHeaders(t, got.Header, want)
	}
}

func FuzzBuildHeader(f *testing.F) {
	f.Add("Subject\x00hi\x00received\x00a\x00Received\x00b\x00X Odd\x00c")
	f.Add("\x00\x00ſubject\x00x\x00SUBJECT\x00y")
	f.Add("Received\x00a\n b\x00DKIM-Signature\x00v=1;\r\n\tb=x\x00X\x00\n\x00Received\x00c")
	f.Fuzz(func(t *testing.T, s string) {
		parts := strings.Split(s, "\x00")
		var fields []Field
		for i := 0; i+1 < len(parts); i += 2 {
			fields = append(fields, Field{parts[i], parts[i+1]})
		}
		l := fieldList{arena: arena{limit: len(s) / 2}} // in the arena and past it
		var want textproto.Header
		for _, f := range fields {
			if textField(f.Name) && l.hasText(f.Name) != want.Has(f.Name) {
				t.Fatalf("hasText(%q) = %v, Header.Has %v", f.Name, l.hasText(f.Name), want.Has(f.Name))
			}
			l.add(f.Name, f.Value, textField(f.Name))
			want.Add(f.Name, unfold(f.Value))
		}
		sameHeaders(t, l.build(), want)
		// Reused, as a Builder reuses it.
		l.reset()
		l.add("Subject", "again", true)
		sameHeaders(t, l.build(), added([]Field{{"Subject", "again"}}))
	})
}

// FuzzUnfold: the run-copying unfold is the byte-by-byte one it replaced:
// every byte but CR and LF, in order, invalid UTF-8 included.
func FuzzUnfold(f *testing.F) {
	for _, s := range []string{"", "a", "\r\n", "a\r\n\tb", "a\n b\r c\r\r\n\n", "\xff\r\n\xfe", "no breaks at all"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var want []byte
		for i := 0; i < len(v); i++ {
			if v[i] != '\r' && v[i] != '\n' {
				want = append(want, v[i])
			}
		}
		if got := appendUnfolded([]byte("x"), v); string(got) != "x"+string(want) {
			t.Errorf("appendUnfolded(%q) = %q, want %q", v, got[1:], want)
		}
		if got := unfold(v); got != string(want) {
			t.Errorf("unfold(%q) = %q, want %q", v, got, want)
		}
		if hasLineBreak(v) != (len(want) != len(v)) {
			t.Errorf("hasLineBreak(%q) = %v", v, hasLineBreak(v))
		}
	})
}
