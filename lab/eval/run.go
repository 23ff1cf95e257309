package eval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/mail"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/refile"
	"github.com/bulkmilter/bulkmilter/signature"
)

// Pipeline is the detection pipeline as the daemon runs it, fed with raw
// messages the way the milter receives them.
type Pipeline interface {
	// Check runs the whole pipeline: analysis, store, policy, for a
	// message arriving at at (zero: now, one window for everything).
	Check(ctx context.Context, raw []byte, recipients []string, at time.Time) detect.Verdict
	// Analyze runs the pure part: extraction, canonicalisation, signing.
	Analyze(raw []byte, recipients []string) *detect.Analysis
	Close() error
}

// Sections of the evaluation.
const (
	SectionCampaigns = "campaigns"
	SectionReal      = "real"
	SectionKolcz     = "kolcz"
	SectionMalkin    = "malkin"
)

// Config chooses what the evaluation runs on.
type Config struct {
	// Corpora is the shared corpora directory.
	Corpora string
	Seed    uint64
	// CI selects the short run.
	CI bool
	// SpamBases and HamBases are the numbers of base messages campaigns
	// are made from; Copies is the number of copies per campaign, each to
	// its own recipient.
	SpamBases, HamBases, Copies int
	// Attacks limits the attacks by name (empty: all).
	Attacks []string
	// Sections limits the sections (empty: all).
	Sections []string
	// StreamLimit replays only the first messages of the real stream (0:
	// all).
	StreamLimit int
	// StreamTrace, when set, receives one tab-separated line per message
	// of each stream replay (streamTraceHeader): what tracing a change
	// message by message needs (docs/evaluation.md, "Real stream").
	StreamTrace io.Writer
	// WorldTrace, when set, receives the generated worlds' tagged ham and
	// missed copies, one tab-separated line each (WorldTraceHeader).
	WorldTrace io.Writer
	// Workers run attack worlds in parallel (0: GOMAXPROCS).
	Workers int
	// NewPipeline returns a pipeline with a fresh, empty store. Every
	// attack is evaluated in a world of its own so that campaigns built
	// from one base under different attacks never add up.
	NewPipeline func() (Pipeline, error)
	// NewStreamPipeline returns the real stream's pipeline: the site's own
	// configuration, its relays (StreamRelays) included. Nil: NewPipeline.
	NewStreamPipeline func() (Pipeline, error)
	// Window is the store's window (the stream's campaign groups count
	// recipients within it; 0: 24 hours).
	Window time.Duration
	// Thresholds holds each enabled family's threshold.
	Thresholds map[signature.Family]int
	// Secret, Lexicon and Params are the daemon's, for the papers'
	// protocols, which sign with variants of the configured families.
	Secret  signature.Secret
	Lexicon *signature.Lexicon
	Params  signature.SetParams
	// Version is the signature set's version, for the report.
	Version string
	// Log receives progress; nil for none.
	Log io.Writer
}

func (c *Config) section(s string) bool {
	return len(c.Sections) == 0 || slices.Contains(c.Sections, s)
}

func (c *Config) logf(format string, a ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", a...)
	}
}

// families returns the enabled families in order.
func (c *Config) families() []signature.Family {
	var out []signature.Family
	for _, f := range signature.Families() {
		if _, ok := c.Thresholds[f]; ok {
			out = append(out, f)
		}
	}
	return out
}

// after is T of "recall after the first T copies": the largest family
// threshold, so that every family could have tagged every counted copy.
func (c *Config) after() int {
	t := 0
	for _, v := range c.Thresholds {
		t = max(t, v)
	}
	return t
}

// Combined names the verdict of all families together in reports.
const Combined = "combined"

