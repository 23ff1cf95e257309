package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/lab/corpus"
	"github.com/bulkmilter/bulkmilter/mailbox"
	"github.com/bulkmilter/bulkmilter/refile"
	"github.com/bulkmilter/bulkmilter/signature"
)

// The real stream: one site's mail in delivery order (trec07p, its first
// 18,000 messages), replayed as the site's daemon would have seen it: the
// recipients the site's MTA wrote in its Received field, the client it
// names, the sender from Return-Path, each message at its time. What a
// small site sees of a mass mailing is a handful of its own users, often
// the same few, from many hosts; generated campaigns to 30 new recipients
// each cannot show that.

// SectionStream is the real-stream section.
const SectionStream = "stream"

const trecPath = "trec07p-part1/trec07p-part1.tar.xz"

// StreamRelays are the stream's site's own relays (policy.relays), as its
// administrator would configure them: plg2.math.uwaterloo.ca
// (129.97.186.80) forwards its users' mail to speedy.uwaterloo.ca, the
// site's MTA, so that host is the SMTP client of every message it forwards
// (3,866 of the first 18,000, whatever their origin).
var StreamRelays = []string{"129.97.186.0/24"}

// StreamPipeline is what the stream replay needs beyond Pipeline: the
// message taken in as the MTA hands it over, so that the replay can set
// the envelope the header names, and the engine that checks it (the one
// message path: daemon.Runtime has both).
type StreamPipeline interface {
	Message(raw []byte, rcpts []string, at time.Time) *detect.Message
	Engine() *detect.Engine
}

// Clocks of the stream replay: each message at its Date header (what a
// sender writes, as the issue measured it; a Date later than the site's
// Received date is forged and the delivery time stands for it:
// detect.DateTime) or at the date the site's MTA wrote in the topmost
// Received field (what the daemon would have seen).
const (
	ClockDate     = "date"
	ClockReceived = "received"
)

// StreamResult is one replay of the stream.
type StreamResult struct {
	Corpus string `json:"corpus"`
	Clock  string `json:"clock"`
	// Messages, by kind: spam, ham with mailing-list or newsletter headers
	// (isListMail), and personal ham (ham without them).
	Messages    int `json:"messages"`
	Spam        int `json:"spam"`
	ListHam     int `json:"list_ham"`
	PersonalHam int `json:"personal_ham"`
	Unsigned    int `json:"unsigned"`
	// Recipients is the number of distinct recipients of the stream, and
	// WithClient the messages whose client address was found.
	Recipients int `json:"recipients"`
	WithClient int `json:"with_client"`
	// Tagged is what the configuration itself decided at delivery.
	Tagged StreamPoint `json:"tagged"`
	// Refiled is what the daemon's refiler (docs/refile.md, its defaults)
	// moved to Bulk later: messages delivered untagged whose campaign
	// crossed its threshold within the window after them. They are not in
	// Tagged: an admin reads the two apart. NoMessageID is the untagged
	// messages without a Message-ID, which refiling cannot find.
	Refiled     StreamPoint `json:"refiled"`
	NoMessageID StreamPoint `json:"untagged_no_message_id"`
	// Curve is the same stream with one threshold for every family: a
	// message is tagged at T when a family's volume reached T.
	Curve []StreamPoint `json:"curve"`
	// Networks and Senders measure two more volume dimensions offline,
	// not the daemon's verdict: tagged at T when the recipients or the
	// distinct sending networks (/24, /48) of a key in the window reach T
	// (Networks), or the recipients, networks or envelope senders
	// (Senders).
	Networks []StreamPoint `json:"curve_networks"`
	Senders  []StreamPoint `json:"curve_networks_senders"`
	// CampaignNetworks is tagged at T when the recipients or the
	// campaign's distinct sending networks (store.Result.Campaign) reach T.
	CampaignNetworks []StreamPoint `json:"curve_campaign_networks"`
	// PersonalTagged names the personal ham the configuration tagged,
	// PersonalRefiled the personal ham the refiler moved.
	PersonalTagged  []string `json:"personal_tagged,omitempty"`
	PersonalRefiled []string `json:"personal_refiled,omitempty"`
	// Groups sorts the untagged spam of the stream's campaigns.
	Groups StreamGroups `json:"groups"`
	// Classes sorts the untagged spam by what its campaign became.
	Classes StreamClasses `json:"classes"`
}

