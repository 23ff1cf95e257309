package declared

import (
	"testing"

	"github.com/emersion/go-message/textproto"
)

func TestSendersExempt(t *testing.T) {
	list := NewSenders([]string{"partner.example", ".corp.example", "HR.Example."})
	const pass = "mx.site.example; dkim=pass header.d=partner.example header.s=s1 header.b=abcd"
	tests := []struct {
		name    string
		from    []string
		trusted []string
		want    string // the exempting domain, "" for none
	}{
		{"pass, aligned", []string{"News <news@partner.example>"}, []string{pass}, "partner.example"},
		{"pass, From a subdomain of d", []string{"a@mail.partner.example"}, []string{pass}, "partner.example"},
		{"pass, case and trailing dot", []string{"x@HR.example"}, []string{"mx; dkim=pass header.d=hr.EXAMPLE."}, "hr.example"},
		{"header.i's domain without header.d", []string{"x@partner.example"}, []string{"mx; dkim=pass header.i=@partner.example"}, "partner.example"},
		{"listed subdomain", []string{"x@pay.corp.example"}, []string{"mx; dkim=pass header.d=pay.corp.example"}, "pay.corp.example"},
		{"subdomain rule leaves the parent out", []string{"x@corp.example"}, []string{"mx; dkim=pass header.d=corp.example"}, ""},
		{"exact rule leaves subdomain signers out", []string{"x@a.partner.example"}, []string{"mx; dkim=pass header.d=a.partner.example"}, ""},
		{"pass of another domain", []string{"x@partner.example"}, []string{"mx; dkim=pass header.d=spam.example"}, ""},
		{"From not aligned: a spammer's own pass", []string{"x@partner.example"}, []string{"mx; dkim=pass header.d=spam.example", "mx; dkim=pass header.d=other.example"}, ""},
		{"listed signer, From elsewhere", []string{"ceo@bank.example"}, []string{pass}, ""},
		{"From a parent of d is not aligned", []string{"x@example"}, []string{"mx; dkim=pass header.d=partner.example"}, ""},
		{"From's look-alike suffix", []string{"x@evilpartner.example"}, []string{pass}, ""},
		{"display name claims the domain", []string{`"news@partner.example" <x@spam.example>`}, []string{pass}, ""},
		{"dkim=fail", []string{"x@partner.example"}, []string{"mx; dkim=fail header.d=partner.example"}, ""},
		{"dkim=none", []string{"x@partner.example"}, []string{"mx; dkim=none"}, ""},
		{"no trusted field", []string{"x@partner.example"}, nil, ""},
		{"a later trusted field cannot add a pass", []string{"x@partner.example"}, []string{"mx; dkim=fail header.d=partner.example", pass}, ""},
		{"a first field without dkim leaves the next", []string{"x@partner.example"}, []string{"mx; spf=pass smtp.mailfrom=partner.example", pass}, "partner.example"},
		{"second signature passes", []string{"x@partner.example"}, []string{"mx; dkim=pass header.d=esp.example; dkim=pass header.d=partner.example"}, "partner.example"},
		{"two From fields", []string{"x@partner.example", "y@spam.example"}, []string{pass}, ""},
		{"two From addresses", []string{"x@partner.example, y@spam.example"}, []string{pass}, ""},
		{"no From", nil, []string{pass}, ""},
		{"unparsable From", []string{"partner.example"}, []string{pass}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h textproto.Header
			for _, f := range tt.from {
				h.Add("From", f)
			}
			got, ok := list.Exempt(&h, tt.trusted)
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("got %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
	var h textproto.Header
	h.Add("From", "x@partner.example")
	if d, ok := NewSenders(nil).Exempt(&h, []string{pass}); ok {
		t.Errorf("empty list exempts %q", d)
	}
}

// The cost of the exemption when a list is configured, for a message of a
// listed sender and for one of anybody else (the common case: its From is
// never parsed); with no list Exempt returns at once.
func BenchmarkSendersExempt(b *testing.B) {
	list := NewSenders([]string{"partner.example", ".corp.example"})
	for _, c := range []struct{ name, from, d string }{
		{"listed", "News <news@partner.example>", "partner.example"},
		{"other", "Shop <offers@shop.example>", "shop.example"},
	} {
		var h textproto.Header
		h.Add("From", c.from)
		trusted := []string{"mx.site.example; dkim=pass (1024-bit key) header.d=" + c.d + " header.i=@" + c.d + " header.a=rsa-sha256 header.s=s1 header.b=abcdefgh; dkim-atps=neutral"}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				list.Exempt(&h, trusted)
			}
		})
	}
}