// Run runs the evaluation.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.NewPipeline == nil || len(cfg.Thresholds) == 0 {
		return nil, errors.New("eval: no pipeline")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	rep := &Report{
		Seed: cfg.Seed, Mode: "full", Version: cfg.Version, After: cfg.after(),
		Thresholds: map[string]int{},
	}
	if cfg.CI {
		rep.Mode = "ci"
	}
	for f, t := range cfg.Thresholds {
		rep.Thresholds[f.String()] = t
	}

	var ham []Item
	var res *Resources
	if cfg.section(SectionCampaigns) || cfg.section(SectionKolcz) || cfg.section(SectionMalkin) {
		var err error
		if ham, err = HamStream(cfg.Corpora); err != nil {
			return nil, err
		}
		rep.Data.Ham = len(ham)
		cfg.logf("ham stream: %d messages (%s)", len(ham), time.Since(start).Round(time.Millisecond))
	}
	if cfg.section(SectionCampaigns) || cfg.section(SectionMalkin) {
		var err error
		if res, err = LoadResources(cfg.Corpora, 20000); err != nil {
			return nil, err
		}
		rep.Data.Vocab, rep.Data.Noise = len(res.Vocab), len(res.Noise)
	}
	if cfg.section(SectionCampaigns) {
		var err error
		if rep.HamSharing, err = hamSharing(&cfg, ham); err != nil {
			return nil, err
		}
		hs := newHamStream(ham)
		if rep.HamOneWindow, err = hamOneWindow(ctx, &cfg, hs); err != nil {
			return nil, err
		}
		if err := runCampaigns(ctx, &cfg, hs, res, rep); err != nil {
			return nil, err
		}
	}
	if cfg.section(SectionReal) {
		if err := runReal(ctx, &cfg, rep); err != nil {
			return nil, err
		}
	}
	if cfg.section(SectionStream) {
		if err := runStream(ctx, &cfg, rep); err != nil {
			return nil, err
		}
	}
	if cfg.section(SectionKolcz) {
		if err := runKolcz(&cfg, ham, rep); err != nil {
			return nil, err
		}
	}
	if cfg.section(SectionMalkin) {
		if err := runMalkin(&cfg, ham, res, rep); err != nil {
			return nil, err
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// hamSharing counts the ham messages that share a key with another ham
// message, whatever the volume: chance collisions, mailing-list footers,
// newsletter issues and quoted replies.
func hamSharing(cfg *Config, ham []Item) (*HamSharing, error) {
	p, err := cfg.NewPipeline()
	if err != nil {
		return nil, err
	}
	defer p.Close()
	byKey := map[signature.Key][]int{}
	for i, it := range ham {
		for _, k := range p.Analyze(it.Raw, []string{hamRecipient(i)}).Keys {
			if l := byKey[k]; len(l) == 0 || l[len(l)-1] != i {
				byKey[k] = append(l, i)
			}
		}
	}
	h := &HamSharing{Messages: len(ham), ByFamily: map[string]int{}}
	any := map[int]bool{}
	by := map[signature.Family]map[int]bool{}
	for k, l := range byKey {
		if len(l) < 2 {
			continue
		}
		if by[k.Family] == nil {
			by[k.Family] = map[int]bool{}
		}
		for _, i := range l {
			by[k.Family][i] = true
			any[i] = true
		}
	}
	for f, m := range by {
		h.ByFamily[f.String()] = len(m)
	}
	h.Any = len(any)
	return h, nil
}

// hamOneWindow streams the ham alone, every message in one window of the
// store (time zero): the conservative figure, in which issues of a daily
// newsletter or posts of a mailing list add up as if sent on one day.
func hamOneWindow(ctx context.Context, cfg *Config, hs *hamStream) (*HamWindow, error) {
	p, err := cfg.NewPipeline()
	if err != nil {
		return nil, err
	}
	defer p.Close()
	w := &HamWindow{Messages: len(hs.items), Personal: hs.personal, ByFamily: map[string]int{}}
	tr := newWorldTracer(cfg)
	defer func() {
		if err := tr.write(cfg.WorldTrace, "one-window", cfg.after(), nil); err != nil {
			cfg.logf("%v", err)
		}
	}()
	for i, it := range hs.items {
		v := checkHam(ctx, p, it.Raw, hamRecipient(i), time.Time{})
		if v.Err != nil {
			return nil, fmt.Errorf("ham %s: %w", it.Name, v.Err)
		}
		tr.add(traced{label: it.Name, ham: true, list: hs.list[i], campaign: -1}, v)
		if !v.Bulk {
			continue
		}
		w.Tagged++
		what := it.Name + " " + trimTo(v.Analysis.Text.Subject, 50)
		if hs.list[i] {
			w.TaggedList++
		} else {
			w.PersonalExamples = append(w.PersonalExamples, what)
		}
		if len(w.Examples) < 50 {
			w.Examples = append(w.Examples, what)
		}
		w.ByFamily[v.Family.String()]++
	}
	return w, nil
}

// isListMail reports a message sent through a mailing list or as a
// newsletter, by its header: legitimate bulk.
func isListMail(raw []byte) bool {
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return false
	}
	for _, k := range []string{"List-Id", "List-Unsubscribe", "List-Post", "Mailing-List", "X-Mailing-List", "X-BeenThere", "List-Subscribe"} {
		if m.Header.Get(k) != "" {
			return true
		}
	}
	switch strings.ToLower(strings.TrimSpace(m.Header.Get("Precedence"))) {
	case "list", "bulk", "junk":
		return true
	}
	return false
}

// hamStream is the ham with what every world needs of it.
type hamStream struct {
	items    []Item
	times    []time.Time // arrival times (hamTimes)
	list     []bool      // list mail or newsletter (isListMail)
	personal int         // messages that are not
}

func newHamStream(items []Item) *hamStream {
	h := &hamStream{items: items, times: hamTimes(items), list: make([]bool, len(items))}
	for i, it := range items {
		h.list[i] = isListMail(it.Raw)
		if !h.list[i] {
			h.personal++
		}
	}
	return h
}

// base is a message campaigns are made from.
type base struct {
	Item
	mail *Mail
	ham  bool
}

// selectBases loads candidates, keeps those with at least minWords
// canonical words, drops any that shares a key with one already chosen (so
// that no two campaigns are one campaign), and returns n of them in a
// seeded random order.
func selectBases(p Pipeline, items []Item, n int, ham bool, rng *rand.Rand) []*base {
	const minWords = 40
	order := rng.Perm(len(items))
	seen := map[signature.Key]bool{}
	var out []*base
	for _, i := range order {
		if len(out) == n {
			break
		}
		it := items[i]
		if len(it.Raw) > 100<<10 {
			continue
		}
		m, err := Load(it.Raw)
		if err != nil {
			continue
		}
		// The base as a copy would render it, so that it is judged as the
		// campaign is.
		raw := NewCopy(m, Person{}, rng, nil).Apply()
		a := p.Analyze(raw, nil)
		if len(a.Doc.Tokens) < minWords {
			continue
		}
		dup := false
		for _, k := range a.Keys {
			if seen[k] {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		for _, k := range a.Keys {
			seen[k] = true
		}
		out = append(out, &base{Item: it, mail: m, ham: ham})
	}
	return out
}

func seedOf(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

func runCampaigns(ctx context.Context, cfg *Config, hs *hamStream, res *Resources, rep *Report) error {
	start := time.Now()
	spamItems, err := SpamBases(cfg.Corpora)
	if err != nil {
		return err
	}
	hamItems, err := HamBases(cfg.Corpora)
	if err != nil {
		return err
	}
	p, err := cfg.NewPipeline()
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, seedOf("bases")))
	bases := selectBases(p, spamItems, cfg.SpamBases, false, rng)
	bases = append(bases, selectBases(p, hamItems, cfg.HamBases, true, rng)...)
	p.Close()
	rep.Data.SpamBases, rep.Data.HamBases, rep.Data.Copies = 0, 0, cfg.Copies
	for _, b := range bases {
		if b.ham {
			rep.Data.HamBases++
		} else {
			rep.Data.SpamBases++
		}
	}
	cfg.logf("campaign bases: %d spam, %d ham (%s)", rep.Data.SpamBases, rep.Data.HamBases, time.Since(start).Round(time.Millisecond))

	var attacks []*Attack
	for _, a := range Attacks() {
		if len(cfg.Attacks) == 0 || slices.Contains(cfg.Attacks, a.Name) {
			attacks = append(attacks, a)
		}
	}
	if len(attacks) == 0 {
		return fmt.Errorf("no attack matches %q", cfg.Attacks)
	}
	results := make([]*AttackResult, len(attacks))
	errs := make([]error, len(attacks))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(cfg.Workers, len(attacks)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t := time.Now()
				results[i], errs[i] = runWorld(ctx, cfg, attacks[i], hs, bases, res)
				if errs[i] == nil {
					cfg.logf("attack %-28s recall %.3f  ham tagged %d  (%s)", attacks[i].Name,
						results[i].Recall[Combined], results[i].HamTagged, time.Since(t).Round(time.Millisecond))
				}
			}
		}()
	}
	for i := range attacks {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	rep.Attacks = results
	rep.summarise(cfg)
	return nil
}

// entry is one message of a world's stream: a ham message or the next copy
// of a campaign.
type entry struct {
	ham      int // index into the ham stream, or -1
	campaign int
	at       time.Time
	tie      float64
}

// copyRecord is what a world keeps of one campaign copy.
type copyRecord struct {
	campaign, k int
	bulk        bool
	delivered   refile.Copy // the copy as refiling knows it
	refiled     bool        // moved to Bulk once its campaign crossed
	tagged      []bool      // per family, in cfg.families() order
	signed      []bool
	keys        []signature.Key
	store       uint32 // the store campaign it was counted in
	joined      bool   // it joined a campaign rather than starting one
}

// hamRecipient is the synthesised recipient of the i-th ham message.
func hamRecipient(i int) string { return fmt.Sprintf("rcpt%d@eval.invalid", i) }

// checkHam checks a ham message (or a real corpus's) as its MTA handed it over: the envelope
// sender from its Return-Path, as the stream replay takes it (a store
// tells one sender's mail by it), and the replay's own recipient. A
// pipeline that cannot take a message in (no StreamPipeline) checks it
// without a sender.
func checkHam(ctx context.Context, p Pipeline, raw []byte, rcpt string, at time.Time) detect.Verdict {
	sp, ok := p.(StreamPipeline)
	if !ok {
		return p.Check(ctx, raw, []string{rcpt}, at)
	}
	msg := sp.Message(raw, []string{rcpt}, at)
	msg.SetFromHeader(detect.FromHeader{Sender: true})
	return sp.Engine().Check(ctx, msg)
}

// burst is how long a campaign takes to send all its copies.
const burst = 6 * time.Hour

// hamTimes returns each ham message's arrival time: its Date header,
// clamped to the 1st–99th percentile of the stream's dates (a few are
// years off); an undated message takes the previous one's.
func hamTimes(ham []Item) []time.Time {
	out := make([]time.Time, len(ham))
	var sorted []time.Time
	for i, it := range ham {
		if m, err := mail.ReadMessage(bytes.NewReader(it.Raw)); err == nil {
			if d, err := mail.ParseDate(m.Header.Get("Date")); err == nil {
				out[i] = d.UTC()
				sorted = append(sorted, out[i])
			}
		}
	}
	if len(sorted) == 0 {
		return out
	}
	slices.SortFunc(sorted, func(a, b time.Time) int { return a.Compare(b) })
	lo, hi := sorted[len(sorted)/100], sorted[len(sorted)-1-len(sorted)/100]
	prev := lo
	for i, t := range out {
		switch {
		case t.IsZero():
			t = prev
		case t.Before(lo):
			t = lo
		case t.After(hi):
			t = hi
		}
		out[i], prev = t, t
	}
	return out
}

func runWorld(ctx context.Context, cfg *Config, atk *Attack, hs *hamStream, bases []*base, res *Resources) (*AttackResult, error) {
	ham, times := hs.items, hs.times
	p, err := cfg.NewPipeline()
	if err != nil {
		return nil, err
	}
	defer p.Close()
	fams := cfg.families()
	// Ham arrives at its own dates; each campaign sends its copies within
	// a burst starting at a random moment of the ham's period, so that the
	// store's window applies as in the daemon.
	rng := rand.New(rand.NewPCG(cfg.Seed, seedOf("schedule", atk.Name)))
	entries := make([]entry, 0, len(ham)+len(bases)*cfg.Copies)
	t0, t1 := slices.MinFunc(times, time.Time.Compare), slices.MaxFunc(times, time.Time.Compare)
	for i := range ham {
		entries = append(entries, entry{ham: i, at: times[i], tie: rng.Float64()})
	}
	for c := range bases {
		start := t0.Add(time.Duration(rng.Float64() * float64(t1.Sub(t0))))
		for range cfg.Copies {
			at := start.Add(time.Duration(rng.Float64() * float64(burst)))
			entries = append(entries, entry{ham: -1, campaign: c, at: at, tie: rng.Float64()})
		}
	}
	sort.SliceStable(entries, func(i, j int) bool {
		if c := entries[i].at.Compare(entries[j].at); c != 0 {
			return c < 0
		}
		return entries[i].tie < entries[j].tie
	})

	r := &AttackResult{Name: atk.Name, Class: atk.Class, Doc: atk.Doc, Campaigns: len(bases)}
	r.HamTaggedBy = map[string]int{}
	sim, err := newRefileSim()
	if err != nil {
		return nil, err
	}
	var hamCopies []refile.Copy
	tr := newWorldTracer(cfg)
	seen := make([]int, len(bases))
	var copies []copyRecord
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if e.ham >= 0 {
			v := checkHam(ctx, p, ham[e.ham].Raw, hamRecipient(e.ham), e.at)
			if v.Err != nil {
				sim.r.Close()
				return nil, fmt.Errorf("%s: ham %s: %w", atk.Name, ham[e.ham].Name, v.Err)
			}
			hamCopies = append(hamCopies, sim.deliver(v, hamRecipient(e.ham), fmt.Sprintf("<ham-%d@eval.invalid>", e.ham), e.at))
			tr.add(traced{label: ham[e.ham].Name, ham: true, list: hs.list[e.ham], campaign: -1}, v)
			if v.Bulk {
				r.HamTagged++
				if hs.list[e.ham] {
					r.HamTaggedList++
				}
				r.hamTaggedNames = append(r.hamTaggedNames, ham[e.ham].Name)
			}
			for _, f := range fams {
				if v.Volumes[f] >= int64(cfg.Thresholds[f]) {
					r.HamTaggedBy[f.String()]++
				}
			}
			continue
		}
		b := bases[e.campaign]
		seen[e.campaign]++
		k := seen[e.campaign]
		crng := rand.New(rand.NewPCG(cfg.Seed^seedOf("copy", atk.Name), uint64(e.campaign)<<24|uint64(k)))
		to := person(e.campaign*cfg.Copies+k, crng)
		c := NewCopy(b.mail, to, crng, res)
		c.Campaign = seedOf("campaign", b.Name)
		c.MsgID = fmt.Sprintf("%s.%d.%d@campaign.example", atk.Name, e.campaign, k)
		c.Boundary = "=_" + randString(crng, alnum, 24)
		raw := c.Apply(atk)
		v := p.Check(ctx, raw, []string{to.Address}, e.at)
		if v.Err != nil {
			sim.r.Close()
			return nil, fmt.Errorf("%s: copy %d of %s: %w", atk.Name, k, b.Name, v.Err)
		}
		rec := copyRecord{campaign: e.campaign, k: k, bulk: v.Bulk, delivered: sim.deliver(v, to.Address, "<"+c.MsgID+">", e.at),
			tagged: make([]bool, len(fams)), signed: make([]bool, len(fams)), keys: v.Analysis.Keys,
			store: v.Campaign.ID, joined: len(v.Campaign.Joined) > 0}
		for i, f := range fams {
			rec.tagged[i] = v.Volumes[f] >= int64(cfg.Thresholds[f])
		}
		tr.add(traced{label: fmt.Sprintf("%s#%d", b.Name, k), campaign: e.campaign, k: k}, v)
		for _, ex := range v.Analysis.Explains {
			if i := slices.Index(fams, ex.Family); i >= 0 {
				rec.signed[i] = ex.Keys > 0
			}
		}
		copies = append(copies, rec)
	}
	moved, err := sim.finish(ctx)
	if err != nil {
		return nil, err
	}
	for i := range copies {
		copies[i].refiled = moved[copies[i].delivered]
	}
	for _, c := range hamCopies {
		if moved[c] {
			r.HamRefiled++
		}
	}
	r.Ham = len(ham)
	if len(ham) > 0 {
		r.HamFP = float64(r.HamTagged) / float64(len(ham))
	}
	if hs.personal > 0 {
		r.HamFPPersonal = float64(r.HamTagged-r.HamTaggedList) / float64(hs.personal)
	}
	r.score(cfg, fams, bases, copies)
	if err := tr.write(cfg.WorldTrace, atk.Name, cfg.after(), bases); err != nil {
		return nil, err
	}
	return r, nil
}

