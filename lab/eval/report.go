package eval

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/bulkmilter/bulkmilter/signature"
)

// Targets the project builds toward.
const (
	TargetRecall = 0.95
	TargetHamFP  = 0.001
)

// Report is the evaluation's result, written as JSON and Markdown.
type Report struct {
	Seed       uint64         `json:"seed"`
	Mode       string         `json:"mode"`
	Version    string         `json:"signature_version"`
	Thresholds map[string]int `json:"thresholds"`
	After      int            `json:"after"` // T: recall counts the copies after the first T of a campaign
	Seconds    float64        `json:"seconds"`
	Data       DataSummary    `json:"data"`
	HamSharing *HamSharing    `json:"ham_sharing,omitempty"`
	// HamOneWindow is the ham stream alone with every message in one store
	// window: the conservative false-positive figure.
	HamOneWindow *HamWindow      `json:"ham_one_window,omitempty"`
	Attacks      []*AttackResult `json:"attacks,omitempty"`
	Summary      *Summary        `json:"summary,omitempty"`
	Real         []*RealResult   `json:"real,omitempty"`
	Kolcz        []*KolczResult  `json:"kolcz,omitempty"`
	Malkin       *MalkinResult   `json:"malkin,omitempty"`
	Stream       []*StreamResult `json:"stream,omitempty"`
}

// DataSummary says what the run was made of.
type DataSummary struct {
	Ham       int `json:"ham_messages"`
	SpamBases int `json:"spam_bases"`
	HamBases  int `json:"ham_bases"`
	Copies    int `json:"copies_per_campaign"`
	Vocab     int `json:"vocabulary_words"`
	Noise     int `json:"noise_paragraphs"`
}

// HamSharing counts ham messages that share a key with another ham message
// (by family and for any family), whatever the volume.
type HamSharing struct {
	Messages int            `json:"messages"`
	ByFamily map[string]int `json:"by_family"`
	Any      int            `json:"any"`
}

// HamWindow is the ham stream replayed in one store window.
type HamWindow struct {
	Messages int `json:"messages"`
	// Personal counts messages without mailing-list or newsletter headers
	// (List-Id, List-Unsubscribe, Precedence: list/bulk, …).
	Personal         int            `json:"personal"`
	Tagged           int            `json:"tagged"`
	TaggedList       int            `json:"tagged_list"`
	ByFamily         map[string]int `json:"tagged_by_family"`
	PersonalExamples []string       `json:"personal_tagged,omitempty"`
	Examples         []string       `json:"tagged_examples,omitempty"` // the first 50`
}

// AttackResult is one attack's world: its campaigns among the ham stream.
type AttackResult struct {
	Name      string `json:"name"`
	Class     string `json:"class"`
	Doc       string `json:"doc"`
	Campaigns int    `json:"campaigns"`
	Copies    int    `json:"copies"`
	Counted   int    `json:"counted"` // copies after the first T of their campaign
	// Recall is the share of counted copies tagged, per family (its volume
	// reached its threshold) and for the combined verdict.
	Recall     map[string]float64 `json:"recall"`
	RecallSpam map[string]float64 `json:"recall_spam_campaigns"`
	RecallHam  map[string]float64 `json:"recall_ham_campaigns"`
	// Signed is the share of copies a family produced keys for.
	Signed map[string]float64 `json:"signed"`
	// Fragmentation is the mean number of distinct values per key
	// coordinate over a campaign's copies (1 = every copy had the same
	// keys).
	Fragmentation      map[string]float64 `json:"fragmentation"`
	HardeningReduction *Reduction         `json:"hardening_reduction,omitempty"`
	Ham                int                `json:"ham"`
	HamTagged          int                `json:"ham_tagged"`
	HamTaggedList      int                `json:"ham_tagged_list"` // of those, list mail and newsletters
	HamFP              float64            `json:"ham_fp"`
	HamFPPersonal      float64            `json:"ham_fp_personal"` // tagged personal ham over personal ham
	HamTaggedBy        map[string]int     `json:"ham_tagged_by_family"`
	// RecallAll is the share of all copies tagged at delivery, the first
	// T of each campaign included; RecallAllRefiled adds the copies
	// refiling moved to Bulk once their campaign crossed (issue 17), and
	// HamRefiled counts ham messages it moved.
	RecallAll        float64        `json:"recall_all"`
	RecallAllRefiled float64        `json:"recall_all_refiled"`
	HamRefiled       int            `json:"ham_refiled"`
	Worst            []CampaignMiss `json:"worst_campaigns,omitempty"`
	// Misses says why counted copies went untagged (campaign counting).
	Misses         MissCauses `json:"misses"`
	hamTaggedNames []string
}

