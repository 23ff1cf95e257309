// Package explain answers "why was this message tagged, or not?" for one
// message: what a reader sees after extraction, what was removed or
// normalised on the way and why, each signature family's keys with their
// volumes, the campaign, the verdict with its bulk level and the reasons
// (milterd explain, and the daemon's /admin/explain endpoint).
//
// A Report is plain data, the same as text for a person (WriteText) and as
// JSON: the command prints a report the daemon computed as it would one
// of its own. It is built from a detect.Engine.Peek verdict, so nothing is
// recorded in the store.
//
// It may import detect, declared, signature and store (types only).
package explain

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// Report explains one message.
type Report struct {
	Name string `json:"name,omitempty"`
	// Error is set when the store could not be read; the volumes are
	// then unknown and the verdict is the failure policy's.
	Error      string   `json:"error,omitempty"`
	Text       Text     `json:"text"`
	Normalised []Change `json:"normalised"`
	// Words are the canonical words every family signs, in reading order.
	Words    []string  `json:"canonical_words"`
	Families []Family  `json:"families"`
	Campaign *Campaign `json:"campaign,omitempty"`
	Verdict  Verdict   `json:"verdict"`
}

// Text is what a reader sees.
type Text struct {
	Subject     string   `json:"subject"`
	Parts       []Part   `json:"parts"`
	LinkDomains []string `json:"link_domains,omitempty"`
	// RemoteImages are the paths of the remote images shown
	// (mailtext's Text.Images), which the attach family keys when
	// nothing else signs the message.
	RemoteImages []string `json:"remote_images,omitempty"`
	Defects      []string `json:"defects,omitempty"` // what extraction worked around
	Truncated    bool     `json:"truncated,omitempty"`
}

// Part is one text part as read.
type Part struct {
	ContentType string `json:"content_type"`
	Text        string `json:"text"`
}

// Change is one kind of removal or normalisation and why it is done.
type Change struct {
	What  string `json:"what"`
	Count int    `json:"count"`
	Why   string `json:"why"`
}

// Family is one signature family's part in the verdict.
type Family struct {
	Name      string `json:"name"`
	Threshold int    `json:"threshold"`
	// Volume is the highest volume of its keys: the family's volume.
	Volume   int64  `json:"volume"`
	Keys     []Key  `json:"keys,omitempty"`
	Declined string `json:"declined,omitempty"` // why it made no key
	Detail   string `json:"detail,omitempty"`
}

// Key is one signature key as the store counts it.
type Key struct {
	ID      string `json:"id"`
	Volume  int64  `json:"volume"`
	NotBulk int64  `json:"not_bulk_voters,omitempty"`
	Bulk    int64  `json:"bulk_voters,omitempty"`
}

// Campaign is the campaign the message joins.
type Campaign struct {
	ID         uint32    `json:"id"`
	Recipients int64     `json:"recipients"`
	Networks   int64     `json:"networks"`
	Senders    int64     `json:"senders"`
	FirstSeen  time.Time `json:"first_seen"`
	// NotBulk and Bulk count the distinct voters on the campaign (votes
	// follow the campaign: docs/feedback.md).
	NotBulk int64 `json:"not_bulk_voters,omitempty"`
	Bulk    int64 `json:"bulk_voters,omitempty"`
}

// Verdict is the verdict, its level and why.
type Verdict struct {
	Bulk bool `json:"bulk"`
	// Header is the verdict header's value as the milter would write it.
	Header       string   `json:"header"`
	Level        int      `json:"level"`
	LevelReasons []string `json:"level_reasons,omitempty"`
	Kind         string   `json:"kind"`
	// Evidence are the declarations a verified signature covers; Uncovered
	// those present without one (see package declared).
	Evidence  []string `json:"declared_evidence,omitempty"`
	Uncovered []string `json:"uncovered_declarations,omitempty"`
	SignedBy  string   `json:"signed_by,omitempty"`
	Feedback  string   `json:"feedback,omitempty"`
	// ExemptSender is the actions.except_senders domain whose verified
	// signature exempts the message (detect.Verdict.ExemptSender).
	ExemptSender string `json:"exempt_sender,omitempty"`
	VolumeSource string `json:"volume_source"`
}