// score computes recall, coverage and fragmentation from a world's copies.
func (r *AttackResult) score(cfg *Config, fams []signature.Family, bases []*base, copies []copyRecord) {
	T := cfg.after()
	r.Recall, r.Signed, r.Fragmentation = map[string]float64{}, map[string]float64{}, map[string]float64{}
	r.RecallSpam, r.RecallHam = map[string]float64{}, map[string]float64{}
	tagged := make([]int, len(fams)+1)
	taggedSpam, taggedHam := make([]int, len(fams)+1), make([]int, len(fams)+1)
	signed := make([]int, len(fams))
	perCampaign := make([][2]int, len(bases)) // counted, tagged (combined)
	counted, countedSpam, countedHam := 0, 0, 0
	var bulkAll, refiledAll int
	for _, c := range copies {
		for i := range fams {
			if c.signed[i] {
				signed[i]++
			}
		}
		if c.bulk {
			bulkAll++
		} else if c.refiled {
			refiledAll++
		}
		if c.k <= T {
			continue
		}
		counted++
		isHam := bases[c.campaign].ham
		if isHam {
			countedHam++
		} else {
			countedSpam++
		}
		perCampaign[c.campaign][0]++
		add := func(i int, ok bool) {
			if !ok {
				return
			}
			tagged[i]++
			if isHam {
				taggedHam[i]++
			} else {
				taggedSpam[i]++
			}
		}
		for i := range fams {
			add(i, c.tagged[i])
		}
		add(len(fams), c.bulk)
		if c.bulk {
			perCampaign[c.campaign][1]++
		}
	}
	r.Copies, r.Counted = len(copies), counted
	frac := func(a, b int) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	r.RecallAll = frac(bulkAll, len(copies))
	r.RecallAllRefiled = frac(bulkAll+refiledAll, len(copies))
	for i, f := range fams {
		r.Recall[f.String()] = frac(tagged[i], counted)
		r.RecallSpam[f.String()] = frac(taggedSpam[i], countedSpam)
		r.RecallHam[f.String()] = frac(taggedHam[i], countedHam)
		r.Signed[f.String()] = frac(signed[i], len(copies))
	}
	r.Recall[Combined] = frac(tagged[len(fams)], counted)
	r.RecallSpam[Combined] = frac(taggedSpam[len(fams)], countedSpam)
	r.RecallHam[Combined] = frac(taggedHam[len(fams)], countedHam)

	// Fragmentation: distinct values per key coordinate (family, index)
	// over a campaign's copies, averaged over coordinates and campaigns.
	type coord struct {
		fam signature.Family
		idx uint8
	}
	distinct := make([]map[coord]map[uint64]bool, len(bases))
	for i := range distinct {
		distinct[i] = map[coord]map[uint64]bool{}
	}
	for _, c := range copies {
		for _, k := range c.keys {
			co := coord{k.Family, k.Index}
			m := distinct[c.campaign][co]
			if m == nil {
				m = map[uint64]bool{}
				distinct[c.campaign][co] = m
			}
			m[k.Hash] = true
		}
	}
	for _, f := range fams {
		sum, n := 0.0, 0
		for _, d := range distinct {
			s, m := 0, 0
			for co, vals := range d {
				if co.fam == f {
					s += len(vals)
					m++
				}
			}
			if m > 0 {
				sum += float64(s) / float64(m)
				n++
			}
		}
		if n > 0 {
			r.Fragmentation[f.String()] = sum / float64(n)
		}
	}
	// Kolcz & Chowdhury's fragmentation reduction by context hardening:
	// distinct plain primary signatures over distinct hardened ones.
	var ratios []float64
	for _, d := range distinct {
		plain := d[coord{signature.FamilyIMatch, 0}]
		hard := d[coord{signature.FamilyIMatch, signature.HardenedIndex}]
		if len(plain) > 0 && len(hard) > 0 {
			ratios = append(ratios, float64(len(plain))/float64(len(hard)))
		}
	}
	if len(ratios) > 0 {
		slices.Sort(ratios)
		r.HardeningReduction = &Reduction{Median: ratios[len(ratios)/2], Max: ratios[len(ratios)-1], Campaigns: len(ratios)}
	}
	r.Misses = missCauses(T, len(bases), copies)
	// The campaigns missed most, for investigation.
	type miss struct {
		i      int
		recall float64
	}
	var misses []miss
	for i, pc := range perCampaign {
		if pc[0] > 0 && pc[1] < pc[0] {
			misses = append(misses, miss{i, frac(pc[1], pc[0])})
		}
	}
	sort.SliceStable(misses, func(a, b int) bool { return misses[a].recall < misses[b].recall })
	for _, m := range misses[:min(5, len(misses))] {
		r.Worst = append(r.Worst, CampaignMiss{Base: bases[m.i].Name, Recall: m.recall, Subject: trimTo(bases[m.i].mail.Subject, 60)})
	}
}

