package signature

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/dchest/siphash"
)

// testSecret is the fixed key of golden tests. Never use it in production.
func testSecret(tb testing.TB) Secret {
	tb.Helper()
	s, err := NewSecret([]byte("bulkmilter test secret, not for production use"))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func secretN(tb testing.TB, n int) Secret {
	tb.Helper()
	s, err := NewSecret([]byte(fmt.Sprintf("trial secret number %08d", n)))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestNewSecret(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		wantErr string
	}{
		{"too short", []byte("0123456789abcde"), "need at least 16"},
		{"placeholder", make([]byte, 32), "distinct byte values"},
		{"repeated", []byte(strings.Repeat("ab", 16)), "distinct byte values"},
		{"ok", []byte("0123456789abcdef"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSecret(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				if !s.IsZero() {
					t.Fatal("got a usable secret with an error")
				}
				return
			}
			if err != nil || s.IsZero() {
				t.Fatalf("got %v, %v; want a secret", s, err)
			}
		})
	}
}

func TestSecretNeverPrintsKey(t *testing.T) {
	s := testSecret(t)
	k := fmt.Sprintf("%016x", s.k0)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(verb, s)
		if strings.Contains(out, k) || strings.Contains(out, fmt.Sprint(s.k0)) {
			t.Errorf("%s printed the key: %s", verb, out)
		}
		if !strings.Contains(out, s.ID()) {
			t.Errorf("%s = %q, want the key id %s", verb, out, s.ID())
		}
	}
	if len(s.ID()) != 12 {
		t.Errorf("key id %q, want 12 hex digits", s.ID())
	}
}

func TestSecretsDiffer(t *testing.T) {
	a, b := secretN(t, 1), secretN(t, 2)
	if a.ID() == b.ID() {
		t.Fatal("two secrets share a key id")
	}
	if a.derive("x") == b.derive("x") {
		t.Fatal("two secrets derive the same subkey")
	}
	if a.derive("imatch/term") == a.derive("shingle/word") {
		t.Fatal("two labels derive the same subkey")
	}
	if a.derive("x") != secretN(t, 1).derive("x") {
		t.Fatal("derivation is not deterministic")
	}
}

// The inlined SipHash variants must equal the reference implementation.
func TestSipWordsMatchReference(t *testing.T) {
	k := testSecret(t).derive("test")
	for n := 0; n < 9; n++ {
		ws := make([]uint64, n)
		buf := make([]byte, 8*n)
		for i := range ws {
			ws[i] = uint64(i)*0x9e3779b97f4a7c15 + 7
			binary.LittleEndian.PutUint64(buf[8*i:], ws[i])
		}
		if got, want := k.words(ws...), siphash.Hash(k.k0, k.k1, buf); got != want {
			t.Errorf("words(%d words) = %x, want %x", n, got, want)
		}
		if n == 1 {
			if got, want := k.word(ws[0]), siphash.Hash(k.k0, k.k1, buf); got != want {
				t.Errorf("word = %x, want %x", got, want)
			}
		}
	}
	if got, want := k.str("hello"), siphash.Hash(k.k0, k.k1, []byte("hello")); got != want {
		t.Errorf("str = %x, want %x", got, want)
	}
}

func TestIMatchTerm(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"the", false}, {"word", true}, {"mp3s", true}, {"win2k", true}, {"1234", false},
		{"a1b2", false}, {"цена", true}, {"цен", false}, {"価格情報", true}, {"x٣y٤", false}, {"", false},
		{"ab1é", true}, {"a1é٣", false}, {"abé", false}, {"0", false}, {"0000", false}, {"abc\xff", true},
	}
	for _, tt := range tests {
		if got := IMatchTerm(tt.in); got != tt.want {
			t.Errorf("IMatchTerm(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if got := imatchTermRunes(tt.in); got != tt.want {
			t.Errorf("imatchTermRunes(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// FuzzIMatchTerm: the ASCII pass answers as the rune loop does.
func FuzzIMatchTerm(f *testing.F) {
	f.Add("win2k")
	f.Add("x٣y4")
	f.Fuzz(func(t *testing.T, s string) {
		if a, b := IMatchTerm(s), imatchTermRunes(s); a != b {
			t.Fatalf("IMatchTerm(%q) = %v, the rune loop %v", s, a, b)
		}
	})
}
