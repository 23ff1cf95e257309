package eval

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// RealResult is one real corpus streamed through the pipeline, each
// message to its own recipient, scored against two groupings of its
// messages.
type RealResult struct {
	Name        string  `json:"name"`
	Messages    int     `json:"messages"`
	Tagged      int     `json:"tagged"`
	TaggedShare float64 `json:"tagged_share"`
	// Silver is the corpus's exact-prefix grouping as given: a lower bound
	// on campaign membership, but computed over all text including HTML
	// comments, so a group may hold different mailings of one template.
	Silver *GroupScore `json:"silver"`
	// Refined splits each silver group by the exact prefix of the visible
	// text: messages a reader sees as the same.
	Refined *GroupScore `json:"refined"`
}

// GroupScore scores a stream against groups of its messages.
type GroupScore struct {
	// Groups counts groups with more than T messages; GroupMessages their
	// messages; Counted those after the first T of their group.
	Groups        int                `json:"groups"`
	GroupMessages int                `json:"group_messages"`
	Counted       int                `json:"counted"`
	Recall        map[string]float64 `json:"recall"`
	// TaggedInGroups is the share of all messages of those groups that were
	// tagged, the first T included (Yandex's "share of mass mailings
	// caught").
	TaggedInGroups float64            `json:"tagged_in_groups"`
	Fragmentation  map[string]float64 `json:"fragmentation"`
	// Outside counts messages in no group of two or more, and
	// OutsideTagged those tagged: unlabelled, mixing list mail and spam
	// variants the exact prefix missed.
	Outside       int            `json:"outside_groups"`
	OutsideTagged int            `json:"outside_groups_tagged"`
	Worst         []CampaignMiss `json:"worst_groups,omitempty"`
	// Misses says why counted messages went untagged, as for the generated
	// campaigns, with Unsigned for messages no family signed; Missed lists
	// them (refined grouping only).
	Misses MissCauses   `json:"misses"`
	Missed []MissedCopy `json:"missed,omitempty"`
}

// MissedCopy is one counted message of a group left untagged, and why.
type MissedCopy struct {
	// Group is a short id of the group, Size its messages, Nth the
	// message's place in it (from 1, date order).
	Group string `json:"group"`
	Size  int    `json:"size"`
	Nth   int    `json:"nth"`
	Name  string `json:"name"`
	// Cause is unsigned, own, split or main (MissCauses); Store the store
	// campaign the message went to; Volume the highest family volume.
	Cause    string `json:"cause"`
	Store    uint32 `json:"store"`
	Volume   int64  `json:"volume"`
	Declined string `json:"declined,omitempty"`
	// Pointed says where the message's keys pointed when it came, replayed
	// from the stream (a key points to the store campaign of the last
	// message that had it): per campaign, "main" (the group's) or its id,
	// the keys by family; "new" the keys no message had; "moved≥N" the keys
	// that changed campaign N times or more (each move is one weak event,
	// so the store's WeakCap silenced them at least).
	Pointed string `json:"pointed,omitempty"`
	Subject string `json:"subject"`
}

func runReal(ctx context.Context, cfg *Config, rep *Report) error {
	sets := []func() (*RealSet, error){
		func() (*RealSet, error) { return PhishingPot(cfg.Corpora) },
	}
	// The short run reads the 2007–2008 archive only.
	archives := 2
	if cfg.CI {
		archives = 1
	}
	sets = append(sets, func() (*RealSet, error) { return Cypherpunks(cfg.Corpora, archives) })
	for _, load := range sets {
		t := time.Now()
		set, err := load()
		if err != nil {
			return err
		}
		r, err := scoreReal(ctx, cfg, set)
		if err != nil {
			return err
		}
		cfg.logf("real %-14s %d messages, recall %.3f on %d silver groups, %.3f on %d refined (%s)", r.Name, r.Messages,
			r.Silver.Recall[Combined], r.Silver.Groups, r.Refined.Recall[Combined], r.Refined.Groups, time.Since(t).Round(time.Millisecond))
		rep.Real = append(rep.Real, r)
	}
	return nil
}

