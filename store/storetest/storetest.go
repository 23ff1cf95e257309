// Package storetest is the conformance suite every store.Store
// implementation passes: distinct counting, windows, many recipients,
// concurrent writers, idempotent retries, votes and their administration,
// persistence across restarts.
//
// The suite drives time through Observation.Time and Vote.Time (bucket
// selection follows them), so windows are tested without waiting; one
// short test uses the real clock for real expiry.
//
// It imports store alone; only tests import it.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/store"
)

// Harness opens stores for the suite.
type Harness struct {
	// Open returns a store with parameters p, closed by the harness at the
	// end of the test. Stores opened with the same space share their data
	// when Shared is true; different spaces never share.
	Open func(t *testing.T, space string, p store.Params) store.Store
	// Shared: two stores opened on one space at the same time share data
	// (two daemons on one Redis). False for the embedded store.
	Shared bool
	// Restart, if set, restarts the backend (for Redis, redis-server with
	// persistence on). The suite closes its stores first and reopens them
	// after. Without it the suite reopens the space (the embedded store
	// reads its file).
	Restart func(t *testing.T)
	// NoMerge: the store runs the model without the stored merge of split
	// campaigns (a Redis Cluster, model.go); the merge cases check that it
	// counts as the union alone does.
	NoMerge bool
	// Tolerance is the relative error allowed on counts above the exact
	// limit (HyperLogLog); default 0.03.
	Tolerance float64
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	if h.Tolerance == 0 {
		h.Tolerance = 0.03
	}
	s := &suite{h: h}
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"DistinctRecipients", s.distinctRecipients},
		{"SmallCountsExact", s.smallCountsExact},
		{"ManyRecipients", s.manyRecipients},
		{"HundredThousandRecipients", s.hundredThousand},
		{"KeysAndDuplicates", s.keysAndDuplicates},
		{"Campaign", s.campaign},
		{"CampaignNoChaining", s.campaignNoChaining},
		{"CampaignSenderTemplate", s.campaignSenderTemplate},
		{"CampaignSpreadLines", s.campaignSpreadLines},
		{"CampaignUnion", s.campaignUnion},
		{"CampaignAlias", s.campaignAlias},
		{"CampaignAliasPair", s.campaignAliasPair},
		{"CampaignAliasVotes", s.campaignAliasVotes},
		{"CampaignAliasGuard", s.campaignAliasGuard},
		{"CampaignAliasWeakJoin", s.campaignAliasWeakJoin},
		{"CampaignAliasExpires", s.campaignAliasExpires},
		{"ReadWithoutRecipients", s.readWithoutRecipients},
		{"IdempotentRetry", s.idempotentRetry},
		{"Window", s.window},
		{"WindowSlides", s.windowSlides},
		{"WindowHLLTier", s.windowHLL},
		{"RealClockExpiry", s.realClock},
		{"TimesAhead", s.timesAhead},
		{"ClockSteppedBack", s.clockSteppedBack},
		{"OldMessage", s.oldMessage},
		{"OldCopies", s.oldCopies},
		{"CampaignAfterWindow", s.campaignAfterWindow},
		{"ConcurrentWriters", s.concurrent},
		{"TwoStoresShareCounts", s.twoStores},
		{"Votes", s.votes},
		{"VoteHorizon", s.voteHorizon},
		{"VoteHorizonNow", s.voteHorizonNow},
		{"VoteAdmin", s.voteAdmin},
		{"CampaignVotes", s.campaignVotes},
		{"CampaignVoteHorizon", s.campaignVoteHorizon},
		{"CampaignVoteRefReused", s.campaignVoteRefReused},
		{"CampaignVoteWeakJoin", s.campaignVoteWeakJoin},
		{"Persistence", s.persistence},
		{"BadInput", s.badInput},
		{"Closed", s.closed},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.fn)
	}
}

type suite struct {
	h Harness
}

var t0 = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC).Add(10 * time.Minute)

func space(t *testing.T) string {
	r := strings.NewReplacer("/", "_", " ", "_", "#", "_")
	return r.Replace(t.Name())
}

func (s *suite) open(t *testing.T, p store.Params) store.Store {
	t.Helper()
	return s.h.Open(t, space(t), p)
}

func rcpts(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d@example.org", prefix, i)
	}
	return out
}

func observe(t *testing.T, st store.Store, at time.Time, keys []string, rs ...string) store.Result {
	t.Helper()
	res, err := st.Observe(context.Background(), store.Observation{Keys: keys, Recipients: rs, Time: at})
	if err != nil {
		t.Fatalf("Observe(%v, %d recipients): %v", keys, len(rs), err)
	}
	if len(res.Volumes) != len(keys) || len(res.Votes) != len(keys) {
		t.Fatalf("Observe(%v): got %d volumes and %d tallies, want %d", keys, len(res.Volumes), len(res.Votes), len(keys))
	}
	return res
}

func volume(t *testing.T, st store.Store, at time.Time, key string, rs ...string) int64 {
	t.Helper()
	return observe(t, st, at, []string{key}, rs...).Volumes[0]
}

func (s *suite) within(t *testing.T, what string, got int64, want int) {
	t.Helper()
	tol := math.Max(2, s.h.Tolerance*float64(want))
	if math.Abs(float64(got)-float64(want)) > tol {
		t.Errorf("%s: got volume %d, want %d ± %.0f", what, got, want, tol)
	}
}

func (s *suite) distinctRecipients(t *testing.T) {
	st := s.open(t, store.Params{})
	k := "v1:imatch.0:00000000000000a1"
	steps := []struct {
		rs   []string
		want int64
	}{
		{[]string{"alice@example.org"}, 1},
		{[]string{"alice@example.org"}, 1},           // the same newsletter twice to one person
		{[]string{"  Alice@Example.ORG "}, 1},        // normalised
		{[]string{"bob@example.org"}, 2},             // a second person
		{[]string{"carol@example.org", "dave@x"}, 4}, // two RCPT TO in one message
		{[]string{"bob@example.org", "alice@example.org"}, 4},
		{[]string{"erin@x", "erin@x", "erin@x"}, 5}, // one person listed three times
	}
	for i, st2 := range steps {
		if got := volume(t, st, t0.Add(time.Duration(i)*time.Second), k, st2.rs...); got != st2.want {
			t.Errorf("step %d (%v): got volume %d, want %d", i, st2.rs, got, st2.want)
		}
	}
}

func (s *suite) smallCountsExact(t *testing.T) {
	st := s.open(t, store.Params{})
	k := "v1:imatch.0:00000000000000b2"
	for i, r := range rcpts("u", store.DefaultExactLimit) {
		if got := volume(t, st, t0.Add(time.Duration(i)*time.Second), k, r); got != int64(i+1) {
			t.Fatalf("after %d distinct recipients: got volume %d, want exactly %d", i+1, got, i+1)
		}
	}
	// Repeats do not move an exact count.
	for i, r := range rcpts("u", 10) {
		if got := volume(t, st, t0.Add(time.Hour+time.Duration(i)*time.Second), k, r); got != store.DefaultExactLimit {
			t.Fatalf("repeat %d: got volume %d, want %d", i, got, store.DefaultExactLimit)
		}
	}
}

func (s *suite) manyRecipients(t *testing.T) {
	st := s.open(t, store.Params{})
	k1, k2 := "v1:imatch.0:00000000000000c3", "v1:shingle.1:00000000000000c3"
	// One message with 200 RCPT TO counts 200.
	s.within(t, "200 recipients in one message", volume(t, st, t0, k1, rcpts("m", 200)...), 200)
	// Resending it counts nothing new.
	s.within(t, "the same 200 again", volume(t, st, t0.Add(time.Minute), k1, rcpts("m", 200)...), 200)
	// 3000 recipients over 30 messages.
	var got int64
	for i := range 30 {
		got = volume(t, st, t0.Add(time.Duration(i)*time.Second), k2, rcpts(fmt.Sprintf("n%d-", i), 100)...)
	}
	s.within(t, "3000 recipients over 30 messages", got, 3000)
}

// One message to 100,000 recipients (what the daemon keeps by default)
// is counted in one call, and its campaign goes on counting.
func (s *suite) hundredThousand(t *testing.T) {
	st := s.open(t, store.Params{})
	k := "v1:imatch.0:0000000000100000"
	s.within(t, "100000 recipients", volume(t, st, t0, k, rcpts("h", store.MaxRecipients)...), store.MaxRecipients)
	s.within(t, "and 1000 more", volume(t, st, t0.Add(time.Minute), k, rcpts("g", 1000)...), store.MaxRecipients+1000)
}

func (s *suite) keysAndDuplicates(t *testing.T) {
	st := s.open(t, store.Params{})
	a, b, c := "v1:a:0000000000000001", "v1:b:0000000000000002", "v1:c:0000000000000003"
	first := observe(t, st, t0, []string{a, b}, rcpts("x", 3)...)
	res := observe(t, st, t0.Add(time.Second), []string{a, b, c, a}, "z@x")
	// a and b (two families of three) join the campaign; c is new there and
	// carries this message's own count.
	want := []int64{4, 4, 1, 4}
	for i := range want {
		if res.Volumes[i] != want[i] {
			t.Errorf("volume %d (%s): got %d, want %d", i, []string{a, b, c, a}[i], res.Volumes[i], want[i])
		}
	}
	if got := fmt.Sprint(res.Campaign.Joined); got != "[0 1 3]" {
		t.Errorf("joined through keys %s, want [0 1 3]", got)
	}
	if res.Campaign.ID != first.Campaign.ID || res.Campaign.Recipients != 4 {
		t.Errorf("campaign %+v, want the first message's (%08x) with 4 recipients", res.Campaign, first.Campaign.ID)
	}
	if res := observe(t, st, t0, nil, "z@x"); len(res.Volumes) != 0 {
		t.Errorf("no keys: got %d volumes, want 0", len(res.Volumes))
	}
}

