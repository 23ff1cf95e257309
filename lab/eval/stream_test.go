package eval

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// A dimension counts distinct values per key within a day either side of
// the message's time; the message's count is its keys' highest.
func TestDimension(t *testing.T) {
	d := dimension[signature.Key]{}
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

// A stream trace line has the header's columns: the verdict, the
// campaign, the families that joined it, the keys per family, and a
// Subject whose control characters (a tab would shift every column)
// became spaces.
func TestStreamTrace(t *testing.T) {
	b := detect.NewBuilder(detect.DefaultLimits, "X-Bulk", "X-Bulk-Feedback")
	b.ReadRaw([]byte("Subject: =?utf-8?q?x?=\tcheap\tpills\nDate: Sun, 8 Apr 2007 13:07:21 -0400\n\nbody\n"))
	msg := b.Message()
	msg.Time = time.Date(2007, 4, 8, 17, 7, 21, 0, time.UTC)
	v := detect.Verdict{
		Bulk:     true,
		Volumes:  map[signature.Family]int64{signature.FamilyIMatch: 3, signature.FamilyContain: 12},
		Campaign: store.Campaign{ID: 0x7f3a91c2, Recipients: 12, Networks: 4},
		Via:      []signature.Family{signature.FamilyIMatch, signature.FamilyContain},
		Analysis: &detect.Analysis{Keys: []signature.Key{{Family: signature.FamilyContain, Hash: 1}, {Family: signature.FamilyIMatch, Hash: 2}, {Family: signature.FamilyContain, Hash: 3}}},
	}
	got := strings.Split(streamTraceLine(ClockDate, streamMsg{name: "inmail.7", spam: true}, msg, v), "\t")
	want := []string{"date", "inmail.7", "spam", "1", "12", "7f3a91c2", "12", "4", "imatch,contain", "imatch:1,contain:2", "2007-04-08T17:07:21Z", "=?utf-8?q?x?= cheap pills"}
	// The replay adds the last column, refiled, once the stream is over.
	if n := len(strings.Split(streamTraceHeader, "\t")); len(got) != n-1 {
		t.Fatalf("%d columns, want %d: %q", len(got), n, got)
	}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got, want := streamTraceLine(ClockReceived, streamMsg{name: "inmail.8"}, msg, detect.Verdict{Unsigned: true}), "received\tinmail.8\tpersonal\t0\t0\t-\t0\t0\t-\t-\t2007-04-08T17:07:21Z\t=?utf-8?q?x?= cheap pills"; got != want {
		t.Errorf("unsigned: got %q, want %q", got, want)
	}
}

// TestStreamGroups: an untagged copy of a visible-prefix group is early
// while the group's distinct recipients in the window are under T, split
// once they reach it, and split by where it went.
func TestStreamGroups(t *testing.T) {
	t0 := time.Date(2007, 4, 8, 12, 0, 0, 0, time.UTC)
	msg := func(p string, h int, rcpt string, bulk, joined bool, camp uint32) groupSpam {
		return groupSpam{prefix: p, at: t0.Add(time.Duration(h) * time.Hour), rcpts: []string{rcpt}, bulk: bulk, joined: joined, campaign: camp}
	}
	msgs := []groupSpam{
		msg("a", 0, "u1", false, false, 1), // early: 1 recipient
		msg("a", 1, "u2", false, true, 1),  // early: 2
		msg("a", 2, "u2", false, true, 1),  // early: still 2
		msg("a", 3, "u3", false, true, 2),  // split, another campaign
		msg("a", 4, "u1", true, true, 1),   // tagged
		msg("a", 5, "u4", false, false, 3), // split, own
		msg("a", 6, "u4", false, true, 1),  // split, main
		msg("a", 40, "u5", false, true, 1), // early again: the window emptied
		msg("b", 0, "u1", false, false, 9), // a group under T
		msg("", 0, "u1", false, false, 9),  // no prefix
		{prefix: "a", at: t0.Add(41 * time.Hour), rcpts: []string{"u5", "u6", "u7"}, unsigned: true}, // split, unsigned
	}
	got := streamGroups(msgs, 3, 24*time.Hour)
	want := StreamGroups{Threshold: 3, Groups: 1, Messages: 9, Untagged: 8, Early: 4, Split: 4, Unsigned: 1, Own: 1, Other: 1, Main: 1}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

// The stream section states the campaign sort in one line.
func TestStreamGroupsMarkdown(t *testing.T) {
	var b strings.Builder
	streamMarkdown(&b, []*StreamResult{{Corpus: "c", Clock: ClockDate,
		Groups: StreamGroups{Threshold: 10, Groups: 2, Messages: 30, Untagged: 9, Early: 5, Split: 4, Unsigned: 1, Own: 1, Other: 1, Main: 1}}})
	want := "Campaigns (visible-prefix groups of ≥ 10 spam): 2 groups, 30 messages, 9 untagged: 5 early (under 10 recipients in the window), 4 split (1 unsigned, 1 own, 1 in another campaign, 1 in the group's main campaign)."
	if !strings.Contains(b.String(), want) {
		t.Errorf("got\n%s\nwant a line\n%s", b.String(), want)
	}
}
