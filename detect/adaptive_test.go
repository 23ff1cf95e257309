package detect

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// TestAdaptiveThreshold runs the adaptive threshold on the real embedded
// store and site count, in message time: the ceiling while the count is
// younger than a window, the floor at a small site, the ceiling again once
// the site is large.
func TestAdaptiveThreshold(t *testing.T) {
	e := newAdaptiveEngine(t, false)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	send := func(topic string, at time.Time, n int) []Verdict { return sendCopies(t, e, topic, at, n, n, 0) }
	tagged := func(vs []Verdict) (n int) {
		for _, v := range vs {
			if v.Bulk {
				n++
			}
		}
		return n
	}

	// The first day the count does not know the site: the ceiling (10).
	if vs := send("gardening", t0, 5); tagged(vs) != 0 || vs[4].Threshold != threshold || vs[4].Lowered {
		t.Errorf("before a window: %d of 5 tagged, threshold %d; want none at %d", tagged(vs), vs[4].Threshold, threshold)
	}
	// A day later, a site of a few recipients: the floor.
	vs := send("cycling", t0.Add(25*time.Hour), 5)
	if tagged(vs) != 3 || vs[1].Bulk || !vs[2].Bulk || vs[2].Threshold != 3 || !vs[2].Lowered {
		t.Errorf("small site: %d of 5 tagged, the third %v at threshold %d; want the last 3 at 3", tagged(vs), vs[2].Bulk, vs[2].Threshold)
	}
	if h := vs[2].Header(false); !strings.Contains(h, "; threshold=3") {
		t.Errorf("header %q does not say the threshold was lowered", h)
	}
	// The site grows to 1,000 active recipients: ten steps of 100, and the
	// ceiling caps them.
	for i := range 1000 {
		m := &Message{Body: strings.NewReader("Lunch at noon?"), Recipients: []string{fmt.Sprintf("reader%d@example.net", i)}}
		m.Time = t0.Add(26 * time.Hour)
		e.Check(ctx, m)
	}
	vs = send("sailing", t0.Add(27*time.Hour), 5)
	if tagged(vs) != 0 || vs[4].Threshold != threshold || vs[4].Lowered || strings.Contains(vs[4].Header(false), "threshold=") {
		t.Errorf("large site: %d of 5 tagged at threshold %d, header %q; want none at %d", tagged(vs), vs[4].Threshold, vs[4].Header(false), threshold)
	}
	// Two days without mail: nobody active, the floor again.
	if th := e.thresholds(ctx, nil, t0.Add(75*time.Hour)); th.volumes[vs[0].Family] != 3 || th.networks[vs[0].Family] != 3 {
		t.Errorf("two quiet days later: thresholds %d and %d (networks), want the floor 3", th.volumes[vs[0].Family], th.networks[vs[0].Family])
	}
}

// TestAdaptiveNetworksOnly runs the networks' adaptive threshold alone
// (policy.adaptive.networks, the default): at a small site a campaign that
// reaches a few users from as many networks is bulk at the floor, while
// the same copies to as many users from one network (a list server's) keep
// the ceiling; before the count covers a window, the ceiling for both.
func TestAdaptiveNetworksOnly(t *testing.T) {
	e := newAdaptiveEngine(t, true)
	t0 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	send := func(topic string, at time.Time, n, users, nets int) []Verdict {
		return sendCopies(t, e, topic, at, n, users, nets)
	}
	bulkFrom := func(vs []Verdict) int {
		for i, v := range vs {
			if v.Bulk {
				return i + 1
			}
		}
		return 0
	}
	// The first day: the ceiling (10) for networks too.
	if vs := send("gardening", t0, 5, 2, 5); bulkFrom(vs) != 0 {
		t.Errorf("before a window: copy %d of 5 from 5 networks bulk; want none", bulkFrom(vs))
	}
	later := t0.Add(25 * time.Hour)
	// A small site: 2 users, a new network each copy: bulk at the third.
	vs := send("cycling", later, 5, 2, 5)
	if got := bulkFrom(vs); got != 3 || vs[2].Networks != 3 || vs[2].Threshold != 3 || !vs[2].Lowered {
		t.Errorf("many networks: bulk from copy %d (networks %d, threshold %d); want from the third at 3", got, vs[2].Networks, vs[2].Threshold)
	}
	if h := vs[2].Header(false); !strings.Contains(h, "; networks=3") || !strings.Contains(h, "; threshold=3") {
		t.Errorf("header %q does not name the networks and the lowered threshold", h)
	}
	// The same from one network to 5 users: recipients keep the ceiling.
	if vs := send("sailing", later.Add(time.Hour), 5, 5, 1); bulkFrom(vs) != 0 || vs[4].Campaign.Recipients != 5 || vs[4].Threshold != threshold {
		t.Errorf("one network, 5 users: bulk from copy %d, recipients %d, threshold %d; want none at %d", bulkFrom(vs), vs[4].Campaign.Recipients, vs[4].Threshold, threshold)
	}
}