// New builds the report of a verdict from detect.Engine.Peek and the
// store's answer; threshold gives each family's threshold.
func New(name string, v detect.Verdict, res store.Result, threshold func(signature.Family) int) Report {
	a := v.Analysis
	r := Report{Name: name, Words: []string{}, Families: []Family{}, Normalised: []Change{}}
	if v.Err != nil {
		r.Error = v.Err.Error()
	}
	t := a.Text
	r.Text = Text{Subject: t.Subject, Parts: []Part{}, LinkDomains: t.Domains, RemoteImages: t.Images, Truncated: t.Stats.TruncatedBytes > 0}
	for _, p := range t.Parts {
		r.Text.Parts = append(r.Text.Parts, Part{ContentType: p.ContentType, Text: p.Text})
	}
	for _, d := range t.Defects {
		r.Text.Defects = append(r.Text.Defects, strings.TrimSpace(string(d.Kind)+" "+d.Detail))
	}
	ds := a.Doc.Stats
	for _, c := range []Change{
		{"characters of HTML text hidden from the reader", t.Stats.HiddenChars, "left out: invisible text (display:none, tiny or background-coloured) is where senders hide random words that break checksums"},
		{"characters inside HTML comments", t.Stats.CommentChars, "left out: a reader never sees comments, a hiding place for hash-busters"},
		{"alternative groups whose plain text and HTML disagree", t.Stats.AltMismatch, "the HTML alternative, which readers see, was read; a bland text/plain beside it is an evasion trick"},
		{"bytes of text beyond limits.max_text_bytes", t.Stats.TruncatedBytes, "not read: the analysis is bounded"},
		{"zero-width and format characters", ds.Removed, "removed: invisible characters inside words make every copy's words differ"},
		{"words with look-alike letters (homoglyphs) or leetspeak", ds.Folded, "folded to plain letters, so that Cyrillic or digit look-alikes sign as the word a reader sees"},
		{"runs of spaced-out letters", ds.Joined, "joined into one word: 'f r e e' reads as 'free'"},
		{"words of the recipients' names and addresses", ds.Stripped, "removed, so that personalised copies of one mailing sign alike"},
		{"tokens without letters", ds.NonLetterRun, "dropped: numbers and symbols (order numbers, dates, random digits) vary from copy to copy"},
	} {
		if c.Count > 0 {
			r.Normalised = append(r.Normalised, c)
		}
	}
	r.Words = append(r.Words, a.Doc.Tokens...)

	byFamily := map[signature.Family]int{} // index in r.Families
	for _, ex := range a.Explains {
		byFamily[ex.Family] = len(r.Families)
		r.Families = append(r.Families, Family{Name: ex.Family.String(), Threshold: threshold(ex.Family),
			Declined: ex.Declined, Detail: ex.Detail})
	}
	for i, k := range a.Keys {
		j, ok := byFamily[k.Family]
		if !ok {
			byFamily[k.Family] = len(r.Families)
			j = len(r.Families)
			r.Families = append(r.Families, Family{Name: k.Family.String(), Threshold: threshold(k.Family)})
		}
		key := Key{ID: k.String()}
		if i < len(v.IDs) {
			key.ID = v.IDs[i]
		}
		if i < len(res.Volumes) {
			key.Volume = res.Volumes[i]
		}
		if i < len(res.Votes) {
			key.NotBulk, key.Bulk = res.Votes[i].NotBulk, res.Votes[i].Bulk
		}
		f := &r.Families[j]
		f.Keys = append(f.Keys, key)
		f.Volume = max(f.Volume, key.Volume)
	}
	if c := res.Campaign; c.ID != 0 {
		r.Campaign = &Campaign{ID: c.ID, Recipients: c.Recipients, Networks: c.Networks, Senders: c.Senders, FirstSeen: c.First.UTC(),
			NotBulk: res.CampaignVotes.NotBulk, Bulk: res.CampaignVotes.Bulk}
	}
	why := v.LevelWhy
	switch {
	case v.Err != nil:
		why = []string{"the store could not be read"}
	case v.Unsigned:
		why = []string{"no family could sign the message"}
	}
	r.Verdict = Verdict{
		Bulk: v.Tagged(), Header: v.Header(false), Level: v.LevelAs(v.Tagged()), LevelReasons: why,
		Kind: v.Kind(), Evidence: v.Declared.Evidence, Uncovered: v.Declared.Uncovered,
		SignedBy: v.Declared.Domain, Feedback: v.Override, ExemptSender: v.ExemptSender,
		VolumeSource: "the store as it is now; this message's own recipients are not added",
	}
	return r
}

// maxTextWords bounds the canonical words WriteText prints.
const maxTextWords = 80