func trimTo(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// missCauses sorts the untagged counted copies by what the store did with
// them (MissCauses).
func missCauses(T, campaigns int, copies []copyRecord) MissCauses {
	stores := make([]map[uint32]int, campaigns)
	for i := range stores {
		stores[i] = map[uint32]int{}
	}
	for _, c := range copies {
		stores[c.campaign][c.store]++
	}
	main := make([]uint32, campaigns)
	var m MissCauses
	n := 0
	for i, s := range stores {
		main[i] = mainCampaign(s)
		if len(s) > 0 {
			m.Stores += float64(len(s))
			n++
		}
	}
	if n > 0 {
		m.Stores /= float64(n)
	}
	for _, c := range copies {
		switch {
		case c.k <= T || c.bulk:
		case !c.joined:
			m.Own++
		case c.store != main[c.campaign]:
			m.Split++
		default:
			m.Main++
		}
	}
	return m
}

// mainCampaign returns the store campaign most of a group's copies went
// to (counts: copies by campaign), the lower id on a tie, so that the
// choice does not depend on the map's order.
func mainCampaign(counts map[uint32]int) uint32 {
	var main uint32
	best := -1
	for id, k := range counts {
		if k > best || (k == best && id < main) {
			main, best = id, k
		}
	}
	return main
}