// MissCauses sorts the counted copies left untagged by what the store did
// with them: started a campaign of their own (no key's evidence named one),
// joined a campaign other than the one most of their campaign's copies
// joined (the campaign split), or joined that one while it was still under
// the threshold (it had split before). Stores is the mean number of store
// campaigns a generated campaign's copies went to (1 = one campaign).
type MissCauses struct {
	// Unsigned counts copies no family signed (real corpora only: every
	// generated base is long enough to sign).
	Unsigned int     `json:"unsigned,omitempty"`
	Own      int     `json:"own"`
	Split    int     `json:"split"`
	Main     int     `json:"main"`
	Stores   float64 `json:"stores_per_campaign"`
}

// Reduction is Kolcz & Chowdhury's fragmentation reduction rate: distinct
// plain primary I-Match signatures per campaign over distinct hardened
// ones.
type Reduction struct {
	Median    float64 `json:"median"`
	Max       float64 `json:"max"`
	Campaigns int     `json:"campaigns"`
}

// CampaignMiss names a campaign with copies left untagged.
type CampaignMiss struct {
	Base    string  `json:"base"`
	Subject string  `json:"subject"`
	Recall  float64 `json:"recall"`
}

// Summary aggregates the attack worlds.
type Summary struct {
	MeanRecall      map[string]float64 `json:"mean_recall"`
	MinRecall       float64            `json:"min_recall"`
	MinRecallAttack string             `json:"min_recall_attack"`
	HamFPMax        float64            `json:"ham_fp_max"`
	HamTaggedMax    int                `json:"ham_tagged_max"`
	// HamFPPersonalMax is the largest share of personal ham (no list or
	// newsletter headers) tagged in a world.
	HamFPPersonalMax float64 `json:"ham_fp_personal_max"`
	// HamTaggedAny counts ham messages tagged in at least one world.
	HamTaggedAny int      `json:"ham_tagged_any"`
	HamFPAny     float64  `json:"ham_fp_any"`
	HamExamples  []string `json:"ham_tagged_examples,omitempty"`
	BelowTarget  []string `json:"attacks_below_target_recall,omitempty"`
	TargetRecall float64  `json:"target_recall"`
	TargetHamFP  float64  `json:"target_ham_fp"`
	TargetMet    bool     `json:"target_met"`
}

func (rep *Report) summarise(cfg *Config) {
	s := &Summary{MeanRecall: map[string]float64{}, MinRecall: 2, TargetRecall: TargetRecall, TargetHamFP: TargetHamFP}
	any := map[string]bool{}
	keys := append(familyNames(cfg), Combined)
	for _, a := range rep.Attacks {
		for _, k := range keys {
			s.MeanRecall[k] += a.Recall[k] / float64(len(rep.Attacks))
		}
		if r := a.Recall[Combined]; r < s.MinRecall {
			s.MinRecall, s.MinRecallAttack = r, a.Name
		}
		if r := a.Recall[Combined]; r < TargetRecall {
			s.BelowTarget = append(s.BelowTarget, a.Name)
		}
		if a.HamTagged > s.HamTaggedMax {
			s.HamTaggedMax, s.HamFPMax = a.HamTagged, a.HamFP
		}
		s.HamFPPersonalMax = max(s.HamFPPersonalMax, a.HamFPPersonal)
		for _, n := range a.hamTaggedNames {
			any[n] = true
		}
	}
	s.HamTaggedAny = len(any)
	if rep.Data.Ham > 0 {
		s.HamFPAny = float64(len(any)) / float64(rep.Data.Ham)
	}
	for n := range any {
		s.HamExamples = append(s.HamExamples, n)
	}
	sort.Strings(s.HamExamples)
	s.HamExamples = s.HamExamples[:min(len(s.HamExamples), 30)]
	s.TargetMet = s.MinRecall >= TargetRecall && s.HamFPMax <= TargetHamFP
	rep.Summary = s
}

func familyNames(cfg *Config) []string {
	var out []string
	for _, f := range cfg.families() {
		out = append(out, f.String())
	}
	return out
}

// families returns the family names present in the report, in order.
func (rep *Report) families() []string {
	var out []string
	for _, f := range signature.Families() {
		if _, ok := rep.Thresholds[f.String()]; ok {
			out = append(out, f.String())
		}
	}
	return out
}

func pct(x float64) string { return fmt.Sprintf("%.1f %%", 100*x) }

