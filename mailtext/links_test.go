package mailtext

import (
	"strings"
	"testing"

	"golang.org/x/net/publicsuffix"
)

// TestDomainMemoAllocs: five links to one host look it up once, so
// publicsuffix allocates once (it allocated for each link).
func TestDomainMemoAllocs(t *testing.T) {
	text := strings.Repeat("see http://www.shop.example.com/offer and ", 5)
	dst := make([]string, 0, 8)
	n := testing.AllocsPerRun(100, func() {
		dst = appendTextDomains(dst[:0], text, &domainMemo{})
	})
	if len(dst) != 5 || dst[4] != "example.com" {
		t.Fatalf("domains %q", dst)
	}
	if n > 1 {
		t.Errorf("five links to one host: %.0f objects, want 1", n)
	}
}

// FuzzDomainMemo: through the memo, every host gets the library's answer,
// whatever came before it.
func FuzzDomainMemo(f *testing.F) {
	f.Add("www.example.com www.example.com a.b.example.co.uk 1.2.3.4 co.uk co.uk x.blogspot.com blogspot.com")
	f.Add(" .com com. a..b ")
	f.Fuzz(func(t *testing.T, hosts string) {
		var m domainMemo
		for _, h := range strings.Split(hosts, " ") {
			d, ok := m.registrable(h)
			want, err := publicsuffix.EffectiveTLDPlusOne(h)
			if d != want || ok != (err == nil) {
				t.Fatalf("registrable(%q) = %q, %v; publicsuffix: %q, %v", h, d, ok, want, err)
			}
		}
	})
}
