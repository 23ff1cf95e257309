package wire

import (
	"strings"
	"testing"
)

// DecodeCStringPair and CutCStringPair (bulkmilter patches) return what
// DecodeCStrings does for the first two strings, and how many there are.
func TestDecodeCStringPair(t *testing.T) {
	for _, in := range []string{"", "\x00", "\x00\x00", "Subject\x00hello\x00", "Subject\x00hello", "Subject\x00",
		"Subject", "a\x00b\x00c\x00", "a\x00\x00", "X\x00v\x00\x00", "\x00v\x00"} {
		want := DecodeCStrings([]byte(in))
		a, b, n := DecodeCStringPair([]byte(in))
		w := append(want, "", "")
		if n != len(want) || a != w[0] || b != w[1] {
			t.Errorf("%q: got %q %q %d, want %q (%d)", in, a, b, n, strings.Join(want, "|"), len(want))
		}
		x, y, m := CutCStringPair([]byte(in))
		if m != len(want) || string(x) != w[0] || string(y) != w[1] {
			t.Errorf("CutCStringPair(%q): got %q %q %d, want %q (%d)", in, x, y, m, strings.Join(want, "|"), len(want))
		}
	}
}
