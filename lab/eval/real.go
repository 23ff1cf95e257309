package eval

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/bulkmilter/bulkmilter/signature"
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
		v := p.Check(ctx, it.Raw, []string{fmt.Sprintf("reader%d@eval.invalid", i)}, time.Time{})
		if v.Err != nil {
			return nil, fmt.Errorf("%s %s: %w", set.Name, it.Name, v.Err)
		}
		x := realRec{silver: set.Silver[it.Name], bulk: v.Bulk, tagged: make([]bool, len(fams)), keys: v.Analysis.Keys}
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
	r.Silver = scoreGroups(cfg, set, recs, func(x *realRec) string { return x.silver })
	r.Refined = scoreGroups(cfg, set, recs, func(x *realRec) string {
		if x.silver == "" || x.visible == "" {
			return ""
		}
		return x.silver + "|" + x.visible
	})
	return r, nil
}

// scoreGroups scores the stream against one grouping of its messages.
func scoreGroups(cfg *Config, set *RealSet, recs []realRec, group func(*realRec) string) *GroupScore {
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
	return s
}
