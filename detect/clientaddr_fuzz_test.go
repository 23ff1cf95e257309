package detect

import "testing"

// {client_addr} comes from the MTA in Postfix's or Sendmail's form:
// ParseClientAddr returns a valid address without zone, IPv4 unmapped,
// or false.
func FuzzParseClientAddr(f *testing.F) {
	for _, s := range []string{"192.0.2.1", "[192.0.2.1]", "IPv6:2001:db8::1", "ipv6:::ffff:192.0.2.1", "fe80::1%eth0", "[", "IPv6:", "unknown"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := ParseClientAddr(s)
		if !ok {
			return
		}
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			t.Fatalf("ParseClientAddr(%q) = %v", s, a)
		}
	})
}