// WriteText writes the report for a person.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	if r.Name != "" {
		fmt.Fprintf(&b, "== %s\n", r.Name)
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "store: %s\n", r.Error)
	}
	b.WriteString("What the reader sees\n")
	fmt.Fprintf(&b, "  Subject: %s\n", r.Text.Subject)
	for _, p := range r.Text.Parts {
		fmt.Fprintf(&b, "  %s:\n", p.ContentType)
		for _, l := range strings.Split(strings.TrimRight(p.Text, "\n"), "\n") {
			fmt.Fprintf(&b, "    | %s\n", l)
		}
	}
	if len(r.Text.LinkDomains) > 0 {
		fmt.Fprintf(&b, "  links to: %s\n", strings.Join(r.Text.LinkDomains, ", "))
	}
	if len(r.Text.RemoteImages) > 0 {
		fmt.Fprintf(&b, "  remote images: %s\n", strings.Join(r.Text.RemoteImages, ", "))
	}
	for _, d := range r.Text.Defects {
		fmt.Fprintf(&b, "  defect: %s\n", d)
	}
	b.WriteString("Removed or normalised\n")
	if len(r.Normalised) == 0 {
		b.WriteString("  nothing\n")
	}
	for _, c := range r.Normalised {
		fmt.Fprintf(&b, "  %d %s: %s\n", c.Count, c.What, c.Why)
	}
	words := r.Words
	more := ""
	if len(words) > maxTextWords {
		words, more = words[:maxTextWords], fmt.Sprintf(" … (%d more)", len(r.Words)-maxTextWords)
	}
	fmt.Fprintf(&b, "Canonical words (%d): %s%s\n", len(r.Words), strings.Join(words, " "), more)
	b.WriteString("Families\n")
	for _, f := range r.Families {
		if len(f.Keys) == 0 {
			fmt.Fprintf(&b, "  %-13s declined: %s", f.Name, f.Declined)
			if f.Detail != "" {
				fmt.Fprintf(&b, " (%s)", f.Detail)
			}
			b.WriteString("\n")
			continue
		}
		fmt.Fprintf(&b, "  %-13s volume %d of threshold %d, %d keys", f.Name, f.Volume, f.Threshold, len(f.Keys))
		if f.Detail != "" {
			fmt.Fprintf(&b, " (%s)", f.Detail)
		}
		b.WriteString("\n")
		for _, k := range f.Keys {
			fmt.Fprintf(&b, "    %s  volume %d", k.ID, k.Volume)
			if k.NotBulk+k.Bulk > 0 {
				fmt.Fprintf(&b, "  votes: %d not bulk, %d bulk", k.NotBulk, k.Bulk)
			}
			b.WriteString("\n")
		}
	}
	if c := r.Campaign; c != nil {
		fmt.Fprintf(&b, "Campaign %08x: %d recipients, %d networks, %d senders, first seen %s\n",
			c.ID, c.Recipients, c.Networks, c.Senders, c.FirstSeen.Format(time.RFC3339))
		if c.NotBulk+c.Bulk > 0 {
			fmt.Fprintf(&b, "  votes: %d not bulk, %d bulk\n", c.NotBulk, c.Bulk)
		}
	} else {
		b.WriteString("Campaign: none in the store yet\n")
	}
	v := r.Verdict
	b.WriteString("Verdict\n")
	fmt.Fprintf(&b, "  header: %s\n", v.Header)
	fmt.Fprintf(&b, "  level %d: %s\n", v.Level, strings.Join(v.LevelReasons, "; "))
	fmt.Fprintf(&b, "  kind: %s", v.Kind)
	if len(v.Evidence) > 0 {
		fmt.Fprintf(&b, " (%s, signed by %s)", strings.Join(v.Evidence, ", "), v.SignedBy)
	}
	if len(v.Uncovered) > 0 {
		fmt.Fprintf(&b, "; not covered by a verified signature: %s", strings.Join(v.Uncovered, ", "))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  volumes: %s\n", v.VolumeSource)
	if v.ExemptSender != "" {
		fmt.Fprintf(&b, "  exempt: the site's verifier passed the DKIM signature of %s, in actions.except_senders, and From is in that domain: counted, never tagged or routed\n", v.ExemptSender)
	}
	if v.Bulk {
		// The admin reading this has usually been asked about a false tag.
		b.WriteString("  not bulk to a recipient? her \"not bulk\" vote (docs/feedback.md) exempts its copies for her, and for everyone once feedback.global_voters users voted so; " +
			"actions.except_recipients or except_domains exempt her always; actions.except_senders exempts the mail of a sender whose DKIM domain the site's verifier passed; a higher policy.threshold tags later\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