// StreamClasses sorts the spam untagged at delivery by what its store
// campaign became in the stream (its size: the most distinct recipients
// or sending networks any of its messages saw, ham included): early
// copies of a campaign that reached 10, a campaign that ended at 2–9, a
// campaign of several messages that stayed at 1, a campaign of its own
// (alone), unsigned. Each class counts its messages and, of them, those
// the refiler moved later: what counting reached late, and what it never
// reached.
type StreamClasses struct {
	Early    ClassCount `json:"early"`
	Small    ClassCount `json:"small"`
	Stuck    ClassCount `json:"stuck"`
	Alone    ClassCount `json:"alone"`
	Unsigned ClassCount `json:"unsigned"`
}

// ClassCount is a class's untagged spam and, of it, the refiled.
type ClassCount struct {
	Untagged int `json:"untagged"`
	Refiled  int `json:"refiled"`
}

// classMsg is what StreamClasses needs of one message.
type classMsg struct {
	spam, bulk, unsigned, refiled bool
	campaign                      uint32
	size                          int64 // max(recipients, networks) at its delivery
}

// streamClasses sorts msgs' untagged spam by StreamClasses' classes.
func streamClasses(msgs []classMsg) StreamClasses {
	type camp struct {
		n    int
		size int64
	}
	camps := map[uint32]*camp{}
	for _, m := range msgs {
		if m.unsigned {
			continue
		}
		c := camps[m.campaign]
		if c == nil {
			c = &camp{}
			camps[m.campaign] = c
		}
		c.n++
		c.size = max(c.size, m.size)
	}
	var out StreamClasses
	for _, m := range msgs {
		if !m.spam || m.bulk {
			continue
		}
		var k *ClassCount
		switch c := camps[m.campaign]; {
		case m.unsigned:
			k = &out.Unsigned
		case c.size >= 10:
			k = &out.Early
		case c.size >= 2:
			k = &out.Small
		case c.n > 1:
			k = &out.Stuck
		default:
			k = &out.Alone
		}
		k.Untagged++
		if m.refiled {
			k.Refiled++
		}
	}
	return out
}

// StreamGroups sorts the untagged spam of the stream's campaigns: groups
// of at least T (the highest threshold) spam messages with the same
// visible prefix (the real corpora's refined method, visiblePrefix; the
// stream has no silver groups). A message is early when its group had
// fewer than T distinct recipients in the store's window when it came
// (itself included): no counting could have tagged it. Otherwise a count
// over the group would have, and it is split: unsigned (no keys), own (it
// started a campaign), other (it joined a campaign other than the one most
// of its group went to) or main (it joined that one, which fell short
// because its other copies went elsewhere).
type StreamGroups struct {
	Threshold int `json:"threshold"`
	Groups    int `json:"groups"`
	Messages  int `json:"messages"`
	Untagged  int `json:"untagged"`
	Early     int `json:"early"`
	Split     int `json:"split"`
	Unsigned  int `json:"split_unsigned"`
	Own       int `json:"split_own"`
	Other     int `json:"split_other"`
	Main      int `json:"split_main"`
}

// groupSpam is what StreamGroups needs of one spam message.
type groupSpam struct {
	prefix         string
	at             time.Time
	rcpts          []string
	bulk, unsigned bool
	joined         bool
	campaign       uint32
}

// streamGroups sorts the untagged spam of msgs (in stream order) by
// StreamGroups' classes.
func streamGroups(msgs []groupSpam, T int, window time.Duration) StreamGroups {
	g := StreamGroups{Threshold: T}
	byPrefix := map[string][]int{}
	for i, m := range msgs {
		if m.prefix != "" {
			byPrefix[m.prefix] = append(byPrefix[m.prefix], i)
		}
	}
	for _, idx := range byPrefix {
		if len(idx) < T {
			continue
		}
		g.Groups++
		g.Messages += len(idx)
		camps := map[uint32]int{}
		for _, i := range idx {
			camps[msgs[i].campaign]++
		}
		main := mainCampaign(camps)
		for j, i := range idx {
			m := &msgs[i]
			if m.bulk {
				continue
			}
			g.Untagged++
			seen := map[string]bool{}
			for _, k := range idx[:j+1] {
				if o := &msgs[k]; !o.at.Before(m.at.Add(-window)) {
					for _, r := range o.rcpts {
						seen[r] = true
					}
				}
			}
			if len(seen) < T {
				g.Early++
				continue
			}
			g.Split++
			switch {
			case m.unsigned:
				g.Unsigned++
			case !m.joined:
				g.Own++
			case m.campaign != main:
				g.Other++
			default:
				g.Main++
			}
		}
	}
	return g
}