// visiblePrefix is the silver method applied to the visible text only:
// the first 60 words of the text parts a reader sees, lower-cased, letters
// only; "" under ten words. The given silver keys read HTML comments and
// hidden text too, which groups different mailings that share a template's
// hidden preamble (seen in Phishing Pot).
func visiblePrefix(parts []string) string {
	var ws []string
	for _, p := range parts {
		for _, w := range words(p) {
			ws = append(ws, w)
			if len(ws) == 60 {
				return strings.Join(ws, " ")
			}
		}
	}
	if len(ws) < 10 {
		return ""
	}
	return strings.Join(ws, " ")
}

// realRec is what the stream keeps of one message.
type realRec struct {
	silver, visible string
	bulk            bool
	tagged          []bool
	keys            []signature.Key
	// store is the campaign the store counted the message in, joined
	// whether a key's evidence named it, volume the highest family
	// volume, declined the declining families and why.
	store    uint32
	joined   bool
	volume   int64
	declined string
}

func scoreReal(ctx context.Context, cfg *Config, set *RealSet) (*RealResult, error) {
	p, err := cfg.NewPipeline()
	if err != nil {
		return nil, err
	}
	defer p.Close()
	fams := cfg.families()
	recs := make([]realRec, 0, len(set.Items))
	tagged := 0
	for i, it := range set.Items {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// One window for the whole corpus: each message stands for one
		// recipient of its campaign, whenever it came.
		// (With the envelope sender of its Return-Path, as the ham and
		// the stream replays: a store tells a publisher's mail by it.)
		v := checkHam(ctx, p, it.Raw, fmt.Sprintf("reader%d@eval.invalid", i), time.Time{})
		if v.Err != nil {
			return nil, fmt.Errorf("%s %s: %w", set.Name, it.Name, v.Err)
		}
		x := realRec{silver: set.Silver[it.Name], bulk: v.Bulk, tagged: make([]bool, len(fams)), keys: v.Analysis.Keys,
			store: v.Campaign.ID, joined: len(v.Campaign.Joined) > 0, volume: v.Volume}
		var dec []string
		for _, ex := range v.Analysis.Explains {
			if ex.Declined != "" {
				dec = append(dec, ex.Family.String()+": "+ex.Declined)
			}
		}
		x.declined = strings.Join(dec, "; ")
		var parts []string
		for _, pt := range v.Analysis.Text.Parts {
			parts = append(parts, pt.Text)
		}
		x.visible = visiblePrefix(parts)
		for j, f := range fams {
			x.tagged[j] = v.Volumes[f] >= int64(cfg.Thresholds[f])
		}
		if v.Bulk {
			tagged++
		}
		recs = append(recs, x)
	}
	r := &RealResult{Name: set.Name, Messages: len(set.Items), Tagged: tagged,
		TaggedShare: float64(tagged) / float64(max(1, len(set.Items)))}
	r.Silver = scoreGroups(cfg, set, recs, false, func(x *realRec) string { return x.silver })
	r.Refined = scoreGroups(cfg, set, recs, true, func(x *realRec) string {
		if x.silver == "" || x.visible == "" {
			return ""
		}
		return x.silver + "|" + x.visible
	})
	return r, nil
}