// texts are three unrelated messages long enough for every family.
var texts = map[string]string{
	"gardening": `Spring is the season to prepare the soil: dig in compost, remove the weeds
before they flower and plan where each vegetable will grow this year. Tomatoes
want full sun and shelter from the wind, while lettuce and spinach accept some
shade in the afternoon. Water early in the morning so the leaves dry before the
evening, and cover young seedlings when the forecast announces frost at night.`,
	"cycling": `The club ride leaves the station car park at eight on Saturday morning and
follows the river to the old bridge, then climbs through the forest to the
village with the bakery. Bring a spare inner tube, a pump and enough water for
three hours; the pace stays conversational and nobody is left behind on the
hills. In case of heavy rain the ride is cancelled and announced by telephone.`,
	"sailing": `Our sailing course for beginners covers knots, rigging the boat, reading the
wind on the water and the rules for avoiding collisions in the harbour. Every
lesson starts with a short talk on the jetty, followed by two hours on the lake
with an instructor in each dinghy. Lifejackets are provided; wear shoes with a
soft sole and clothes that can get wet, and bring a warm jumper for the evening.`,
}

// TestNetworksDecide: one text to the same user from ten networks is a
// campaign at the threshold (10); from ten hosts of one /24 it is not.
func TestNetworksDecide(t *testing.T) {
	for _, c := range []struct {
		name   string
		client func(i int) string
		bulk   bool
	}{
		{"ten networks", func(i int) string { return fmt.Sprintf("198.51.%d.7", i) }, true},
		{"one network", func(i int) string { return fmt.Sprintf("198.51.100.%d", i+1) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			var v Verdict
			for i := range threshold {
				m := &Message{Body: strings.NewReader(texts["sailing"]), Recipients: []string{"skipper@example.org"}}
				m.Header.Set("Subject", "Sailing course")
				m.Client, _ = ParseClientAddr(c.client(i))
				v = f.e.Check(context.Background(), m)
			}
			if v.Bulk != c.bulk || (v.Networks == threshold) != c.bulk || v.Campaign.Recipients != 1 {
				t.Errorf("bulk %v, networks %d, campaign %+v; want bulk %v", v.Bulk, v.Networks, v.Campaign, c.bulk)
			}
			if h := v.Header(false); strings.Contains(h, "; networks=10") != c.bulk {
				t.Errorf("header %q", h)
			}
		})
	}
}

// BenchmarkThresholdsSite is what the site's count adds to each message
// (policy.adaptive.networks, on by default): a new recipient a message,
// ten messages a second of message time, against no count at all.
func BenchmarkThresholdsSite(b *testing.B) {
	count, err := store.NewSite(store.Params{Window: 24 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		site *site
	}{
		{"none", nil},
		{"networks", newSite(Adaptive{Site: count, Floor: 5, PerStep: 2500, Window: 24 * time.Hour, NetworksOnly: true})},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := &Engine{site: c.site, opt: Options{Thresholds: map[signature.Family]int{signature.FamilyShingle: 10}, StoreTimeout: time.Second}}
			ctx := context.Background()
			t0 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
			rcpts := []string{"first@example.test"}
			e.thresholds(ctx, rcpts, t0.Add(-25*time.Hour)) // the count covers a window from t0
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				rcpts[0] = "user" + strconv.Itoa(i%200000) + "@example.test"
				e.thresholds(ctx, rcpts, t0.Add(time.Duration(i)*100*time.Millisecond))
			}
		})
	}
}

// newAdaptiveEngine is an engine on a fresh embedded store and site count
// with a floor of 3 and a step of 100 active recipients, counting networks
// only when networksOnly is set.
func newAdaptiveEngine(t *testing.T, networksOnly bool) *Engine {
	t.Helper()
	st, err := store.OpenEmbedded(store.EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	site, err := store.NewSite(store.Params{Window: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	opt := newFixtureWith(t, st).e.opt
	opt.Adaptive = Adaptive{Site: site, Floor: 3, PerStep: 100, Window: 24 * time.Hour, Refresh: time.Minute, NetworksOnly: networksOnly}
	e, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// sendCopies checks n copies of a topic, the i-th to user i%users, two
// minutes apart from at, and from network i%nets when nets is not 0.
func sendCopies(t *testing.T, e *Engine, topic string, at time.Time, n, users, nets int) []Verdict {
	t.Helper()
	var out []Verdict
	for i := range n {
		m := &Message{Body: strings.NewReader(texts[topic]), Recipients: []string{fmt.Sprintf("%s-user%d@example.org", topic, i%users)}}
		m.Header.Set("Subject", topic)
		if nets > 0 {
			m.Client = netip.AddrFrom4([4]byte{198, 51, byte(i % nets), 7})
		}
		m.Time = at.Add(time.Duration(i) * 2 * time.Minute)
		v := e.Check(context.Background(), m)
		if v.Err != nil {
			t.Fatal(v.Err)
		}
		out = append(out, v)
	}
	return out
}
