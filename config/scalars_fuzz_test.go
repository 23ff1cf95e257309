package config

import (
	"strings"
	"testing"
	"time"
)

// The scalar parsers of the configuration: durations (Go syntax or days),
// sizes, milter sockets and networks. Whatever they accept is sound: a
// size is not negative, a duration written in days is not negative, a
// socket is tcp or unix with an address, a network is valid.
func FuzzScalars(f *testing.F) {
	for _, s := range []string{"7d", "1.5d", "500ms", "-1h", "Infd", "NaNd", "1e300d", "4MiB", "1GiB", "-1KB", "9223372036854775807",
		"inet:127.0.0.1:7357", "inet:7357@localhost", "unix:/run/x.sock", "local:./x", "inet6:[::1]:1", "10.0.0.0/8", "::1", "fe80::1%eth0/64"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := parseDuration(s); err == nil && strings.HasSuffix(strings.TrimSpace(s), "d") && d < 0 {
			t.Errorf("parseDuration(%q) = %v: days must not give a negative duration", s, d)
		}
		if n, err := parseSize(s); err == nil && n < 0 {
			t.Errorf("parseSize(%q) = %d", s, n)
		}
		if network, addr, err := ParseListen(s); err == nil {
			if network != "tcp" && network != "unix" || addr == "" {
				t.Errorf("ParseListen(%q) = %q, %q", s, network, addr)
			}
		}
		if p, err := ParseNetwork(s); err == nil && !p.IsValid() {
			t.Errorf("ParseNetwork(%q) = invalid prefix %v", s, p)
		}
	})
}

// Days that are not a finite, representable count are refused (Infd gave
// a negative window before), and the usual ones parse.
func TestParseDurationDays(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7d", 7 * 24 * time.Hour, true},
		{"0.5d", 12 * time.Hour, true},
		{"180d", 180 * 24 * time.Hour, true},
		{"Infd", 0, false},
		{"NaNd", 0, false},
		{"1e300d", 0, false},
		{"200000d", 0, false}, // past what a Duration holds
		{"-1d", 0, false},
	} {
		got, err := parseDuration(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
