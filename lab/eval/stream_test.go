package eval

import (
	"net/netip"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/signature"
)

// A dimension counts distinct values per key within a day either side of
// the message's time; the message's count is its keys' highest.
func TestDimension(t *testing.T) {
	d := dimension{}
	k1, k2 := signature.Key{Family: 1, Hash: 1}, signature.Key{Family: 2, Hash: 2}
	t0 := time.Date(2007, 4, 8, 12, 0, 0, 0, time.UTC)
	for i, c := range []struct {
		keys  []signature.Key
		value string
		at    time.Time
		want  int64
	}{
		{[]signature.Key{k1}, "192.0.2.0/24", t0, 1},
		{[]signature.Key{k1}, "192.0.2.0/24", t0.Add(time.Hour), 1},
		{[]signature.Key{k1, k2}, "198.51.100.0/24", t0.Add(2 * time.Hour), 2},
		{[]signature.Key{k2}, "", t0.Add(3 * time.Hour), 1},
		{[]signature.Key{k1}, "203.0.113.0/24", t0.Add(25*time.Hour + 30*time.Minute), 2}, // the first is out of the day
		{[]signature.Key{k1}, "203.0.113.0/24", t0.Add(-30 * time.Hour), 1},               // a forged Date far back
	} {
		if got := d.add(c.keys, c.value, c.at); got != c.want {
			t.Errorf("step %d: %d, want %d", i, got, c.want)
		}
	}
	for in, want := range map[string]string{"192.0.2.77": "192.0.2.0/24", "2001:db8:1:2::5": "2001:db8:1::/48"} {
		if got := detect.Network(netip.MustParseAddr(in)); got != want {
			t.Errorf("Network(%s) = %s, want %s", in, got, want)
		}
	}
	if detect.Network(netip.Addr{}) != "" {
		t.Error("an unknown client has a network")
	}
}