// scoreGroups scores the stream against one grouping of its messages.
// list asks for the missed messages one by one (GroupScore.Missed).
func scoreGroups(cfg *Config, set *RealSet, recs []realRec, list bool, group func(*realRec) string) *GroupScore {
	fams := cfg.families()
	T := cfg.after()
	size := map[string]int{}
	for i := range recs {
		if g := group(&recs[i]); g != "" {
			size[g]++
		}
	}
	s := &GroupScore{Recall: map[string]float64{}, Fragmentation: map[string]float64{}}
	for _, n := range size {
		if n > T {
			s.Groups++
			s.GroupMessages += n
		}
	}
	type coord struct {
		g   string
		fam signature.Family
		idx uint8
	}
	distinct := map[coord]map[uint64]bool{}
	seen := map[string]int{}
	tagged := make([]int, len(fams)+1)
	inGroupsTagged := 0
	perGroup := map[string][2]int{}
	first := map[string]int{}
	for i := range recs {
		x := &recs[i]
		g := group(x)
		if size[g] < 2 {
			s.Outside++
			if x.bulk {
				s.OutsideTagged++
			}
			continue
		}
		if size[g] <= T {
			continue
		}
		seen[g]++
		if seen[g] == 1 {
			first[g] = i
		}
		if x.bulk {
			inGroupsTagged++
		}
		for _, k := range x.keys {
			co := coord{g, k.Family, k.Index}
			if distinct[co] == nil {
				distinct[co] = map[uint64]bool{}
			}
			distinct[co][k.Hash] = true
		}
		if seen[g] <= T {
			continue
		}
		s.Counted++
		pg := perGroup[g]
		pg[0]++
		for j := range fams {
			if x.tagged[j] {
				tagged[j]++
			}
		}
		if x.bulk {
			tagged[len(fams)]++
			pg[1]++
		}
		perGroup[g] = pg
	}
	for j, f := range fams {
		s.Recall[f.String()] = float64(tagged[j]) / float64(max(1, s.Counted))
	}
	s.Recall[Combined] = float64(tagged[len(fams)]) / float64(max(1, s.Counted))
	s.TaggedInGroups = float64(inGroupsTagged) / float64(max(1, s.GroupMessages))
	for _, f := range fams {
		sums, counts := map[string]float64{}, map[string]int{}
		for co, vals := range distinct {
			if co.fam == f {
				sums[co.g] += float64(len(vals))
				counts[co.g]++
			}
		}
		total := 0.0
		for _, g := range sortedKeys(sums) { // a fixed order: the same sum every run
			total += sums[g] / float64(counts[g])
		}
		if len(sums) > 0 {
			s.Fragmentation[f.String()] = total / float64(len(sums))
		}
	}
	type miss struct {
		g      string
		recall float64
	}
	var misses []miss
	for g, pg := range perGroup {
		if pg[1] < pg[0] {
			misses = append(misses, miss{g, float64(pg[1]) / float64(pg[0])})
		}
	}
	sort.Slice(misses, func(a, b int) bool {
		if misses[a].recall != misses[b].recall {
			return misses[a].recall < misses[b].recall
		}
		return first[misses[a].g] < first[misses[b].g]
	})
	for _, m := range misses[:min(5, len(misses))] {
		it := set.Items[first[m.g]]
		subj := ""
		if mm, err := Load(it.Raw); err == nil {
			subj = trimTo(mm.Subject, 60)
		}
		s.Worst = append(s.Worst, CampaignMiss{Base: fmt.Sprintf("%s (group of %d)", it.Name, size[m.g]), Subject: subj, Recall: m.recall})
	}
	s.Misses, s.Missed = groupMisses(set, recs, T, list, func(x *realRec) string {
		if g := group(x); size[g] > T {
			return g
		}
		return ""
	})
	return s
}

// groupMisses sorts the counted messages left untagged by cause, as
// missCauses does for the generated campaigns: a group's main store
// campaign is the one most of its messages went to. group returns "" for
// messages of no scored group.
func groupMisses(set *RealSet, recs []realRec, T int, list bool, group func(*realRec) string) (MissCauses, []MissedCopy) {
	stores := map[string]map[uint32]int{}
	size := map[string]int{}
	for i := range recs {
		if g := group(&recs[i]); g != "" {
			if stores[g] == nil {
				stores[g] = map[uint32]int{}
			}
			stores[g][recs[i].store]++
			size[g]++
		}
	}
	var m MissCauses
	main := map[string]uint32{}
	for g, st := range stores {
		main[g] = mainCampaign(st)
		m.Stores += float64(len(st))
	}
	if len(stores) > 0 {
		m.Stores /= float64(len(stores))
	}
	var missed []MissedCopy
	var at []int
	var mains []uint32
	nth := map[string]int{}
	for i := range recs {
		x := &recs[i]
		g := group(x)
		if g == "" {
			continue
		}
		nth[g]++
		if nth[g] <= T || x.bulk {
			continue
		}
		var cause string
		switch {
		case len(x.keys) == 0:
			m.Unsigned++
			cause = "unsigned"
		case !x.joined:
			m.Own++
			cause = "own"
		case x.store != main[g]:
			m.Split++
			cause = "split"
		default:
			m.Main++
			cause = "main"
		}
		if !list {
			continue
		}
		it := set.Items[i]
		subj := ""
		if mm, err := Load(it.Raw); err == nil {
			subj = trimTo(mm.Subject, 60)
		}
		missed = append(missed, MissedCopy{Group: fmt.Sprintf("%016x", seedOf(g))[:8], Size: size[g], Nth: nth[g], Name: it.Name,
			Cause: cause, Store: x.store, Volume: x.volume, Declined: x.declined, Subject: subj})
		at = append(at, i)
		mains = append(mains, main[g])
	}
	if len(at) > 0 {
		for j, p := range pointed(recs, at, mains) {
			missed[j].Pointed = p
		}
	}
	return m, missed
}

