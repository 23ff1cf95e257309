package eval

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/signature"
)

// A world trace (Config.WorldTrace, bulklab eval -world-trace) says what a
// generated world's store did with the messages that went wrong: every
// ham message tagged, with the messages of the store campaign it was
// counted in and the families of the keys it shared with them (a list's
// template, a quoted thread, a footer, or a campaign's copy), and every
// counted copy left untagged, with its cause (MissCauses), the families
// that joined it, and per family how many of its keys earlier copies of
// its own campaign had (the evidence a join could have read). Held-out
// seeds are traced with it: docs/evaluation.md, "Held-out seeds (branch
// n-held, thirteenth sitting)".

// WorldTraceHeader names the columns of a world trace line: the world
// (an attack, or "one-window"), what went wrong (ham, miss), the message
// (a ham's name; a copy's base and ordinal), its kind (list, personal,
// spam or ham campaign) and cause (miss: own, split, main), the store
// campaign, its recipients, the families that joined, and the details:
// for ham, the campaign's earlier members with the families they share
// with it; for a miss, the keys per family and how many of them earlier
// copies of its campaign had.
const WorldTraceHeader = "world\twhat\tmessage\tkind\tcause\tcampaign\trecipients\tvia\tdetail"

// traced is one message of a world as the trace keeps it.
type traced struct {
	label    string
	ham      bool
	list     bool
	campaign int // base index; -1 for ham
	k        int
	store    uint32
	volume   int64
	via      []signature.Family
	keys     []signature.Key
	bulk     bool
}

// worldTracer collects a world's messages when tracing; nil otherwise.
type worldTracer struct {
	msgs []traced
}

var worldTraceMu sync.Mutex

func newWorldTracer(cfg *Config) *worldTracer {
	if cfg.WorldTrace == nil {
		return nil
	}
	return &worldTracer{}
}

func (w *worldTracer) add(t traced, v detect.Verdict) {
	if w == nil {
		return
	}
	t.store, t.via, t.bulk = v.Campaign.ID, v.Via, v.Bulk
	if v.Analysis != nil {
		t.keys = v.Analysis.Keys
	}
	t.volume = v.Campaign.Recipients
	w.msgs = append(w.msgs, t)
}

// write writes the world's lines, all at once so that parallel worlds do
// not interleave.
func (w *worldTracer) write(out io.Writer, world string, T int, bases []*base) error {
	if w == nil {
		return nil
	}
	var b strings.Builder
	type keyID struct {
		f signature.Family
		i uint8
		h uint64
	}
	members := map[uint32][]int{}
	mainOf := map[int]map[uint32]int{}
	for i, m := range w.msgs {
		members[m.store] = append(members[m.store], i)
		if !m.ham {
			if mainOf[m.campaign] == nil {
				mainOf[m.campaign] = map[uint32]int{}
			}
			mainOf[m.campaign][m.store]++
		}
	}
	fams := func(fs []signature.Family) string {
		if len(fs) == 0 {
			return "-"
		}
		s := make([]string, len(fs))
		for i, f := range fs {
			s[i] = f.String()
		}
		return strings.Join(s, ",")
	}
	// seen[c] holds the keys earlier copies of campaign c had, as the
	// messages go.
	seen := map[int]map[keyID]bool{}
	for i, m := range w.msgs {
		kind := "list"
		switch {
		case !m.ham && bases[m.campaign].ham:
			kind = "ham-campaign"
		case !m.ham:
			kind = "spam-campaign"
		case !m.list:
			kind = "personal"
		}
		if m.ham && m.bulk {
			mine := map[keyID]bool{}
			for _, k := range m.keys {
				mine[keyID{k.Family, k.Index, k.Hash}] = true
			}
			var parts []string
			earlier := 0
			for _, j := range members[m.store] {
				if j >= i {
					break
				}
				earlier++
				o := w.msgs[j]
				shared := map[signature.Family]int{}
				for _, k := range o.keys {
					if mine[keyID{k.Family, k.Index, k.Hash}] {
						shared[k.Family]++
					}
				}
				var sf []string
				for _, f := range signature.Families() {
					if n := shared[f]; n > 0 {
						sf = append(sf, fmt.Sprintf("%s:%d", f, n))
					}
				}
				if len(parts) < 12 {
					parts = append(parts, fmt.Sprintf("%s[%s]", o.label, strings.Join(sf, ",")))
				}
			}
			fmt.Fprintf(&b, "%s\tham\t%s\t%s\t-\t%08x\t%d\t%s\t%d earlier: %s\n", world, m.label, kind, m.store,
				m.volume, fams(m.via), earlier, strings.Join(parts, " "))
		}
		if m.ham {
			continue
		}
		if m.k > T && !m.bulk {
			cause := "main"
			switch {
			case len(m.via) == 0:
				cause = "own"
			case m.store != mainCampaign(mainOf[m.campaign]):
				cause = "split"
			}
			byFam := map[signature.Family][2]int{}
			for _, k := range m.keys {
				c := byFam[k.Family]
				c[0]++
				if seen[m.campaign][keyID{k.Family, k.Index, k.Hash}] {
					c[1]++
				}
				byFam[k.Family] = c
			}
			var sf []string
			for _, f := range signature.Families() {
				if c, ok := byFam[f]; ok {
					sf = append(sf, fmt.Sprintf("%s:%d/%d", f, c[1], c[0]))
				}
			}
			// Whom the store campaign holds besides this campaign's copies.
			others := map[string]int{}
			for _, j := range members[m.store] {
				if o := w.msgs[j]; j < i && (o.ham || o.campaign != m.campaign) {
					if o.ham {
						others["ham"]++
					} else {
						others[bases[o.campaign].Name]++
					}
				}
			}
			oth := []string{"-"}
			if len(others) > 0 {
				oth = nil
			}
			for _, n := range slices.Sorted(maps.Keys(others)) {
				oth = append(oth, fmt.Sprintf("%s×%d", n, others[n]))
			}
			fmt.Fprintf(&b, "%s\tmiss\t%s\t%s\t%s\t%08x\t%d\t%s\tseen %s; others %s\n", world, m.label, kind, cause, m.store,
				m.volume, fams(m.via), strings.Join(sf, " "), strings.Join(oth, ","))
		}
		if seen[m.campaign] == nil {
			seen[m.campaign] = map[keyID]bool{}
		}
		for _, k := range m.keys {
			seen[m.campaign][keyID{k.Family, k.Index, k.Hash}] = true
		}
	}
	worldTraceMu.Lock()
	defer worldTraceMu.Unlock()
	if _, err := io.WriteString(out, b.String()); err != nil {
		return fmt.Errorf("world trace %s: %w", world, err)
	}
	return nil
}