// copyKeys returns the keys of copy j of an edited campaign: in each of
// two families, some keys every copy shares and one of its own.
func copyKeys(j int) []string {
	return []string{
		"v1:imatch.0:00000000000000a0", "v1:imatch.1:00000000000000a1", "v1:imatch.2:00000000000000a2",
		fmt.Sprintf("v1:imatch.3:%016x", 0xa300+j),
		"v1:shingle.0:00000000000000b0", fmt.Sprintf("v1:shingle.1:%016x", 0xb100+j),
		fmt.Sprintf("v1:shingle.2:%016x", 0xb200+j),
	}
}

func (s *suite) campaign(t *testing.T) {
	st := s.open(t, store.Params{})
	ctx := context.Background()
	var id uint32
	for j := range 20 {
		o := store.Observation{Keys: copyKeys(j), Recipients: []string{fmt.Sprintf("r%d@x", j%12)},
			Time: t0.Add(time.Duration(j) * time.Minute), Network: fmt.Sprintf("192.0.%d.0/24", j%3),
			Sender: fmt.Sprintf("s%d@x", j)}
		res, err := st.Observe(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		c := res.Campaign
		if j == 0 {
			id = c.ID
			if len(c.Joined) != 0 {
				t.Errorf("first copy joined through %v, want a new campaign", c.Joined)
			}
		}
		wantR, wantN := int64(min(j+1, 12)), int64(min(j+1, 3))
		wantS := int64(min(j+1, store.CampaignSetCap))
		if c.ID != id || c.Recipients != wantR || c.Networks != wantN || c.Senders != wantS || !c.First.Equal(t0) {
			t.Fatalf("copy %d: campaign %+v, want id %08x, %d recipients, %d networks, %d senders, first %v",
				j, c, id, wantR, wantN, wantS, t0)
		}
		if j > 0 && fmt.Sprint(c.Joined) != "[0 1 2 4]" {
			t.Errorf("copy %d joined through keys %v, want the shared ones [0 1 2 4]", j, c.Joined)
		}
		for i, v := range res.Volumes {
			want := wantR
			if j > 0 && (i == 3 || i > 4) {
				want = 1 // a key new to the campaign counts this message
			}
			if v != want {
				t.Errorf("copy %d, key %d: volume %d, want %d", j, i, v, want)
			}
		}
	}
	// Read without recipients: the campaign, nothing written.
	res := observe(t, st, t0.Add(time.Hour), copyKeys(99))
	if res.Campaign.ID != id || res.Campaign.Recipients != 12 || res.Volumes[0] != 12 || res.Volumes[3] != 0 {
		t.Errorf("read: campaign %+v volumes %v, want %08x with 12", res.Campaign, res.Volumes, id)
	}
}

func (s *suite) campaignNoChaining(t *testing.T) {
	st := s.open(t, store.Params{})
	// A footer shared by unrelated messages: one key of three in one
	// family of four (a weak join: a third of 4 families' evidence).
	footer := []string{"v1:sift.0:00000000000000f0"}
	var ids []uint32
	for j := range 10 {
		keys := slices.Clone(footer)
		for f, n := range map[string]int{"imatch": 3, "shingle": 3, "charshingle": 3, "sift": 2} {
			for i := 1; i <= n; i++ {
				keys = append(keys, fmt.Sprintf("v1:%s.%d:%016x", f, i, j<<8|i))
			}
		}
		res := observe(t, st, t0.Add(time.Duration(j)*time.Minute), keys, fmt.Sprintf("u%d@x", j))
		// The footer joins the first unrelated messages weakly, WeakCap
		// at most; then it no longer votes.
		if j > store.WeakCap && (res.Campaign.Recipients != 1 || len(res.Campaign.Joined) != 0) {
			t.Errorf("unrelated message %d sharing a footer: campaign %+v, want its own", j, res.Campaign)
		}
		if res.Campaign.Recipients > store.WeakCap+1 {
			t.Errorf("message %d: the footer merged %d messages, at most %d", j, res.Campaign.Recipients, store.WeakCap+1)
		}
		ids = append(ids, res.Campaign.ID)
	}
	for j := store.WeakCap + 2; j < len(ids); j++ {
		if ids[j] == ids[j-1] {
			t.Errorf("messages %d and %d share campaign %08x", j-1, j, ids[j])
		}
	}
	// The footer keys reached WeakCap weak events: alone they no longer
	// vote.
	res := observe(t, st, t0.Add(time.Hour), footer, "v@x")
	if len(res.Campaign.Joined) != 0 || res.Volumes[0] != 1 {
		t.Errorf("footer alone: campaign %+v volume %d, want a new campaign of 1", res.Campaign, res.Volumes[0])
	}
}

// campaignSenderTemplate: one sender's feed items (or newsletter issues)
// share the frame's key, one band of two in one family of four (a strong
// join: an eighth of the evidence), and nothing else: the frame joins them
// weakly, WeakCap+1 of them at most (model.go, "One sender's template").
// The same key joins an edited campaign's copies from many senders or none
// known, and one sender's copies whose content joins them (two keys) add
// up; so do the first sender's items once another sender's copy joined
// through the frame and content (the pointers it wrote name many senders).
func (s *suite) campaignSenderTemplate(t *testing.T) {
	const n = 12
	for _, tc := range []struct {
		name    string
		sender  func(j int) string
		shared  int              // keys shared by every message: the frame's, then content
		content func(j int) bool // items that share the content key too (nil: shared decides)
		most    int64            // the largest campaign
	}{
		{"one sender, the frame alone", func(int) string { return "rss@feeds.example" }, 1, nil, store.WeakCap + 1},
		{"many senders, the frame alone", func(j int) string { return fmt.Sprintf("s%d@spam.example", j) }, 1, nil, n},
		{"no sender known, the frame alone", func(int) string { return "" }, 1, nil, n},
		{"one sender, content joins", func(int) string { return "rss@feeds.example" }, 2, nil, n},
		{"another sender joined, then the frame alone", func(j int) string {
			if j == 1 {
				return "other@spam.example"
			}
			return "rss@feeds.example"
		}, 1, func(j int) bool { return j < 2 }, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := s.open(t, store.Params{})
			ids := map[uint32]bool{}
			var most int64
			for j := range n {
				// shingle.0 is the frame; the content's first shared key is
				// an I-Match key; every other key is the item's own.
				keys := []string{familyKey("shingle", 0, 0xf0), familyKey("shingle", 1, j<<8|1)}
				for f, c := range map[string]int{"imatch": 3, "charshingle": 3, "sift": 2} {
					for i := range c {
						keys = append(keys, familyKey(f, i, j<<8|0x10+i))
					}
				}
				if tc.shared > 1 || (tc.content != nil && tc.content(j)) {
					keys[2] = familyKey("imatch", 9, 0xc0)
				}
				res, err := st.Observe(context.Background(), store.Observation{Keys: keys,
					Recipients: []string{fmt.Sprintf("u%d@x", j)}, Time: t0.Add(time.Duration(j) * time.Minute), Sender: tc.sender(j)})
				if err != nil {
					t.Fatalf("item %d: %v", j, err)
				}
				most = max(most, res.Campaign.Recipients)
				ids[res.Campaign.ID] = true
			}
			// One campaign of most, the rest each its own.
			if most != tc.most || len(ids) != n-int(most)+1 {
				t.Errorf("largest campaign %d of %d campaigns, want %d of %d", most, len(ids), tc.most, n-int(tc.most)+1)
			}
		})
	}
}

// SaladLines returns the 16 line keys of copy j of a news salad: the
// offer's LinesAlone lines, shared by every copy, and the copy's own.
func SaladLines(j int) []string {
	keys := make([]string, 16)
	for i := range keys {
		v := j<<8 | 0x20 + i // the copy's own lines
		if i < store.LinesAlone {
			v = 0xa0 + i // the offer's
		}
		keys[i] = familyKey("lines", 0, v)
	}
	return keys
}

// campaignSpreadLines: a short offer inside changing text of its own (a
// news salad): every copy keeps the offer's LinesAlone lines among 16 line
// keys (under LinesShare) and shares nothing else. From a sender new to the
// campaign each time, the lines join every copy, strongly (model.go,
// "Spread lines"); from one sender (a newsletter's template lines, issue
// after issue), or none known, they join nothing.
func (s *suite) campaignSpreadLines(t *testing.T) {
	const n = 12
	for _, tc := range []struct {
		name   string
		sender func(j int) string
		most   int64 // the largest campaign
	}{
		{"a new sender each copy", func(j int) string { return fmt.Sprintf("d%d.example", j) }, n},
		{"one sender", func(int) string { return "news.example" }, 1},
		{"no sender known", func(int) string { return "" }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := s.open(t, store.Params{})
			var most int64
			for j := range n {
				keys := SaladLines(j)
				for f, c := range map[string]int{"imatch": 3, "shingle": 6, "charshingle": 6, "sift": 4} {
					for i := range c {
						keys = append(keys, familyKey(f, i, j<<8|0x10+i))
					}
				}
				res, err := st.Observe(context.Background(), store.Observation{Keys: keys,
					Recipients: []string{fmt.Sprintf("u%d@x", j)}, Time: t0.Add(time.Duration(j) * time.Minute), Sender: tc.sender(j)})
				if err != nil {
					t.Fatalf("copy %d: %v", j, err)
				}
				most = max(most, res.Campaign.Recipients)
			}
			if most != tc.most {
				t.Errorf("largest campaign %d, want %d", most, tc.most)
			}
		})
	}
}

