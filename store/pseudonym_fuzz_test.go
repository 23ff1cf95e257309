package store

import (
	"strings"
	"testing"
)

// Voter ids arrive from the votes admin endpoint: parsePseudonymHex takes
// exactly 12 hex digits and round-trips them; anything else is an error.
func FuzzParsePseudonymHex(f *testing.F) {
	for _, s := range []string{"0123456789ab", "0123456789AB", "", "0123456789a", "0123456789abc", "zz3456789abc", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePseudonymHex(s)
		if err != nil {
			return
		}
		if p.String() != strings.ToLower(s) {
			t.Fatalf("parsePseudonymHex(%q) = %s", s, p)
		}
	})
}
