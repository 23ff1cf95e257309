package eval

import (
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// TestWorldTrace: a tagged ham message names the earlier members of its
// store campaign and the families it shares with each; a missed copy its
// cause, and per family how many of its keys its campaign's earlier copies
// had.
func TestWorldTrace(t *testing.T) {
	key := func(f signature.Family, h uint64) signature.Key { return signature.Key{Family: f, Hash: h} }
	verdict := func(id uint32, rcpts int64, bulk bool, via []signature.Family, keys ...signature.Key) detect.Verdict {
		return detect.Verdict{Bulk: bulk, Via: via, Campaign: store.Campaign{ID: id, Recipients: rcpts},
			Analysis: &detect.Analysis{Keys: keys}}
	}
	line, contain := signature.FamilyLines, signature.FamilyContain
	bases := []*base{{Item: Item{Name: "spam/a"}}}
	tr := newWorldTracer(&Config{WorldTrace: &strings.Builder{}})
	// A list's first message, then its second sharing the footer's line
	// keys; the second is tagged.
	tr.add(traced{label: "ham/1", ham: true, list: true, campaign: -1}, verdict(7, 1, false, nil, key(line, 1), key(line, 2), key(contain, 3)))
	tr.add(traced{label: "ham/2", ham: true, list: true, campaign: -1}, verdict(7, 2, true, []signature.Family{line}, key(line, 1), key(line, 2), key(contain, 4)))
	// A campaign's copies: the third shares one key of three with the
	// first two and starts its own campaign.
	tr.add(traced{label: "spam/a#1", campaign: 0, k: 1}, verdict(9, 1, false, nil, key(contain, 10), key(contain, 11)))
	tr.add(traced{label: "spam/a#2", campaign: 0, k: 2}, verdict(9, 2, false, []signature.Family{contain}, key(contain, 10), key(contain, 11)))
	tr.add(traced{label: "spam/a#3", campaign: 0, k: 3}, verdict(12, 1, false, nil, key(contain, 10), key(contain, 20), key(line, 21)))
	var out strings.Builder
	if err := tr.write(&out, "world", 2, bases); err != nil {
		t.Fatal(err)
	}
	want := "world\tham\tham/2\tlist\t-\t00000007\t2\tlines\t1 earlier: ham/1[lines:2]\n" +
		"world\tmiss\tspam/a#3\tspam-campaign\town\t0000000c\t1\t-\tseen contain:1/2 lines:0/1; others -\n"
	if got := out.String(); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	if n, m := len(strings.Split(WorldTraceHeader, "\t")), len(strings.Split(strings.Split(want, "\n")[0], "\t")); n != m {
		t.Errorf("header has %d columns, a line %d", n, m)
	}
	var none *worldTracer
	none.add(traced{}, detect.Verdict{})
	if err := none.write(&out, "world", 2, bases); err != nil {
		t.Errorf("nil tracer: %v", err)
	}
}