// campaignUnion: a copy whose keys name two campaigns strongly (a
// campaign that split) counts their distinct recipients together, a
// recipient of both once; one key naming another campaign unions nothing.
func (s *suite) campaignUnion(t *testing.T) {
	st := s.open(t, store.Params{})
	k := familyKey
	// Two parts of one campaign that shared nothing: A and B.
	a := observe(t, st, t0, []string{k("imatch", 0, 0xa0), k("imatch", 1, 0xa1), k("imatch", 2, 0xa2),
		k("shingle", 0, 0xb0), k("shingle", 1, 0xb1), k("shingle", 2, 0xb2)}, "a1@x", "a2@x").Campaign
	b := observe(t, st, t0.Add(time.Minute), []string{k("imatch", 0, 0xc0), k("imatch", 1, 0xc1), k("imatch", 2, 0xc2),
		k("shingle", 0, 0xd0), k("shingle", 1, 0xd1), k("shingle", 2, 0xd2)}, "b1@x", "b2@x", "a1@x").Campaign
	c := observe(t, st, t0.Add(2*time.Minute), []string{k("imatch", 0, 0xe0), k("imatch", 1, 0xe1), k("imatch", 2, 0xe2),
		k("shingle", 0, 0xf0), k("shingle", 1, 0xf1), k("shingle", 2, 0xf2)}, rcpts("d", 4)...).Campaign
	if a.ID == b.ID || b.ID == c.ID || a.Recipients != 2 || b.Recipients != 3 || c.Recipients != 4 {
		t.Fatalf("campaigns %+v, %+v, %+v: want three, of 2, 3 and 4 recipients", a, b, c)
	}
	// A copy naming A by every I-Match key and one shingle, B by two
	// shingles: A ∪ B ∪ {u} is a1, a2, b1, b2, u.
	keys := []string{k("imatch", 0, 0xa0), k("imatch", 1, 0xa1), k("imatch", 2, 0xa2),
		k("shingle", 0, 0xb0), k("shingle", 1, 0xd1), k("shingle", 2, 0xd2)}
	res := observe(t, st, t0.Add(3*time.Minute), keys, "u@x")
	if got := res.Campaign; got.ID != a.ID || got.Recipients != 5 || len(got.Joined) != len(keys) {
		t.Errorf("campaign %+v, want %08x with 5 recipients joined through every key", got, a.ID)
	}
	for i, v := range res.Volumes {
		if v != 5 {
			t.Errorf("key %d: volume %d, want 5", i, v)
		}
	}
	// The copy's keys now point to A, so a retry finds no union: A's own
	// a1, a2 and u, never a recipient twice (the union is read, not kept).
	if got := observe(t, st, t0.Add(3*time.Minute), keys, "u@x").Campaign; got.ID != a.ID || got.Recipients != 3 {
		t.Errorf("retry: campaign %+v, want %08x with its own 3 recipients", got, a.ID)
	}
	// u was counted in B too: a copy naming B alone finds b1, b2, a1, u
	// and its own z.
	res = observe(t, st, t0.Add(4*time.Minute), []string{k("imatch", 0, 0xc0), k("imatch", 1, 0xc1), k("imatch", 2, 0xc2),
		k("shingle", 0, 0xd0), k("shingle", 1, 0x20), k("shingle", 2, 0x21)}, "z@x")
	if got := res.Campaign; got.ID != b.ID || got.Recipients != 5 {
		t.Errorf("a copy naming B alone: %+v, want %08x with 5 recipients", got, b.ID)
	}
	// One key naming C is no union: A alone, now a1, a2, u and w.
	res = observe(t, st, t0.Add(4*time.Minute), []string{k("imatch", 0, 0xa0), k("imatch", 1, 0xa1), k("imatch", 2, 0xa2),
		k("shingle", 0, 0xf0), k("shingle", 1, 0x10), k("shingle", 2, 0x11)}, "w@x")
	if got := res.Campaign; got.ID != a.ID || got.Recipients != 4 {
		t.Errorf("one key naming another campaign: %+v, want %08x with its own 4 recipients", got, a.ID)
	}
}

func (s *suite) readWithoutRecipients(t *testing.T) {
	st := s.open(t, store.Params{})
	k := "v1:imatch.0:00000000000000d4"
	for i, want := range []int64{0, 0} {
		if got := volume(t, st, t0.Add(time.Duration(i)*time.Second), k); got != want {
			t.Fatalf("unseen key read %d: got %d, want %d", i, got, want)
		}
	}
	volume(t, st, t0, k, "a@x")
	if got := volume(t, st, t0.Add(time.Second), k); got != 1 {
		t.Errorf("after one recipient: got %d, want 1", got)
	}
	volume(t, st, t0, k, "b@x", "c@x")
	if got := volume(t, st, t0.Add(time.Second), k); got != 3 {
		t.Errorf("after three recipients: got %d, want 3", got)
	}
}