// StreamPoint is what one setting tags of the stream.
type StreamPoint struct {
	Threshold int `json:"threshold,omitempty"`
	Spam      int `json:"spam"`
	List      int `json:"list"`
	Personal  int `json:"personal"`
}

// streamMsg is one message of the stream with its label.
type streamMsg struct {
	name string
	raw  []byte
	spam bool
	list bool
}

// loadStream reads trec07p-part1 in delivery order, the first limit
// messages (0: all).
func loadStream(dir string, limit int) ([]streamMsg, error) {
	p := filepath.Join(dir, trecPath)
	labels := map[string]bool{} // name → spam
	byN := map[int]*streamMsg{}
	number := func(name string) int {
		n, err := strconv.Atoi(strings.TrimPrefix(path.Base(name), "inmail."))
		if err != nil || !strings.HasPrefix(path.Base(name), "inmail.") {
			return -1
		}
		return n
	}
	opts := mailbox.Options{
		MaxSize: -1,
		Filter: func(name string) bool {
			n := number(name)
			return n > 0 && (limit <= 0 || n <= limit)
		},
		OnSkip: func(string, error) error { return nil },
		Hooks: mailbox.Hooks{
			Sidecar:     "index",
			ReadSidecar: func(name string, r io.Reader) error { return corpus.TRECIndex(name, r, labels) },
		},
	}
	err := opts.Walk(p, func(m *mailbox.Message) error {
		byN[number(m.Name)] = &streamMsg{name: path.Base(m.Name), raw: m.Data}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", trecPath, err)
	}
	ns := make([]int, 0, len(byN))
	for n := range byN {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	out := make([]streamMsg, 0, len(ns))
	for _, n := range ns {
		m := byN[n]
		spam, ok := labels[m.name]
		if !ok {
			return nil, fmt.Errorf("read %s: %s has no label in its index", trecPath, m.name)
		}
		m.spam, m.list = spam, !spam && isListMail(m.raw)
		out = append(out, *m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("read %s: no messages", trecPath)
	}
	return out, nil
}

// streamThresholds are the points of the curve.
var streamThresholds = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 20}

// replayStream replays the stream through a fresh pipeline with the given
// clock.
func replayStream(ctx context.Context, cfg *Config, msgs []streamMsg, clock string) (*StreamResult, error) {
	newPipeline := cfg.NewStreamPipeline
	if newPipeline == nil {
		newPipeline = cfg.NewPipeline
	}
	p, err := newPipeline()
	if err != nil {
		return nil, err
	}
	defer p.Close()
	sp, ok := p.(StreamPipeline)
	if !ok {
		return nil, errors.New("eval: the pipeline cannot replay a stream (no Message, Engine)")
	}
	r := &StreamResult{Corpus: "trec07p-part1", Clock: clock}
	for _, c := range []*[]StreamPoint{&r.Curve, &r.Networks, &r.Senders, &r.CampaignNetworks} {
		*c = make([]StreamPoint, len(streamThresholds))
		for i, t := range streamThresholds {
			(*c)[i].Threshold = t
		}
	}
	nets, senders := dimension[signature.Key]{}, dimension[signature.Key]{}
	rcpts := map[string]bool{}
	var last time.Time
	var spam []groupSpam
	sim, err := newRefileSim()
	if err != nil {
		return nil, err
	}
	defer sim.r.Close()
	// delivered holds each message's copies as its recipients' inboxes
	// got them, and trace its trace line until the refiler has run: both
	// are read once the replay is over.
	delivered := make([][]refile.Copy, 0, len(msgs))
	classes := make([]classMsg, 0, len(msgs))
	var trace []string
	for _, m := range msgs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		msg := sp.Message(m.raw, []string{"unknown@stream.invalid"}, time.Time{})
		msg.SetFromHeader(detect.FromHeader{Recipients: true, Client: true, Sender: true})
		at := last
		switch clock {
		case ClockDate:
			if d, ok := detect.DateTime(msg.Header); ok {
				at = d
			}
		case ClockReceived:
			if d := detect.ReceivedTime(msg.Header); !d.IsZero() {
				at = d
			}
		}
		msg.Time, last = at, at
		for _, a := range msg.Recipients {
			rcpts[detect.NormaliseAddress(a)] = true
		}
		if msg.Client.IsValid() {
			r.WithClient++
		}
		v := sp.Engine().Check(ctx, msg)
		if v.Err != nil {
			return nil, fmt.Errorf("%s: %w", m.name, v.Err)
		}
		r.Messages++
		if v.Unsigned {
			r.Unsigned++
		}
		score := int64(0)
		for _, vol := range v.Volumes {
			score = max(score, vol)
		}
		add := func(pt *StreamPoint) {
			switch {
			case m.spam:
				pt.Spam++
			case m.list:
				pt.List++
			default:
				pt.Personal++
			}
		}
		switch {
		case m.spam:
			r.Spam++
		case m.list:
			r.ListHam++
		default:
			r.PersonalHam++
		}
		var copies []refile.Copy
		// The copy is this message's: spam tools reuse one Message-ID for
		// many messages (23 of the stream's share one), and the mailbox in
		// memory would take them for one copy. Dovecot's move, a search by
		// Message-ID, would move them all at once; the figure counts the
		// copies the refiler itself remembered.
		msgID := strings.TrimSpace(msg.Header.Get("Message-Id"))
		if msgID != "" {
			msgID += " " + m.name
		}
		for _, a := range msg.Recipients {
			copies = append(copies, sim.deliver(v, detect.NormaliseAddress(a), msgID, at))
		}
		delivered = append(delivered, copies)
		classes = append(classes, classMsg{spam: m.spam, bulk: v.Bulk, unsigned: v.Unsigned, campaign: v.Campaign.ID,
			size: max(v.Campaign.Recipients, v.Campaign.Networks)})
		if !v.Bulk && msgID == "" {
			add(&r.NoMessageID)
		}
		if cfg.StreamTrace != nil {
			trace = append(trace, streamTraceLine(clock, m, msg, v))
		}
		if m.spam {
			var parts []string
			if v.Analysis != nil {
				for _, pt := range v.Analysis.Text.Parts {
					parts = append(parts, pt.Text)
				}
			}
			gs := groupSpam{prefix: visiblePrefix(parts), at: at, bulk: v.Bulk, unsigned: v.Unsigned,
				joined: len(v.Campaign.Joined) > 0, campaign: v.Campaign.ID}
			for _, a := range msg.Recipients {
				gs.rcpts = append(gs.rcpts, detect.NormaliseAddress(a))
			}
			spam = append(spam, gs)
		}
		if v.Bulk {
			add(&r.Tagged)
			if !m.spam && !m.list {
				r.PersonalTagged = append(r.PersonalTagged, m.name)
			}
		}
		var netScore, senderScore int64
		if v.Analysis != nil {
			netScore = nets.add(v.Analysis.Keys, detect.Network(sp.Engine().Client(msg)), at)
			senderScore = senders.add(v.Analysis.Keys, msg.Sender, at)
		}
		for i := range r.Curve {
			t := int64(r.Curve[i].Threshold)
			if v.Unsigned {
				continue
			}
			if score >= t {
				add(&r.Curve[i])
			}
			if score >= t || netScore >= t {
				add(&r.Networks[i])
			}
			if score >= t || netScore >= t || senderScore >= t {
				add(&r.Senders[i])
			}
			if score >= t || v.Campaign.Networks >= t {
				add(&r.CampaignNetworks[i])
			}
		}
	}
	moved, err := sim.finish(ctx)
	if err != nil {
		return nil, err
	}
	for i, m := range msgs[:len(delivered)] {
		refiled := slices.ContainsFunc(delivered[i], func(c refile.Copy) bool { return moved[c] })
		classes[i].refiled = refiled
		if refiled {
			switch {
			case m.spam:
				r.Refiled.Spam++
			case m.list:
				r.Refiled.List++
			default:
				r.Refiled.Personal++
				r.PersonalRefiled = append(r.PersonalRefiled, m.name)
			}
		}
		if cfg.StreamTrace != nil {
			flag := 0
			if refiled {
				flag = 1
			}
			if _, err := fmt.Fprintf(cfg.StreamTrace, "%s\t%d\n", trace[i], flag); err != nil {
				return nil, fmt.Errorf("stream trace: %w", err)
			}
		}
	}
	r.Recipients = len(rcpts)
	window := cfg.Window
	if window == 0 {
		window = 24 * time.Hour
	}
	r.Groups = streamGroups(spam, cfg.after(), window)
	r.Classes = streamClasses(classes)
	return r, nil
}

// streamTraceHeader names the columns of a stream trace line
// (Config.StreamTrace): the clock, the message's name in the corpus, its
// kind (spam, list, personal), the verdict (1 bulk), the highest family
// volume, the campaign (8 hex digits, "-" unsigned), its distinct
// recipients and networks, the families whose keys joined it ("-" for a
// campaign of its own), the message's keys per family, its time and its
// Subject (60 characters), and whether the refiler moved it later (1).
const streamTraceHeader = "clock\tname\tkind\tbulk\tscore\tcampaign\trecipients\tnetworks\tvia\tkeys\ttime\tsubject\trefiled"

// streamTraceLine is m's trace line (streamTraceHeader) but its last
// column, refiled, which is known only once the stream is over.
func streamTraceLine(clock string, m streamMsg, msg *detect.Message, v detect.Verdict) string {
	kind := "personal"
	switch {
	case m.spam:
		kind = "spam"
	case m.list:
		kind = "list"
	}
	bulk := 0
	if v.Bulk {
		bulk = 1
	}
	var score int64
	for _, vol := range v.Volumes {
		score = max(score, vol)
	}
	camp, via, keys := "-", "-", "-"
	if !v.Unsigned {
		camp = fmt.Sprintf("%08x", v.Campaign.ID)
	}
	if len(v.Via) > 0 {
		names := make([]string, len(v.Via))
		for i, f := range v.Via {
			names[i] = f.String()
		}
		via = strings.Join(names, ",")
	}
	if v.Analysis != nil && len(v.Analysis.Keys) > 0 {
		n := map[signature.Family]int{}
		for _, k := range v.Analysis.Keys {
			n[k.Family]++
		}
		var parts []string
		for _, f := range signature.Families() {
			if n[f] > 0 {
				parts = append(parts, fmt.Sprintf("%s:%d", f, n[f]))
			}
		}
		keys = strings.Join(parts, ",")
	}
	subj := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, msg.Header.Get("Subject"))
	if rs := []rune(subj); len(rs) > 60 {
		subj = string(rs[:60])
	}
	return fmt.Sprintf("%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s", clock, m.name, kind, bulk, score,
		camp, v.Campaign.Recipients, v.Campaign.Networks, via, keys, msg.Time.UTC().Format(time.RFC3339), subj)
}