// Markdown writes the report's tables.
func (rep *Report) Markdown(w io.Writer) {
	fams := rep.families()
	fmt.Fprintf(w, "Mode %s, seed %d, signature version %s, thresholds %v; recall counts copies after the first %d of each campaign. %.0f s.\n\n",
		rep.Mode, rep.Seed, rep.Version, rep.Thresholds, rep.After, rep.Seconds)
	if len(rep.Attacks) > 0 {
		d := rep.Data
		fmt.Fprintf(w, "### Generated campaigns\n\n%d spam and %d ham base messages × %d copies, each copy to its own recipient; each campaign sent within %s at a random moment of the ham stream's period (%d messages at their own dates); one world (fresh store) per attack.\n\n",
			d.SpamBases, d.HamBases, d.Copies, burst, d.Ham)
		fmt.Fprintf(w, "| attack | class | %s | **combined** | ham tagged (of which list/newsletter) |\n|---|---|%s---|---|\n",
			strings.Join(fams, " | "), strings.Repeat("---|", len(fams)))
		for _, a := range rep.Attacks {
			row := []string{}
			for _, f := range fams {
				row = append(row, fmt.Sprintf("%.3f", a.Recall[f]))
			}
			fmt.Fprintf(w, "| %s | %s | %s | **%.3f** | %d (%d) |\n", a.Name, a.Class, strings.Join(row, " | "), a.Recall[Combined], a.HamTagged, a.HamTaggedList)
		}
		if s := rep.Summary; s != nil {
			row := []string{}
			for _, f := range fams {
				row = append(row, fmt.Sprintf("%.3f", s.MeanRecall[f]))
			}
			fmt.Fprintf(w, "| **mean** | | %s | **%.3f** | max %d (%s) |\n\n", strings.Join(row, " | "), s.MeanRecall[Combined], s.HamTaggedMax, pct(s.HamFPMax))
			fmt.Fprintf(w, "Lowest combined recall: %.3f (%s). Ham tagged in at least one world: %d of %d (%s); most in one world %s, of personal (non-list) ham %s. Target (recall ≥ %.2f under every attack, ham FP ≤ %s): %s.\n\n",
				s.MinRecall, s.MinRecallAttack, s.HamTaggedAny, rep.Data.Ham, pct(s.HamFPAny), pct(s.HamFPMax), pct(s.HamFPPersonalMax), s.TargetRecall, pct(s.TargetHamFP), met(s.TargetMet))
		}
		fmt.Fprintf(w, "Recall over all copies of a campaign, the first %d included: tagged at delivery, and with refiling (docs/refile.md: once a campaign crosses its threshold, the copies delivered before it move to Bulk; the daemon's refiler with a mailbox in memory):\n\n| attack | tagged at delivery | with refiling | ham refiled |\n|---|---|---|---|\n", rep.After)
		var sumAll, sumRefiled float64
		for _, a := range rep.Attacks {
			fmt.Fprintf(w, "| %s | %.3f | **%.3f** | %d |\n", a.Name, a.RecallAll, a.RecallAllRefiled, a.HamRefiled)
			sumAll += a.RecallAll
			sumRefiled += a.RecallAllRefiled
		}
		n := float64(len(rep.Attacks))
		fmt.Fprintf(w, "| **mean** | %.3f | **%.3f** | |\n\n", sumAll/n, sumRefiled/n)
		fmt.Fprintf(w, "Signed share and fragmentation (distinct values per key coordinate per campaign; 1 = stable):\n\n| attack | %s | I-Match hardening reduction (median / max) |\n|---|%s---|\n",
			strings.Join(fams, " | "), strings.Repeat("---|", len(fams)))
		for _, a := range rep.Attacks {
			row := []string{}
			for _, f := range fams {
				row = append(row, fmt.Sprintf("%.2f / %.1f", a.Signed[f], a.Fragmentation[f]))
			}
			red := "–"
			if a.HardeningReduction != nil {
				red = fmt.Sprintf("%.2f / %.1f", a.HardeningReduction.Median, a.HardeningReduction.Max)
			}
			fmt.Fprintf(w, "| %s | %s | %s |\n", a.Name, strings.Join(row, " | "), red)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "Why counted copies went untagged (started their own campaign / joined another split-off campaign / joined their campaign's main one while it was under the threshold) and store campaigns per generated campaign:\n\n| attack | own | split | main | store campaigns |\n|---|---|---|---|---|\n")
		for _, a := range rep.Attacks {
			if m := a.Misses; m.Own+m.Split+m.Main > 0 || m.Stores > 1 {
				fmt.Fprintf(w, "| %s | %d | %d | %d | %.1f |\n", a.Name, m.Own, m.Split, m.Main, m.Stores)
			}
		}
		fmt.Fprintln(w)
	}
	if h := rep.HamOneWindow; h != nil {
		fmt.Fprintf(w, "Ham alone in one store window (conservative: a daily newsletter's issues add up as if sent on one day): %d of %d tagged (%s), %d of them list mail or newsletters; personal ham: %d of %d (%s). By deciding family: %v.\n\n",
			h.Tagged, h.Messages, pct(float64(h.Tagged)/float64(max(1, h.Messages))), h.TaggedList,
			h.Tagged-h.TaggedList, h.Personal, pct(float64(h.Tagged-h.TaggedList)/float64(max(1, h.Personal))), h.ByFamily)
	}
	if h := rep.HamSharing; h != nil {
		row := []string{}
		for _, f := range fams {
			row = append(row, fmt.Sprintf("%s %d", f, h.ByFamily[f]))
		}
		fmt.Fprintf(w, "Ham messages sharing a key with another ham message (any volume): %d of %d (%s); by family: %s.\n\n",
			h.Any, h.Messages, pct(float64(h.Any)/float64(max(1, h.Messages))), strings.Join(row, ", "))
	}
	if len(rep.Real) > 0 {
		fmt.Fprintf(w, "### Real campaigns\n\nEach message to its own recipient, in date order. Groups: *silver* exact-prefix groups as given; *refined*: silver groups split by the exact prefix of the visible text.\n\n")
		fmt.Fprintf(w, "| corpus | grouping | groups > T | their messages | %s | **combined** | group messages tagged (incl. first T) | tagged outside groups |\n|---|---|---|---|%s---|---|---|\n",
			strings.Join(fams, " | "), strings.Repeat("---|", len(fams)))
		for _, r := range rep.Real {
			for _, g := range []struct {
				name string
				s    *GroupScore
			}{{"silver", r.Silver}, {"refined", r.Refined}} {
				row := []string{}
				for _, f := range fams {
					row = append(row, fmt.Sprintf("%.3f", g.s.Recall[f]))
				}
				fmt.Fprintf(w, "| %s | %s | %d | %d | %s | **%.3f** | %s | %d of %d |\n", r.Name, g.name,
					g.s.Groups, g.s.GroupMessages, strings.Join(row, " | "), g.s.Recall[Combined], pct(g.s.TaggedInGroups), g.s.OutsideTagged, g.s.Outside)
			}
		}
		fmt.Fprintf(w, "\nWhy counted messages went untagged (no family signed / started their own campaign / joined another split-off campaign / joined their group's main one while it was under the threshold) and store campaigns per group:\n\n| corpus | grouping | unsigned | own | split | main | store campaigns |\n|---|---|---|---|---|---|---|\n")
		for _, r := range rep.Real {
			for _, g := range []struct {
				name string
				s    *GroupScore
			}{{"silver", r.Silver}, {"refined", r.Refined}} {
				m := g.s.Misses
				fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %.1f |\n", r.Name, g.name, m.Unsigned, m.Own, m.Split, m.Main, m.Stores)
			}
		}
		fmt.Fprintf(w, "\nTagged overall: ")
		for i, r := range rep.Real {
			if i > 0 {
				fmt.Fprint(w, "; ")
			}
			fmt.Fprintf(w, "%s %d of %d (%s)", r.Name, r.Tagged, r.Messages, pct(r.TaggedShare))
		}
		fmt.Fprint(w, ".\n\n")
	}
	streamMarkdown(w, rep.Stream)
	for _, k := range rep.Kolcz {
		fmt.Fprintf(w, "### Kolcz protocol: %s\n\n%d documents (≥ 5 unique terms, trivial duplicates removed), %d queries (10 %%), %d with cosine ≥ 0.9 neighbours; %d legitimate documents.\n\n",
			k.Dataset, k.Docs, k.Queries, k.WithNeighbours, k.Legit)
		fmt.Fprintf(w, "| lexicons | hardening | recall | rel. increase | precision | legit docs matched |\n|---|---|---|---|---|---|\n")
		for _, r := range k.Rows {
			fmt.Fprintf(w, "| 1 + %d | %s | %.3f | %+.0f %% | %.3f | %d |\n", r.K, r.Hardening, r.Recall, 100*r.RelIncrease, r.Precision, r.LegitMatched)
		}
		fmt.Fprintln(w)
	}
	if m := rep.Malkin; m != nil {
		fmt.Fprintf(w, "### Malkin protocol on mail\n\n%d %s, mean S1/S3 between original and attacked copy (pure hashing, mod %d); paper's Table 2 in parentheses.\n\n| attack | %s |\n|---|%s\n",
			m.Docs, m.Source, m.Modulus, strings.Join(m.Systems, " | "), strings.Repeat("---|", len(m.Systems)))
		for _, r := range m.Rows {
			cells := []string{}
			for i := range m.Systems {
				cells = append(cells, fmt.Sprintf("%.3f/%.3f (%.3f/%.3f)", r.S1[i], r.S3[i], r.Paper[i][0], r.Paper[i][1]))
			}
			fmt.Fprintf(w, "| %s | %s |\n", r.Attack, strings.Join(cells, " | "))
		}
		fmt.Fprintln(w)
	}
}

func met(b bool) string {
	if b {
		return "met"
	}
	return "not met"
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