func (s *suite) idempotentRetry(t *testing.T) {
	st := s.open(t, store.Params{})
	keys := []string{"v1:r:0000000000000001", "v1:r:0000000000000002", "v1:r:0000000000000003"}
	// Bring three campaigns to the three tiers: first sighting, exact, HLL.
	observe(t, st, t0, keys[:1], "a@x")
	observe(t, st, t0, keys[1:2], rcpts("e", 5)...)
	observe(t, st, t0, keys[2:3], rcpts("h", 300)...)
	fresh := []string{"v1:r:0000000000000004", "v1:s:0000000000000005"}
	var vols []int64
	for i, ks := range [][]string{keys[:1], keys[1:2], keys[2:3], fresh} {
		o := store.Observation{Keys: ks, Recipients: []string{"retry@x", "retry2@x"}, Time: t0.Add(time.Minute),
			Network: "192.0.2.0/24", Sender: "s@x"}
		first, err := st.Observe(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		for r := range 3 {
			again, err := st.Observe(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			a, f := again.Campaign, first.Campaign
			if again.Volumes[0] != first.Volumes[0] || a.ID != f.ID || a.Recipients != f.Recipients ||
				a.Networks != f.Networks || a.Senders != f.Senders || !a.First.Equal(f.First) {
				t.Errorf("keys %d, retry %d: got %v %+v, want %v %+v as on the first call", i, r, again.Volumes, a, first.Volumes, f)
			}
		}
		vols = append(vols, first.Volumes[0])
	}
	if vols[0] != 3 || vols[1] != 7 || vols[3] != 2 {
		t.Errorf("volumes %v: want 3, 7 and 2 for the first, second and fresh campaign", vols)
	}
	s.within(t, "HLL campaign after retry", vols[2], 302)
}

// aligned returns the start of the bucket holding t for window w split
// into n buckets.
func aligned(t time.Time, w time.Duration, n int) time.Time {
	l := w / time.Duration(n)
	return time.UnixMilli(t.UnixMilli() / l.Milliseconds() * l.Milliseconds()).UTC()
}

func (s *suite) window(t *testing.T) {
	w := 24 * time.Hour
	st := s.open(t, store.Params{Window: w, Buckets: 4})
	base := aligned(t0, w, 4).Add(time.Minute) // 1 min into a 6h bucket
	k := "v1:w:0000000000000001"
	volume(t, st, base, k, "a@x")
	// Anything younger than the window is counted…
	if got := volume(t, st, base.Add(w-time.Minute), k, "b@x"); got != 2 {
		t.Errorf("just inside the window: got %d, want 2", got)
	}
	// …anything older than window + one bucket is not.
	later := base.Add(w + w/4)
	if got := volume(t, st, later, k); got != 1 {
		t.Errorf("a@x past window+bucket: got %d, want 1 (b@x only)", got)
	}
	if got := volume(t, st, later.Add(w+w/4), k); got != 0 {
		t.Errorf("everything past the window: got %d, want 0", got)
	}
	// A first sighting alone also expires.
	k2 := "v1:w:0000000000000002"
	volume(t, st, base, k2, "a@x")
	if got := volume(t, st, later, k2, "a@x"); got != 1 {
		t.Errorf("first sighting, same recipient after the window: got %d, want 1", got)
	}
	if got := volume(t, st, later, k2, "b@x"); got != 2 {
		t.Errorf("a second recipient after re-sighting: got %d, want 2", got)
	}
}

func (s *suite) windowSlides(t *testing.T) {
	w := 4 * time.Hour
	st := s.open(t, store.Params{Window: w, Buckets: 4})
	l := w / 4
	base := aligned(t0, w, 4).Add(time.Second)
	k := "v1:w:0000000000000003"
	// Two recipients per bucket over four buckets.
	for i := range 4 {
		volume(t, st, base.Add(time.Duration(i)*l), k, fmt.Sprintf("a%d@x", i), fmt.Sprintf("b%d@x", i))
	}
	// At bucket 4 the window holds buckets 0..4; at 5, buckets 1..5; …
	for i, want := range []int64{8, 6, 4, 2, 0} {
		at := base.Add(time.Duration(4+i) * l)
		if got := volume(t, st, at, k); got != want {
			t.Errorf("%d buckets later: got %d, want %d", 4+i, got, want)
		}
	}
	// A recipient seen again moves with the window.
	k2 := "v1:w:0000000000000004"
	volume(t, st, base, k2, "a@x", "b@x")
	volume(t, st, base.Add(3*l), k2, "a@x")
	if got := volume(t, st, base.Add(5*l), k2); got != 1 {
		t.Errorf("recipient refreshed in a later bucket: got %d, want 1", got)
	}
}

func (s *suite) windowHLL(t *testing.T) {
	w := 4 * time.Hour
	st := s.open(t, store.Params{Window: w, Buckets: 2})
	l := w / 2
	base := aligned(t0, w, 2).Add(time.Second)
	k := "v1:w:0000000000000005"
	volume(t, st, base, k, rcpts("old", 400)...)
	s.within(t, "400 in the next bucket", volume(t, st, base.Add(l), k, rcpts("new", 400)...), 800)
	s.within(t, "old bucket gone", volume(t, st, base.Add(3*l), k), 400)
	if got := volume(t, st, base.Add(4*l), k); got != 0 {
		t.Errorf("all buckets gone: got %d, want 0", got)
	}
}

func (s *suite) realClock(t *testing.T) {
	// Real time: a 2s window in 2 buckets, so nothing survives 3s.
	st := s.open(t, store.Params{Window: 2 * time.Second, Buckets: 2})
	k := "v1:rt:0000000000000001"
	if got := volume(t, st, time.Time{}, k, "a@x", "b@x", "c@x"); got != 3 {
		t.Fatalf("got %d, want 3", got)
	}
	time.Sleep(3100 * time.Millisecond)
	if got := volume(t, st, time.Time{}, k, "d@x"); got != 1 {
		t.Errorf("after the window passed in real time: got %d, want 1", got)
	}
}

func (s *suite) concurrent(t *testing.T) {
	n := 1
	if s.h.Shared {
		n = 2
	}
	var stores []store.Store
	for range n {
		stores = append(stores, s.open(t, store.Params{}))
	}
	exact, hll := "v1:cc:0000000000000001", "v1:cc:0000000000000002"
	const writers, per = 8, 10 // 80 distinct recipients on exact: below the exact limit
	var wg sync.WaitGroup
	errs := make(chan error, writers*2)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := stores[w%n]
			for i := range per {
				r := fmt.Sprintf("w%d-%d@x", w, i)
				// Every recipient twice, through both stores when shared.
				for _, st := range []store.Store{st, stores[(w+1)%n]} {
					if _, err := st.Observe(context.Background(), store.Observation{Keys: []string{exact}, Recipients: []string{r}, Time: t0}); err != nil {
						errs <- err
						return
					}
				}
				big := rcpts(fmt.Sprintf("w%d-%d-", w, i), 30)
				if _, err := st.Observe(context.Background(), store.Observation{Keys: []string{hll}, Recipients: big, Time: t0}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, st := range stores {
		if got := volume(t, st, t0, exact); got != writers*per {
			t.Errorf("store %d, exact key: got %d, want exactly %d", i, got, writers*per)
		}
		s.within(t, fmt.Sprintf("store %d, HLL key", i), volume(t, st, t0, hll), writers*per*30)
	}
}

func (s *suite) twoStores(t *testing.T) {
	if !s.h.Shared {
		t.Skip("stores of this implementation do not share data")
	}
	a := s.open(t, store.Params{})
	b := s.open(t, store.Params{})
	k := "v1:two:0000000000000001"
	volume(t, a, t0, k, "x@x")
	if got := volume(t, b, t0, k, "x@x"); got != 1 {
		t.Errorf("same recipient through the second daemon: got %d, want 1", got)
	}
	if got := volume(t, b, t0, k, "y@x"); got != 2 {
		t.Errorf("second recipient through the second daemon: got %d, want 2", got)
	}
	if got := volume(t, a, t0, k); got != 2 {
		t.Errorf("read back through the first daemon: got %d, want 2", got)
	}
	if err := a.RecordVote(context.Background(), store.Vote{Keys: []string{k}, Voter: "x@x", Kind: store.VoteNotBulk, Time: t0}); err != nil {
		t.Fatal(err)
	}
	res := observe(t, b, t0, []string{k}, "x@x")
	if res.Votes[0].NotBulk != 1 || res.UserVotes["x@x"] != store.VoteNotBulk {
		t.Errorf("vote through the first daemon, seen by the second: tally %+v, user votes %v", res.Votes[0], res.UserVotes)
	}
	// A store with another window must refuse to share the database (Redis
	// checks) or, at least, not crash.
}

func vote(t *testing.T, st store.Store, at time.Time, voter string, kind store.VoteKind, keys ...string) {
	t.Helper()
	if err := st.RecordVote(context.Background(), store.Vote{Keys: keys, Voter: voter, Kind: kind, Time: at}); err != nil {
		t.Fatalf("RecordVote(%s, %v, %v): %v", voter, kind, keys, err)
	}
}

func (s *suite) votes(t *testing.T) {
	st := s.open(t, store.Params{})
	k1, k2, k3 := "v1:vote:0000000000000001", "v1:vote:0000000000000002", "v1:vote:0000000000000003"
	vote(t, st, t0, "alice@example.org", store.VoteNotBulk, k1, k2)
	vote(t, st, t0, "bob@example.org", store.VoteBulk, k1)
	vote(t, st, t0, "bob@example.org", store.VoteBulk, k1) // idempotent
	res := observe(t, st, t0.Add(time.Minute), []string{k1, k2, k3}, "Alice@Example.org", "bob@example.org", "carol@example.org")
	wantT := []store.Tally{{NotBulk: 1, Bulk: 1}, {NotBulk: 1}, {}}
	for i, w := range wantT {
		if res.Votes[i] != w {
			t.Errorf("tally of key %d: got %+v, want %+v", i, res.Votes[i], w)
		}
	}
	wantU := map[string]store.VoteKind{"Alice@Example.org": store.VoteNotBulk, "bob@example.org": store.VoteBulk}
	if fmt.Sprint(res.UserVotes) != fmt.Sprint(wantU) {
		t.Errorf("user votes: got %v, want %v", res.UserVotes, wantU)
	}
	// Each recipient's own vote per key, in the same answer: the caller
	// needs no second call to learn which keys a vote was cast on.
	wantO := map[string][]store.VoteKind{
		"Alice@Example.org": {store.VoteNotBulk, store.VoteNotBulk, store.VoteNone},
		"bob@example.org":   {store.VoteBulk, store.VoteNone, store.VoteNone},
	}
	if fmt.Sprint(res.OwnVotes) != fmt.Sprint(wantO) {
		t.Errorf("own votes: got %v, want %v", res.OwnVotes, wantO)
	}
	// A key given twice gets its votes at both positions.
	res = observe(t, st, t0.Add(time.Minute), []string{k3, k1, k2, k1}, "alice@example.org")
	if got, want := fmt.Sprint(res.OwnVotes), fmt.Sprint(map[string][]store.VoteKind{
		"alice@example.org": {store.VoteNone, store.VoteNotBulk, store.VoteNotBulk, store.VoteNotBulk},
	}); got != want {
		t.Errorf("own votes with a repeated key: got %s, want %s", got, want)
	}
	// Alice changes her mind on k1: the latest vote wins for her, tallies move.
	vote(t, st, t0.Add(2*time.Minute), "alice@example.org", store.VoteBulk, k1)
	res = observe(t, st, t0.Add(3*time.Minute), []string{k1, k2}, "alice@example.org")
	if res.Votes[0] != (store.Tally{Bulk: 2}) || res.Votes[1] != (store.Tally{NotBulk: 1}) {
		t.Errorf("after a changed vote: tallies %+v", res.Votes)
	}
	if res.UserVotes["alice@example.org"] != store.VoteBulk {
		t.Errorf("after a changed vote: alice's vote %v, want bulk (the most recent)", res.UserVotes["alice@example.org"])
	}
	if got := res.OwnVotes["alice@example.org"]; fmt.Sprint(got) != fmt.Sprint([]store.VoteKind{store.VoteBulk, store.VoteNotBulk}) {
		t.Errorf("after a changed vote: alice's own votes %v, want [bulk not-bulk]", got)
	}
	// Retracting.
	vote(t, st, t0.Add(4*time.Minute), "bob@example.org", store.VoteNone, k1)
	res = observe(t, st, t0.Add(5*time.Minute), []string{k1}, "bob@example.org")
	if res.Votes[0] != (store.Tally{Bulk: 1}) || len(res.UserVotes) != 0 || len(res.OwnVotes) != 0 {
		t.Errorf("after bob retracted: tally %+v, user votes %v, own votes %v", res.Votes[0], res.UserVotes, res.OwnVotes)
	}
	// A vote does not count a recipient.
	k4 := "v1:vote:0000000000000004"
	vote(t, st, t0, "dave@example.org", store.VoteBulk, k4)
	if got := volume(t, st, t0.Add(6*time.Minute), k4); got != 0 {
		t.Errorf("volume of a key with a vote and no message: got %d, want 0", got)
	}
}

func (s *suite) voteHorizon(t *testing.T) {
	hz := 10 * 24 * time.Hour
	st := s.open(t, store.Params{VoteHorizon: hz})
	k := "v1:hz:0000000000000001"
	vote(t, st, t0, "old@x", store.VoteNotBulk, k)
	vote(t, st, t0.Add(5*24*time.Hour), "new@x", store.VoteBulk, k)
	res := observe(t, st, t0.Add(hz+time.Hour), []string{k}, "old@x", "new@x")
	if res.Votes[0] != (store.Tally{Bulk: 1}) {
		t.Errorf("past the horizon of the first vote: tally %+v, want bulk 1", res.Votes[0])
	}
	if _, ok := res.UserVotes["old@x"]; ok || res.UserVotes["new@x"] != store.VoteBulk {
		t.Errorf("past the horizon of the first vote: user votes %v", res.UserVotes)
	}
	if _, ok := res.OwnVotes["old@x"]; ok || fmt.Sprint(res.OwnVotes["new@x"]) != fmt.Sprint([]store.VoteKind{store.VoteBulk}) {
		t.Errorf("past the horizon of the first vote: own votes %v", res.OwnVotes)
	}
	res = observe(t, st, t0.Add(16*24*time.Hour), []string{k}, "new@x")
	if res.Votes[0] != (store.Tally{}) || len(res.UserVotes) != 0 {
		t.Errorf("past every horizon: tally %+v, user votes %v", res.Votes[0], res.UserVotes)
	}
}

// voteHorizonNow: without times of their own, a vote, an observation and
// the admin's listing take Params.Now, and a vote counts and is listed
// until it is VoteHorizon old by that clock (what a daemon's vote_ttl
// means, tested here where the clock can be fixed).
func (s *suite) voteHorizonNow(t *testing.T) {
	var clock atomic.Int64
	at := func(d time.Duration) { clock.Store(t0.Add(d).Unix()) }
	st := s.open(t, store.Params{VoteHorizon: time.Hour, Now: func() time.Time { return time.Unix(clock.Load(), 0) }})
	a := admin(t, st)
	k := "v1:hznow:0000000000000001"
	at(0)
	vote(t, st, time.Time{}, "v@x", store.VoteNotBulk, k)
	for _, c := range []struct {
		at     time.Duration
		listed bool
	}{{0, true}, {59 * time.Minute, true}, {61 * time.Minute, false}} {
		at(c.at)
		listed, err := a.ListVotes(context.Background(), store.VoteQuery{Voter: "v@x"})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(listed) == 1 && listed[0].Time.Equal(t0); got != c.listed || len(listed) > 1 {
			t.Errorf("at +%v: listed %+v, want the vote listed %v", c.at, listed, c.listed)
		}
		res := observe(t, st, time.Time{}, []string{k}, "v@x")
		if got := res.UserVotes["v@x"] == store.VoteNotBulk; got != c.listed {
			t.Errorf("at +%v: user votes %v, want her vote counted %v", c.at, res.UserVotes, c.listed)
		}
	}
}

func admin(t *testing.T, st store.Store) store.Admin {
	a, ok := st.(store.Admin)
	if !ok {
		t.Fatalf("%T does not implement store.Admin", st)
	}
	return a
}

func keysOf(es []store.VoteEntry) string {
	var b []string
	for _, e := range es {
		b = append(b, fmt.Sprintf("%s/%s/%v", e.Key, e.VoterID[:4], e.Kind))
	}
	return strings.Join(b, " ")
}

func (s *suite) voteAdmin(t *testing.T) {
	// Votes are cast now: listing filters by the real clock's horizon.
	st := s.open(t, store.Params{})
	a := admin(t, st)
	ctx := context.Background()
	now := time.Now()
	vote(t, st, now, "alice@x", store.VoteNotBulk, "v1:imatch.0:aa", "v1:imatch.1:ab", "v1:shingle.0:ac")
	vote(t, st, now, "bob@x", store.VoteBulk, "v1:imatch.0:aa")
	vote(t, st, now, "carol@x", store.VoteNotBulk, "v1:shingle.0:ac")

	all, err := a.ListVotes(ctx, store.VoteQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 {
		t.Errorf("list all: got %d votes (%s), want 5", len(all), keysOf(all))
	}
	byAlice, err := a.ListVotes(ctx, store.VoteQuery{Voter: "Alice@X"})
	if err != nil {
		t.Fatal(err)
	}
	if len(byAlice) != 3 || byAlice[0].Voter != "Alice@X" || byAlice[0].Kind != store.VoteNotBulk {
		t.Errorf("list by voter: got %+v", byAlice)
	}
	if d := byAlice[0].Time.Sub(now); d > time.Second || d < -time.Second {
		t.Errorf("vote time %v, want about %v", byAlice[0].Time, now)
	}
	imatch, err := a.ListVotes(ctx, store.VoteQuery{KeyPrefix: "v1:imatch."})
	if err != nil {
		t.Fatal(err)
	}
	if len(imatch) != 3 {
		t.Errorf("list by prefix: got %d (%s), want 3", len(imatch), keysOf(imatch))
	}
	// The listed pseudonym works as a query.
	byID, err := a.ListVotes(ctx, store.VoteQuery{VoterID: byAlice[0].VoterID, Keys: []string{"v1:imatch.0:aa"}})
	if err != nil || len(byID) != 1 {
		t.Errorf("list by voter id and key: got %+v, %v", byID, err)
	}
	limited, err := a.ListVotes(ctx, store.VoteQuery{Limit: 2})
	if err != nil || len(limited) != 2 {
		t.Errorf("list with limit 2: got %d, %v", len(limited), err)
	}

	if _, err := a.RemoveVotes(ctx, store.VoteQuery{}); err == nil {
		t.Error("remove with an empty query: no error")
	}
	n, err := a.RemoveVotes(ctx, store.VoteQuery{Voter: "alice@x"})
	if err != nil || n != 3 {
		t.Errorf("remove alice: removed %d, %v; want 3", n, err)
	}
	res := observe(t, st, now, []string{"v1:imatch.0:aa", "v1:shingle.0:ac"}, "alice@x")
	if res.Votes[0] != (store.Tally{Bulk: 1}) || res.Votes[1] != (store.Tally{NotBulk: 1}) || len(res.UserVotes) != 0 {
		t.Errorf("after removing alice: tallies %+v, user votes %v", res.Votes, res.UserVotes)
	}
	n, err = a.RemoveVotes(ctx, store.VoteQuery{Keys: []string{"v1:imatch.0:aa"}})
	if err != nil || n != 1 {
		t.Errorf("remove by key: removed %d, %v; want 1", n, err)
	}
	n, err = a.RemoveVotes(ctx, store.VoteQuery{KeyPrefix: "v1:shingle."})
	if err != nil || n != 1 {
		t.Errorf("remove by prefix: removed %d, %v; want 1", n, err)
	}
	left, err := a.ListVotes(ctx, store.VoteQuery{})
	if err != nil || len(left) != 0 {
		t.Errorf("after removing everything: %d left (%s), %v", len(left), keysOf(left), err)
	}
	if byBob, _ := a.ListVotes(ctx, store.VoteQuery{Voter: "bob@x"}); len(byBob) != 0 {
		t.Errorf("bob's index still lists %s", keysOf(byBob))
	}
}

// chainCopy is copy j of a campaign edited a little more each time: it
// shares two keys per family with copy j-1 and none with copy j-3.
func chainCopy(j int) []string {
	var keys []string
	for _, f := range []string{"imatch", "shingle", "charshingle"} {
		for i := range 3 {
			keys = append(keys, fmt.Sprintf("v1:%s.%d:%016x", f, (j+i)%3, 0xc0000+j+i))
		}
	}
	return keys
}

// campaignVotes: a vote also covers the campaign of the voted message, so
// that a later copy which shares no key with the voted one carries it.
func (s *suite) campaignVotes(t *testing.T) {
	st := s.open(t, store.Params{})
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	var id uint32
	for j := range 4 {
		res := observe(t, st, at(j), chainCopy(j), fmt.Sprintf("early%d@x", j))
		if j == 0 {
			id = res.Campaign.ID
		} else if res.Campaign.ID != id || len(res.Campaign.Joined) == 0 {
			t.Fatalf("copy %d: campaign %+v, want it joined to %08x", j, res.Campaign, id)
		}
	}
	// Alice votes "not bulk" on copy 0, Bob "bulk" on copy 2.
	vote(t, st, at(10), "alice@x", store.VoteNotBulk, chainCopy(0)...)
	vote(t, st, at(10), "bob@x", store.VoteBulk, chainCopy(2)...)
	// Copy 5 shares no key with copy 0 and joins through copies 3 and 4.
	observe(t, st, at(11), chainCopy(4), "early4@x")
	res := observe(t, st, at(12), chainCopy(5), "Alice@X", "bob@x", "carol@x")
	if res.Campaign.ID != id {
		t.Fatalf("copy 5: campaign %+v, want %08x", res.Campaign, id)
	}
	if res.OwnVotes["Alice@X"] != nil {
		t.Errorf("copy 5 shares no key with copy 0, yet alice's own key votes are %v", res.OwnVotes["Alice@X"])
	}
	wantOwn := map[string]store.VoteKind{"Alice@X": store.VoteNotBulk, "bob@x": store.VoteBulk}
	if fmt.Sprint(res.CampaignOwn) != fmt.Sprint(wantOwn) || res.CampaignVotes != (store.Tally{NotBulk: 1, Bulk: 1}) {
		t.Errorf("copy 5: campaign votes %+v, own %v; want {1 1} and %v", res.CampaignVotes, res.CampaignOwn, wantOwn)
	}
	// More voters: the tally counts distinct voters, a changed vote once.
	vote(t, st, at(13), "carol@x", store.VoteNotBulk, chainCopy(1)...)
	vote(t, st, at(13), "dave@x", store.VoteNotBulk, chainCopy(5)...)
	vote(t, st, at(14), "bob@x", store.VoteNotBulk, chainCopy(3)...)
	res = observe(t, st, at(15), chainCopy(6), "erin@x")
	if res.CampaignVotes != (store.Tally{NotBulk: 4}) || res.CampaignOwn != nil {
		t.Errorf("copy 6 to a non-voter: campaign votes %+v, own %v; want 4 not-bulk, none own", res.CampaignVotes, res.CampaignOwn)
	}
	// Peek reads the tally, writes nothing.
	if p, ok := st.(store.Peeker); ok {
		pr, err := p.Peek(context.Background(), chainCopy(7), at(15))
		if err != nil || pr.CampaignVotes != (store.Tally{NotBulk: 4}) {
			t.Errorf("peek: campaign votes %+v, %v; want 4 not-bulk", pr.CampaignVotes, err)
		}
	}
	// Retraction (on any copy of the campaign) removes it.
	vote(t, st, at(16), "alice@x", store.VoteNone, chainCopy(6)...)
	res = observe(t, st, at(17), chainCopy(7), "alice@x")
	if res.CampaignVotes != (store.Tally{NotBulk: 3}) || res.CampaignOwn != nil {
		t.Errorf("after alice retracted: campaign votes %+v, own %v; want 3 not-bulk, none own", res.CampaignVotes, res.CampaignOwn)
	}
	// The admin lists campaign votes under the campaign's id and removes
	// them by it.
	a := admin(t, st)
	ctx := context.Background()
	ck := store.CampaignVoteKey(id)
	byBob, err := a.ListVotes(ctx, store.VoteQuery{Voter: "bob@x", Keys: []string{ck}})
	if err != nil || len(byBob) != 1 || byBob[0].Kind != store.VoteNotBulk {
		t.Errorf("list bob's campaign vote: %+v, %v", byBob, err)
	}
	camps, err := a.ListVotes(ctx, store.VoteQuery{KeyPrefix: "campaign:"})
	if err != nil || len(camps) != 3 || camps[0].Key != ck {
		t.Errorf("list campaign votes by prefix: got %d (%s), %v; want 3 on %s", len(camps), keysOf(camps), err, ck)
	}
	if n, err := a.RemoveVotes(ctx, store.VoteQuery{Keys: []string{ck}}); err != nil || n != 3 {
		t.Errorf("remove the campaign's votes: removed %d, %v; want 3", n, err)
	}
	res = observe(t, st, at(18), chainCopy(8), "bob@x")
	if res.CampaignVotes != (store.Tally{}) || res.CampaignOwn != nil {
		t.Errorf("after removal: campaign votes %+v, own %v", res.CampaignVotes, res.CampaignOwn)
	}
	// A vote on keys of no campaign stores no campaign vote.
	vote(t, st, at(19), "frank@x", store.VoteNotBulk, "v1:imatch.0:00000000000fffff")
	if fr, _ := a.ListVotes(ctx, store.VoteQuery{Voter: "frank@x"}); len(fr) != 1 {
		t.Errorf("a vote on an unseen key: %s, want the key only", keysOf(fr))
	}
}

// campaignVoteHorizon: campaign votes expire at the horizon as key votes do.
func (s *suite) campaignVoteHorizon(t *testing.T) {
	st := s.open(t, store.Params{VoteHorizon: time.Hour})
	observe(t, st, t0, chainCopy(0), "a@x")
	observe(t, st, t0.Add(time.Minute), chainCopy(1), "b@x")
	vote(t, st, t0.Add(2*time.Minute), "v@x", store.VoteNotBulk, chainCopy(1)...)
	res := observe(t, st, t0.Add(30*time.Minute), chainCopy(2), "v@x")
	if res.CampaignOwn["v@x"] != store.VoteNotBulk || res.CampaignVotes != (store.Tally{NotBulk: 1}) {
		t.Fatalf("within the horizon: campaign votes %+v, own %v", res.CampaignVotes, res.CampaignOwn)
	}
	res = observe(t, st, t0.Add(2*time.Hour), chainCopy(3), "v@x")
	if len(res.Campaign.Joined) == 0 || res.CampaignOwn != nil || res.CampaignVotes != (store.Tally{}) {
		t.Errorf("past the horizon: campaign %+v, votes %+v, own %v; want joined, no votes", res.Campaign, res.CampaignVotes, res.CampaignOwn)
	}
}

// campaignVoteRefReused: a campaign's ref is free again once it left the
// window; the new campaign that takes it does not inherit its votes.
func (s *suite) campaignVoteRefReused(t *testing.T) {
	st := s.open(t, store.Params{})
	id := observe(t, st, t0, chainCopy(0), "a@x").Campaign.ID
	observe(t, st, t0.Add(time.Minute), chainCopy(1), "b@x")
	vote(t, st, t0.Add(2*time.Minute), "v@x", store.VoteNotBulk, chainCopy(0)...)
	// Past the window the same keys start the campaign afresh, at the same
	// ref (a hash of its first message's keys).
	later := t0.Add(31 * time.Hour)
	res := observe(t, st, later, chainCopy(0), "c@x")
	if res.Campaign.ID != id || len(res.Campaign.Joined) != 0 {
		t.Fatalf("past the window: campaign %+v, want a new one at %08x", res.Campaign, id)
	}
	res = observe(t, st, later.Add(time.Minute), chainCopy(1), "v@x")
	if res.Campaign.ID != id || res.CampaignOwn != nil || res.CampaignVotes != (store.Tally{}) {
		t.Errorf("the new campaign at %08x: %+v, votes %+v, own %v; want no campaign votes", id, res.Campaign, res.CampaignVotes, res.CampaignOwn)
	}
	// Her votes on the keys themselves are still there.
	if got := res.OwnVotes["v@x"]; len(got) == 0 || !slices.Contains(got, store.VoteNotBulk) {
		t.Errorf("her key votes after the campaign ended: %v", got)
	}
}

// campaignVoteWeakJoin: a message that joined a campaign weakly (through
// a shared footer) does not carry the campaign's votes.
func (s *suite) campaignVoteWeakJoin(t *testing.T) {
	st := s.open(t, store.Params{})
	footer := "v1:sift.0:00000000000000f0"
	mailing := func(j int) []string {
		keys := []string{footer}
		for _, f := range []string{"imatch", "shingle", "charshingle", "sift"} {
			for i := 1; i <= 3; i++ {
				keys = append(keys, fmt.Sprintf("v1:%s.%d:%016x", f, i, j<<8|i))
			}
		}
		return keys
	}
	id := observe(t, st, t0, mailing(1), "a@x").Campaign.ID
	vote(t, st, t0.Add(time.Minute), "alice@x", store.VoteNotBulk, mailing(1)...)
	res := observe(t, st, t0.Add(2*time.Minute), mailing(2), "alice@x")
	if res.Campaign.ID != id || len(res.Campaign.Joined) != 1 {
		t.Fatalf("another mailing with the footer: campaign %+v, want a weak join to %08x through the footer", res.Campaign, id)
	}
	if res.CampaignOwn != nil || res.CampaignVotes != (store.Tally{}) {
		t.Errorf("weak join: campaign votes %+v, own %v; want none", res.CampaignVotes, res.CampaignOwn)
	}
	// A copy of the voted mailing joins strongly and carries them.
	res = observe(t, st, t0.Add(3*time.Minute), append(mailing(1)[:12], "v1:sift.3:00000000000000ff"), "alice@x")
	if res.Campaign.ID != id || res.CampaignOwn["alice@x"] != store.VoteNotBulk {
		t.Errorf("a copy of the voted mailing: campaign %+v, own campaign votes %v", res.Campaign, res.CampaignOwn)
	}
}

func (s *suite) persistence(t *testing.T) {
	sp := space(t)
	p := store.Params{}
	st := s.h.Open(t, sp, p)
	now := time.Now()
	k1, k2, k3 := "v1:p:0000000000000001", "v1:p:0000000000000002", "v1:p:0000000000000003"
	volume(t, st, now, k1, "a@x")
	volume(t, st, now, k2, rcpts("e", 10)...)
	volume(t, st, now, k3, rcpts("h", 500)...)
	vote(t, st, now, "alice@x", store.VoteNotBulk, k1, k2)
	if err := st.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if s.h.Restart != nil {
		s.h.Restart(t)
	}
	st = s.h.Open(t, sp, p)
	vols := []int64{volume(t, st, now.Add(time.Second), k1), volume(t, st, now.Add(time.Second), k2),
		volume(t, st, now.Add(time.Second), k3)}
	if vols[0] != 1 || vols[1] != 10 {
		t.Errorf("after restart: volumes %v, want 1 and 10 for the first two", vols)
	}
	s.within(t, "HLL after restart", vols[2], 500)
	// The tiers keep working: a known recipient is not counted again.
	if got := volume(t, st, now.Add(time.Second), k1, "a@x"); got != 1 {
		t.Errorf("after restart, first sighting seen again: got %d, want 1", got)
	}
	if got := volume(t, st, now.Add(time.Second), k2, "e3@example.org", "new@x"); got != 11 {
		t.Errorf("after restart, exact key: got %d, want 11", got)
	}
	res := observe(t, st, now.Add(time.Second), []string{k1, k2}, "alice@x")
	if res.Votes[0] != (store.Tally{NotBulk: 1}) || res.UserVotes["alice@x"] != store.VoteNotBulk {
		t.Errorf("after restart: tallies %+v, user votes %v", res.Votes, res.UserVotes)
	}
	// On k1, on k2 and on the campaign the two keys were in.
	if got, err := admin(t, st).ListVotes(context.Background(), store.VoteQuery{Voter: "alice@x"}); err != nil || len(got) != 3 {
		t.Errorf("after restart, alice's votes: %d (%s), %v; want 3", len(got), keysOf(got), err)
	}
}

func (s *suite) badInput(t *testing.T) {
	st := s.open(t, store.Params{})
	ctx := context.Background()
	many := make([]string, store.MaxKeys+1)
	for i := range many {
		many[i] = fmt.Sprint("k", i)
	}
	cases := []struct {
		name string
		o    store.Observation
	}{
		{"too many keys", store.Observation{Keys: many, Recipients: []string{"a@x"}}},
		{"empty key", store.Observation{Keys: []string{"k", ""}, Recipients: []string{"a@x"}}},
		{"huge key", store.Observation{Keys: []string{strings.Repeat("k", store.MaxKeyLen+1)}}},
		{"too many recipients", store.Observation{Keys: []string{"k"}, Recipients: rcpts("r", store.MaxRecipients+1)}},
	}
	for _, c := range cases {
		_, err := st.Observe(ctx, c.o)
		if err == nil {
			t.Errorf("%s: no error", c.name)
		} else if errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s: %v wraps ErrUnavailable; bad input is not an outage", c.name, err)
		}
	}
	if err := st.RecordVote(ctx, store.Vote{Keys: []string{"k"}, Voter: " ", Kind: store.VoteBulk}); err == nil {
		t.Error("vote without voter: no error")
	}
	if err := st.RecordVote(ctx, store.Vote{Keys: []string{"k"}, Voter: "a@x", Kind: 7}); err == nil {
		t.Error("vote of unknown kind: no error")
	}
	// Blank recipients are ignored, not counted.
	if got := volume(t, st, t0, "v1:blank:01", "", "  "); got != 0 {
		t.Errorf("blank recipients: got %d, want 0", got)
	}
}

func (s *suite) closed(t *testing.T) {
	st := s.open(t, store.Params{})
	if err := st.Ping(context.Background()); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	_, err := st.Observe(context.Background(), store.Observation{Keys: []string{"k"}, Recipients: []string{"a@x"}})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("observe after close: got %v, want an error wrapping ErrUnavailable", err)
	}
}

// aliasParts observes two parts of one campaign that shared nothing, A
// (a1, a2) and B (b1, b2), then a copy naming A by two I-Match keys, a
// shingle and a letter shingle, B through a shingle and a key of family
// via (an I-Match key, or a letter shingle: a strong join unioning B
// through either class of the guard, model.go's aliasWeight), to u; it
// returns A, B and the copy's keys.
func aliasParts(t *testing.T, st store.Store, via string) (a, b store.Campaign, keys []string) {
	t.Helper()
	return aliasPartsThen(t, st, via, nil)
}

// aliasPartsThen is aliasParts, with between run before the merging copy.
func aliasPartsThen(t *testing.T, st store.Store, via string, between func()) (a, b store.Campaign, keys []string) {
	t.Helper()
	k := familyKey
	a = observe(t, st, t0, []string{k("imatch", 0, 0xa0), k("imatch", 1, 0xa1), k("imatch", 2, 0xa2),
		k("shingle", 0, 0xb0), k("shingle", 1, 0xb1), k("shingle", 2, 0xb2),
		k("charshingle", 0, 0x1a0), k("charshingle", 1, 0x1a1)}, "a1@x", "a2@x").Campaign
	b = observe(t, st, t0.Add(time.Minute), []string{k("imatch", 0, 0xc0), k("imatch", 1, 0xc1), k("imatch", 2, 0xc2),
		k("shingle", 0, 0xd0), k("shingle", 1, 0xd1), k("shingle", 2, 0xd2),
		k("charshingle", 0, 0x1c0), k("charshingle", 1, 0x1c1)}, "b1@x", "b2@x").Campaign
	if a.ID == b.ID || a.Recipients != 2 || b.Recipients != 2 {
		t.Fatalf("campaigns %+v, %+v: want two, of 2 recipients each", a, b)
	}
	keys = []string{k("imatch", 0, 0xa0), k("imatch", 1, 0xa1), k("imatch", 2, 0x32),
		k("shingle", 0, 0xb0), k("shingle", 1, 0xd1), k("shingle", 2, 0x30),
		k("charshingle", 0, 0x1a0), k("charshingle", 1, 0x31)}
	switch via {
	case "imatch":
		keys[2] = k("imatch", 2, 0xc2)
	case "charshingle":
		keys[7] = k("charshingle", 1, 0x1c1)
	default:
		t.Fatalf("aliasParts via %q", via)
	}
	if between != nil {
		between()
	}
	res := observe(t, st, t0.Add(2*time.Minute), keys, "u@x")
	if got := res.Campaign; got.ID != a.ID || got.Recipients != 5 {
		t.Fatalf("the merging copy: %+v, want %08x with a1, a2, b1, b2, u", got, a.ID)
	}
	return a, b, keys
}

// campaignAliasWeakJoin: a weak join counts the root alone, without its
// parts, unless one of its own keys named a part; a strong copy counts
// both. A footer-sized share of keys (a newsletter's frame, a list's
// template) must not lift unrelated mail to a merged campaign's volume
// (docs/evaluation.md, "Weak joins and stored parts").
func (s *suite) campaignAliasWeakJoin(t *testing.T) {
	st := s.open(t, store.Params{})
	k := familyKey
	a, b, _ := aliasParts(t, st, "imatch")
	// One shingle among ten new ones, and three new I-Match keys: 1/11 of
	// a family of 2, under WeakShare.
	weak := func(shingle, own int, at time.Duration, to string) store.Campaign {
		t.Helper()
		keys := []string{k("imatch", 0, own), k("imatch", 1, own+1), k("imatch", 2, own+2), k("shingle", 0, shingle)}
		for i := 1; i <= 10; i++ {
			keys = append(keys, k("shingle", i, own+i))
		}
		return observe(t, st, t0.Add(at), keys, to).Campaign
	}
	// Through A's shingle b0: A's own a1, a2, u and w; the part's b1, b2
	// are not counted.
	if got := weak(0xb0, 0x700, 3*time.Minute, "w@x"); got.ID != a.ID || got.Recipients != 4 || len(got.Joined) != 1 {
		t.Errorf("a weak join: %+v, want %08x with its own 4 recipients, joined through 1 key", got, a.ID)
	}
	// Through the part's shingle d0: A with its part, a1, a2, u, w, x, b1,
	// b2; without the merge, B's own b1, b2, u, x.
	wantID, want := a.ID, int64(7)
	if s.h.NoMerge {
		wantID, want = b.ID, 4
	}
	if got := weak(0xd0, 0x800, 4*time.Minute, "x@x"); got.ID != wantID || got.Recipients != want {
		t.Errorf("a weak join through the part's key: %+v, want %08x with %d recipients", got, wantID, want)
	}
	// A strong copy of A: a1, a2, u, w, x, s and the part's b1, b2.
	want = 8
	if s.h.NoMerge {
		want = 5
	}
	strong := []string{k("imatch", 0, 0xa0), k("imatch", 1, 0xa1), k("imatch", 2, 0xa2),
		k("shingle", 0, 0xb0), k("shingle", 1, 0xb1), k("shingle", 2, 0xb2)}
	if got := observe(t, st, t0.Add(5*time.Minute), strong, "s@x").Campaign; got.ID != a.ID || got.Recipients != want {
		t.Errorf("a strong copy: %+v, want %08x with %d recipients", got, a.ID, want)
	}
}

// campaignAliasVotes: votes cast on a part before its merge cover the
// root's later copies; a voter who voted on both keeps the later vote.
func (s *suite) campaignAliasVotes(t *testing.T) {
	st := s.open(t, store.Params{})
	k := familyKey
	aKeys := []string{k("imatch", 0, 0xa0), k("imatch", 1, 0xa1), k("imatch", 2, 0xa2),
		k("shingle", 0, 0xb0), k("shingle", 1, 0xb1), k("shingle", 2, 0xb2)}
	bKeys := []string{k("imatch", 0, 0xc0), k("imatch", 1, 0xc1), k("imatch", 2, 0xc2)}
	a, _, _ := aliasPartsThen(t, st, "imatch", func() {
		vote(t, st, t0.Add(80*time.Second), "alice@x", store.VoteBulk, aKeys...)
		vote(t, st, t0.Add(80*time.Second), "bob@x", store.VoteBulk, aKeys...)
		vote(t, st, t0.Add(90*time.Second), "alice@x", store.VoteNotBulk, bKeys...)
		vote(t, st, t0.Add(90*time.Second), "carol@x", store.VoteNotBulk, bKeys...)
	})
	// A copy of A to alice, bob, carol and dan: A's votes and B's, alice's
	// later one; without the merge, A's own.
	wantVotes := store.Tally{NotBulk: 2, Bulk: 1}
	wantOwn := map[string]store.VoteKind{"alice@x": store.VoteNotBulk, "bob@x": store.VoteBulk, "carol@x": store.VoteNotBulk}
	if s.h.NoMerge {
		wantVotes = store.Tally{Bulk: 2}
		wantOwn = map[string]store.VoteKind{"alice@x": store.VoteBulk, "bob@x": store.VoteBulk}
	}
	res := observe(t, st, t0.Add(3*time.Minute), aKeys, "alice@x", "bob@x", "carol@x", "dan@x")
	if res.Campaign.ID != a.ID || res.CampaignVotes != wantVotes || fmt.Sprint(res.CampaignOwn) != fmt.Sprint(wantOwn) {
		t.Errorf("a copy of A: campaign %08x, votes %+v, own %v; want %08x, %+v, %v",
			res.Campaign.ID, res.CampaignVotes, res.CampaignOwn, a.ID, wantVotes, wantOwn)
	}
}

// campaignAlias: after the merge, a copy naming the merged part alone
// joins the root (its id, the distinct recipients of both); a retry of the
// merging copy counts nothing twice. The merge is made through an I-Match
// key, and (campaignAliasPair) through two resemblance families.
func (s *suite) campaignAlias(t *testing.T)     { s.aliasJoins(t, "imatch") }
func (s *suite) campaignAliasPair(t *testing.T) { s.aliasJoins(t, "charshingle") }

func (s *suite) aliasJoins(t *testing.T, via string) {
	st := s.open(t, store.Params{})
	k := familyKey
	a, b, keys := aliasParts(t, st, via)
	// A retry: the keys point to A now; A with its part B counts a1, a2,
	// b1, b2 and u once each (without the merge, A's own a1, a2, u).
	want := int64(5)
	if s.h.NoMerge {
		want = 3
	}
	for range 2 {
		if got := observe(t, st, t0.Add(2*time.Minute), keys, "u@x").Campaign; got.ID != a.ID || got.Recipients != want {
			t.Errorf("retry: campaign %+v, want %08x with %d recipients", got, a.ID, want)
		}
	}
	// A copy naming B alone (two I-Match keys and a shingle) to z: A's
	// id, a1, a2, b1, b2, u, z; without the merge B's b1, b2, u (counted
	// with the union), z.
	bKeys := []string{k("imatch", 0, 0xc0), k("imatch", 1, 0xc1), k("imatch", 2, 0x40),
		k("shingle", 0, 0xd0), k("shingle", 1, 0x41), k("shingle", 2, 0x42)}
	wantID, want := a.ID, int64(6)
	if s.h.NoMerge {
		wantID, want = b.ID, 4
	}
	res := observe(t, st, t0.Add(3*time.Minute), bKeys, "z@x")
	if got := res.Campaign; got.ID != wantID || got.Recipients != want || len(got.Joined) != 3 {
		t.Errorf("a copy naming B alone: %+v, want %08x with %d recipients, joined through 3 keys", got, wantID, want)
	}
	for _, i := range res.Campaign.Joined {
		if res.Volumes[i] != want {
			t.Errorf("key %d: volume %d, want %d", i, res.Volumes[i], want)
		}
	}
	// Its keys moved to A: a read of them finds A with every recipient.
	if got := observe(t, st, t0.Add(4*time.Minute), bKeys[:2]).Campaign; got.ID != wantID || got.Recipients != want {
		t.Errorf("a read of B's keys: %+v, want %08x with %d recipients", got, wantID, want)
	}
}

// campaignAliasGuard: a union through what a newsletter's issues share
// is counted for the copy naming it and merges nothing: keys of one
// resemblance family (two shingles), a shingle and an attachment (a
// logo), a shingle and a term-set band as a small share of the copy's
// evidence (a footer among many keys: 9 %, under WeakShare).
func (s *suite) campaignAliasGuard(t *testing.T) {
	k := familyKey
	aKeys := []string{k("imatch", 0, 0xa0), k("imatch", 1, 0xa1), k("imatch", 2, 0xa2), k("shingle", 0, 0xb0), k("shingle", 3, 0xb3)}
	for _, tc := range []struct {
		name string
		keys []string // besides aKeys
	}{
		{"shingles", []string{k("shingle", 1, 0xf1), k("shingle", 2, 0xf2)}},
		{"attach", []string{k("shingle", 1, 0xf1), k("attach", 0, 0x1f0)}},
		{"terms", []string{k("shingle", 1, 0xf1), k("shingle", 4, 0x34), k("shingle", 5, 0x35), k("shingle", 6, 0x36),
			k("terms", 0, 0x1f1), k("terms", 1, 0x31), k("terms", 2, 0x32), k("terms", 3, 0x33), k("terms", 4, 0x34),
			k("terms", 5, 0x35), k("terms", 6, 0x36), k("terms", 7, 0x37), k("terms", 8, 0x38), k("terms", 9, 0x39),
			k("charshingle", 0, 0x30), k("charshingle", 1, 0x31)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := s.open(t, store.Params{})
			a := observe(t, st, t0, []string{k("imatch", 0, 0xa0), k("imatch", 1, 0xa1), k("imatch", 2, 0xa2),
				k("shingle", 0, 0xb0), k("shingle", 1, 0xb1), k("shingle", 2, 0xb2), k("shingle", 3, 0xb3)}, "a1@x", "a2@x").Campaign
			c := observe(t, st, t0.Add(time.Minute), []string{k("imatch", 0, 0xe0), k("imatch", 1, 0xe1), k("imatch", 2, 0xe2),
				k("shingle", 0, 0xf0), k("shingle", 1, 0xf1), k("shingle", 2, 0xf2),
				k("attach", 0, 0x1f0), k("terms", 0, 0x1f1)}, "c1@x", "c2@x", "c3@x").Campaign
			// A by every I-Match key and two shingles, C by the case's
			// keys: the union (a1, a2, c1, c2, c3, u), no merge.
			keys := append(slices.Clone(aKeys), tc.keys...)
			if got := observe(t, st, t0.Add(2*time.Minute), keys, "u@x").Campaign; got.ID != a.ID || got.Recipients != 6 {
				t.Fatalf("a copy naming C by %s: %+v, want %08x with 6 recipients", tc.name, got, a.ID)
			}
			// A copy naming C alone stays C's: c1, c2, c3, u (the union
			// counted it there), z.
			res := observe(t, st, t0.Add(3*time.Minute), []string{k("imatch", 0, 0xe0), k("imatch", 1, 0xe1), k("imatch", 2, 0x50),
				k("shingle", 0, 0xf0), k("shingle", 1, 0x51), k("shingle", 2, 0x52)}, "z@x")
			if got := res.Campaign; got.ID != c.ID || got.Recipients != 5 {
				t.Errorf("a copy naming C alone: %+v, want %08x with 5 recipients (no merge)", got, c.ID)
			}
			// A retry of the union copy: A's own a1, a2, u.
			if got := observe(t, st, t0.Add(2*time.Minute), keys, "u@x").Campaign; got.ID != a.ID || got.Recipients != 3 {
				t.Errorf("retry: %+v, want %08x with its own 3 recipients", got, a.ID)
			}
		})
	}
}

// campaignAliasExpires: the merge lives as long as its part. Within the
// window a copy naming the part joins the root; once the part left the
// window (the root kept alive by its own copies), a copy of the part's
// keys starts a campaign of its own, counting only its own recipient.
func (s *suite) campaignAliasExpires(t *testing.T) {
	p := store.Params{Window: 4 * time.Hour, Buckets: 4}
	st := s.open(t, p)
	k := familyKey
	a, b, _ := aliasParts(t, st, "imatch")
	wantID := a.ID
	if s.h.NoMerge {
		wantID = b.ID
	}
	bKeys := func(j int) []string {
		return []string{k("imatch", 0, 0xc0), k("imatch", 1, 0xc1), k("imatch", 2, 0x600+j),
			k("shingle", 0, 0xd0), k("shingle", 1, 0x700+j), k("shingle", 2, 0x800+j)}
	}
	aKeys := []string{k("imatch", 0, 0xa0), k("imatch", 1, 0xa1), k("imatch", 2, 0xa2),
		k("shingle", 0, 0xb0), k("shingle", 1, 0xb1), k("shingle", 2, 0xb2)}
	if got := observe(t, st, t0.Add(time.Hour), bKeys(0)[:2]).Campaign; got.ID != wantID {
		t.Errorf("a read of B's keys within the window: %+v, want %08x", got, wantID)
	}
	// A lives on: a copy of it every hour.
	for h := 2; h <= 7; h++ {
		if got := observe(t, st, t0.Add(time.Duration(h)*time.Hour), aKeys, fmt.Sprintf("h%d@x", h)).Campaign; got.ID != a.ID {
			t.Fatalf("copy of A at hour %d: %+v, want %08x", h, got, a.ID)
		}
	}
	// Past the window of the merge and of B: B's keys are nobody's.
	res := observe(t, st, t0.Add(7*time.Hour), bKeys(1), "z@x")
	if got := res.Campaign; got.ID == a.ID || got.Recipients != 1 || len(got.Joined) != 0 {
		t.Errorf("a copy of B's keys past the window: %+v, want a new campaign of 1", got)
	}
	if got := observe(t, st, t0.Add(7*time.Hour), aKeys).Campaign; got.ID != a.ID || got.Recipients > 5 {
		t.Errorf("A past the window: %+v, want %08x with its recent copies' recipients only", got, a.ID)
	}
}

// familyKey is a key of family f's i-th signature with value v, in the
// form the signature set writes, for cases that choose which keys two
// messages share.
func familyKey(f string, i, v int) string { return fmt.Sprintf("v1:%s.%d:%016x", f, i, v) }