// dimension counts, per key, the distinct values (sending networks,
// envelope senders) seen with it within a day of message time: the lab's
// measure of a volume dimension the store does not count by key (keys of
// the signature set, or candidate keys measured offline).
type dimension[K comparable] map[K]map[string]time.Time

// add records value for the keys at at and returns the highest count of
// distinct values over the keys, this one's included ("" counts nothing).
func (d dimension[K]) add(keys []K, value string, at time.Time) int64 {
	var best int64
	for _, k := range keys {
		m := d[k]
		if m == nil {
			m = map[string]time.Time{}
			d[k] = m
		}
		if value != "" {
			m[value] = at
		}
		n := int64(0)
		for _, t := range m {
			if dt := at.Sub(t); dt < 24*time.Hour && dt > -24*time.Hour {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// runStream replays the stream with each clock.
func runStream(ctx context.Context, cfg *Config, rep *Report) error {
	msgs, err := loadStream(cfg.Corpora, cfg.StreamLimit)
	if err != nil {
		return err
	}
	if cfg.StreamTrace != nil {
		if _, err := fmt.Fprintln(cfg.StreamTrace, streamTraceHeader); err != nil {
			return fmt.Errorf("stream trace: %w", err)
		}
	}
	clocks := []string{ClockDate, ClockReceived}
	if cfg.CI {
		clocks = clocks[:1]
	}
	for _, c := range clocks {
		start := time.Now()
		r, err := replayStream(ctx, cfg, msgs, c)
		if err != nil {
			return err
		}
		cfg.logf("stream %s, clock %s: %d messages, %d spam tagged, %d personal (%s)", r.Corpus, c, r.Messages, r.Tagged.Spam, r.Tagged.Personal, time.Since(start).Round(time.Millisecond))
		rep.Stream = append(rep.Stream, r)
	}
	return nil
}

// share is n of d as a fraction, 0 for an empty d.
func share(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// streamMarkdown writes the stream section.
func streamMarkdown(w io.Writer, rs []*StreamResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "### Real stream: one site's mail in delivery order\n\n")
	for _, r := range rs {
		fmt.Fprintf(w, "%s, clock %s: %d messages (%d spam, %d list/newsletter ham, %d personal ham; %d unsigned), %d distinct recipients, client address found for %d.\n\n",
			r.Corpus, r.Clock, r.Messages, r.Spam, r.ListHam, r.PersonalHam, r.Unsigned, r.Recipients, r.WithClient)
		fmt.Fprintf(w, "| setting | spam tagged | list/newsletter ham tagged | personal ham tagged |\n|---|---|---|---|\n")
		row := func(name string, p StreamPoint) {
			fmt.Fprintf(w, "| %s | %s (%d) | %s (%d) | %d of %d (%.2f ‰) |\n", name,
				pct(share(p.Spam, r.Spam)), p.Spam, pct(share(p.List, r.ListHam)), p.List,
				p.Personal, r.PersonalHam, 1000*share(p.Personal, r.PersonalHam))
		}
		row("**the configuration**", r.Tagged)
		row("refiled later (refile.enabled, its defaults; not in the row above)", r.Refiled)
		row("tagged at delivery or refiled later", StreamPoint{Spam: r.Tagged.Spam + r.Refiled.Spam,
			List: r.Tagged.List + r.Refiled.List, Personal: r.Tagged.Personal + r.Refiled.Personal})
		row("untagged without a Message-ID (refiling cannot find them)", r.NoMessageID)
		for _, p := range r.Curve {
			row(fmt.Sprintf("threshold %d", p.Threshold), p)
		}
		for i, p := range r.Networks {
			row(fmt.Sprintf("recipients or networks ≥ %d", p.Threshold), p)
			row(fmt.Sprintf("recipients, networks or senders ≥ %d", p.Threshold), r.Senders[i])
			row(fmt.Sprintf("recipients or campaign networks ≥ %d", p.Threshold), r.CampaignNetworks[i])
		}
		fmt.Fprintln(w)
		c := r.Classes
		fmt.Fprintf(w, "| untagged spam by what its campaign became | messages | refiled later |\n|---|---|---|\n")
		for _, k := range []struct {
			name string
			n    ClassCount
		}{
			{"early copies of a campaign that reached 10 recipients or networks", c.Early},
			{"in a campaign that ended at 2–9", c.Small},
			{"in a campaign of several messages that stayed at 1", c.Stuck},
			{"alone: no other message joined its campaign", c.Alone},
			{"unsigned", c.Unsigned},
		} {
			fmt.Fprintf(w, "| %s | %d | %d |\n", k.name, k.n.Untagged, k.n.Refiled)
		}
		fmt.Fprintln(w)
		g := r.Groups
		fmt.Fprintf(w, "Campaigns (visible-prefix groups of ≥ %d spam): %d groups, %d messages, %d untagged: %d early (under %d recipients in the window), %d split (%d unsigned, %d own, %d in another campaign, %d in the group's main campaign).\n\n",
			g.Threshold, g.Groups, g.Messages, g.Untagged, g.Early, g.Threshold, g.Split, g.Unsigned, g.Own, g.Other, g.Main)
	}
}