// pointed replays the store's pointers over the stream (each key points to
// the store campaign of the last message that had it; a move to another
// campaign is one weak event) and describes, for the messages at (in
// stream order; mains their groups' main campaigns), where their keys
// pointed when they came (MissedCopy.Pointed).
func pointed(recs []realRec, at []int, mains []uint32) []string {
	type ptr struct {
		ref   uint32
		moves int
	}
	last := map[signature.Key]ptr{}
	out := make([]string, 0, len(at))
	for i := range recs {
		x := &recs[i]
		if len(out) < len(at) && at[len(out)] == i {
			out = append(out, describePointers(x.keys, func(k signature.Key) (uint32, int, bool) {
				p, ok := last[k]
				return p.ref, p.moves, ok
			}, mains[len(out)]))
		}
		for _, k := range x.keys {
			p, ok := last[k]
			if ok && p.ref != x.store {
				p.moves++
			}
			p.ref = x.store
			last[k] = p
		}
	}
	return out
}

// describePointers says where keys point: per campaign ("main" for main),
// most keys first, the keys by family; then the keys no message had
// ("new") and those silenced by store.WeakCap moves ("capped").
func describePointers(keys []signature.Key, at func(signature.Key) (ref uint32, moves int, ok bool), main uint32) string {
	type count struct {
		ref  uint32
		n    int
		fams map[string]int
	}
	var camps []*count
	byRef := map[uint32]*count{}
	fresh, capped := 0, 0
	for _, k := range keys {
		ref, moves, ok := at(k)
		switch {
		case !ok:
			fresh++
			continue
		case moves >= store.WeakCap:
			capped++
			continue
		}
		c := byRef[ref]
		if c == nil {
			c = &count{ref: ref, fams: map[string]int{}}
			byRef[ref] = c
			camps = append(camps, c)
		}
		c.n++
		c.fams[k.Family.String()]++
	}
	sort.SliceStable(camps, func(a, b int) bool { return camps[a].n > camps[b].n })
	var parts []string
	for _, c := range camps {
		name := fmt.Sprintf("%08x", c.ref)
		if c.ref == main {
			name = "main"
		}
		var fs []string
		for _, f := range sortedKeys(c.fams) {
			fs = append(fs, fmt.Sprintf("%s %d", f, c.fams[f]))
		}
		parts = append(parts, name+": "+strings.Join(fs, ", "))
	}
	parts = append(parts, fmt.Sprintf("new %d", fresh), fmt.Sprintf("capped %d", capped))
	return strings.Join(parts, "; ")
}

// WriteMissed writes the missed messages of the real corpora's refined
// groups as tab-separated lines, a header first: what to open with
// "milterd scan" to see why each missed.
func (rep *Report) WriteMissed(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "corpus\tgroup\tsize\tnth\tcause\tstore\tvolume\tname\tsubject\tdeclined\tpointed")
	for _, r := range rep.Real {
		for _, m := range r.Refined.Missed {
			fmt.Fprintf(bw, "%s\t%s\t%d\t%d\t%s\t%08x\t%d\t%s\t%s\t%s\t%s\n", r.Name, m.Group, m.Size, m.Nth, m.Cause, m.Store, m.Volume, m.Name, m.Subject, m.Declined, m.Pointed)
		}
	}
	return bw.Flush()
}
