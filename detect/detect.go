// Package detect is the one pipeline shared by the daemon and the offline
// commands (scan, eval, bench), so that what is measured offline is exactly
// what runs online:
//
//	raw message → mailtext.Text → signature.Doc → keys → store → verdict
//
// It owns the policy that turns volumes and feedback votes into a verdict:
// a message is bulk when any enabled family's volume (the highest volume
// over its keys) reaches that family's threshold, unless feedback
// overrides it.
package detect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/mailtext"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// Store is what the pipeline needs from a volume store.
type Store interface {
	Observe(ctx context.Context, o store.Observation) (store.Result, error)
	RecordVote(ctx context.Context, v store.Vote) error
}

// Options configure an Engine.
type Options struct {
	Limits mailtext.Limits
	// Set holds the enabled signature families; its version prefixes every
	// store id, so counts never mix across canonicalisation, lexicon,
	// secret or parameter changes.
	Set   *signature.Set
	Store Store
	// Thresholds holds the bulk threshold of each enabled family.
	Thresholds map[signature.Family]int
	// StoreTimeout bounds the store calls for one message.
	StoreTimeout time.Duration
	// StripRecipient removes the recipients' names and addresses from the
	// text before signing.
	StripRecipient bool
	// GlobalVoters is the number of distinct voters after which a vote on a
	// key applies to every recipient.
	GlobalVoters int
	Metrics      *metrics.Metrics // may be nil
}

// Engine runs the pipeline. It is safe for concurrent use.
type Engine struct {
	opt Options
}

// New returns an engine.
func New(opt Options) (*Engine, error) {
	if opt.Set == nil || len(opt.Set.Signers()) == 0 {
		return nil, errors.New("detect: no signature family enabled")
	}
	if opt.Store == nil {
		return nil, errors.New("detect: no store")
	}
	for _, s := range opt.Set.Signers() {
		if opt.Thresholds[s.Family()] <= 0 {
			return nil, fmt.Errorf("detect: no threshold for family %s", s.Family())
		}
	}
	if opt.StoreTimeout <= 0 {
		opt.StoreTimeout = 500 * time.Millisecond
	}
	if opt.GlobalVoters <= 0 {
		opt.GlobalVoters = 3
	}
	return &Engine{opt: opt}, nil
}

// Message is one message as the MTA handed it over.
type Message struct {
	// Header holds the top-level header fields in order.
	Header textproto.Header
	// Body is the (possibly truncated) body.
	Body io.Reader
	// Recipients are the envelope recipients.
	Recipients []string
	// Truncated reports that Body holds only the first part of the body.
	Truncated bool
	// Time is when the message arrived; zero means now. Offline replays
	// (scan, eval) set it so that the store's window applies as it would
	// have.
	Time time.Time
}

// Analysis is what the pure part of the pipeline made of a message.
type Analysis struct {
	Text     *mailtext.Text
	Doc      *signature.Doc
	Keys     []signature.Key
	Explains []signature.Explain
}

// Analyze extracts, canonicalises and signs a message. It does no I/O
// beyond reading msg.Body.
func (e *Engine) Analyze(msg *Message) *Analysis {
	text := mailtext.ExtractParts(msg.Header, msg.Body, e.opt.Limits)
	src := signature.Source{Subject: text.Subject, Domains: text.Domains}
	for _, p := range text.Parts {
		src.Parts = append(src.Parts, p.Text)
	}
	if e.opt.StripRecipient {
		src.Strip = personalWords(msg.Header, msg.Recipients)
	}
	doc := signature.Canonicalize(src)
	a := &Analysis{Text: text, Doc: doc}
	a.Keys, a.Explains = e.opt.Set.Sign(doc, nil, nil)
	return a
}

// StoreID returns the id a key is counted under in the store.
func (e *Engine) StoreID(k signature.Key) string { return e.opt.Set.StoreID(k) }

// Verdict is the pipeline's answer for one message.
type Verdict struct {
	// Bulk is true when the message is bulk for at least one recipient.
	Bulk bool
	// Family is the family that decided a bulk verdict, or the family with
	// the highest volume relative to its threshold otherwise.
	Family signature.Family
	// Volume is that family's volume.
	Volume int64
	// Volumes holds every signing family's volume.
	Volumes map[signature.Family]int64
	// Override says when feedback changed what volume alone decided:
	// "not-bulk" or "bulk", for everyone ("global") or for some recipients
	// ("user").
	Override string
	// NotBulkFor lists recipients whose own "not bulk" vote exempts them
	// from a bulk verdict; BulkFor lists those whose "bulk" vote makes a
	// message bulk for them.
	NotBulkFor, BulkFor []string
	// Unsigned is true when no family could sign the message.
	Unsigned bool
	// Err is set when the store failed; the caller applies its failure
	// policy. Bulk is false then.
	Err error
	// Analysis is what the verdict was computed from.
	Analysis *Analysis
	// IDs are the store ids of Analysis.Keys.
	IDs []string
}

// Check runs the whole pipeline for one message: analysis, one store round
// trip and the policy. A store failure is reported in Verdict.Err, never as
// a panic or a hang: the store calls are bounded by the store timeout.
func (e *Engine) Check(ctx context.Context, msg *Message) Verdict {
	start := time.Now()
	a := e.Analyze(msg)
	v := e.decide(ctx, a, normaliseAll(msg.Recipients), msg.Time)
	e.record(v, msg, time.Since(start))
	return v
}

func (e *Engine) decide(ctx context.Context, a *Analysis, rcpts []string, at time.Time) Verdict {
	v := Verdict{Analysis: a, Volumes: map[signature.Family]int64{}}
	if len(a.Keys) == 0 {
		v.Unsigned = true
		return v
	}
	ids := make([]string, len(a.Keys))
	for i, k := range a.Keys {
		ids[i] = e.StoreID(k)
	}
	v.IDs = ids
	ctx, cancel := context.WithTimeout(ctx, e.opt.StoreTimeout)
	defer cancel()
	res, err := e.opt.Store.Observe(ctx, store.Observation{Keys: ids, Recipients: rcpts, Time: at})
	if err == nil && len(res.Volumes) != len(ids) {
		err = fmt.Errorf("store returned %d volumes for %d keys", len(res.Volumes), len(ids))
	}
	if err != nil {
		v.Err = err
		return v
	}

	// Volume alone: the highest volume of each family against its threshold.
	bestRatio := -1.0
	var globalNotBulk, globalBulk bool
	for i, k := range a.Keys {
		vol := res.Volumes[i]
		if vol > v.Volumes[k.Family] {
			v.Volumes[k.Family] = vol
		}
		if i < len(res.Votes) {
			if res.Votes[i].NotBulk >= int64(e.opt.GlobalVoters) {
				globalNotBulk = true
			}
			if res.Votes[i].Bulk >= int64(e.opt.GlobalVoters) {
				globalBulk = true
			}
		}
	}
	for _, s := range e.opt.Set.Signers() {
		f := s.Family()
		vol, ok := v.Volumes[f]
		if !ok {
			continue
		}
		th := e.opt.Thresholds[f]
		ratio := float64(vol) / float64(th)
		if vol >= int64(th) && !v.Bulk {
			v.Bulk, v.Family, v.Volume, bestRatio = true, f, vol, ratio
		} else if !v.Bulk && ratio > bestRatio {
			v.Family, v.Volume, bestRatio = f, vol, ratio
		}
	}

	// Feedback: a global vote beats volume; a user's own vote beats both
	// for that user.
	switch {
	case v.Bulk && globalNotBulk && !globalBulk:
		v.Bulk, v.Override = false, "global not-bulk"
	case !v.Bulk && globalBulk && !globalNotBulk:
		v.Bulk, v.Override = true, "global bulk"
	}
	for _, r := range rcpts {
		switch res.UserVotes[r] {
		case store.VoteNotBulk:
			if v.Bulk {
				v.NotBulkFor = append(v.NotBulkFor, r)
			}
		case store.VoteBulk:
			if !v.Bulk {
				v.BulkFor = append(v.BulkFor, r)
			}
		}
	}
	if v.Bulk && len(v.NotBulkFor) > 0 {
		v.Override = "user not-bulk"
		if len(v.NotBulkFor) == len(rcpts) {
			v.Bulk = false
		}
	}
	if !v.Bulk && len(v.BulkFor) > 0 {
		v.Override, v.Bulk = "user bulk", true
	}
	return v
}

func (e *Engine) record(v Verdict, msg *Message, d time.Duration) {
	m := e.opt.Metrics
	if m == nil {
		return
	}
	for _, ex := range v.Analysis.Explains {
		outcome := "signed"
		if ex.Keys == 0 {
			outcome = declineCode(ex.Declined)
		}
		m.Signature(ex.Family.String(), outcome)
	}
	for f, vol := range v.Volumes {
		m.Volume(f.String(), vol)
	}
	for _, d := range v.Analysis.Text.Defects {
		m.Defect(string(d.Kind))
	}
	if msg.Truncated || v.Analysis.Text.Stats.TruncatedBytes > 0 {
		m.Truncated()
	}
	switch {
	case v.Err != nil:
		m.Error(metrics.StageStore)
		m.Message(metrics.VerdictError, d)
	case v.Unsigned:
		m.Message(metrics.VerdictUnsigned, d)
	case v.Bulk:
		m.Message(metrics.VerdictBulk, d)
	default:
		m.Message(metrics.VerdictNotBulk, d)
	}
}

// declineCode turns a signer's reason into a bounded metric label: the
// reason's first words up to a colon.
func declineCode(reason string) string {
	if reason == "" {
		return "declined"
	}
	if i := strings.IndexAny(reason, ":(0123456789"); i > 0 {
		reason = reason[:i]
	}
	reason = strings.TrimSpace(reason)
	if len(reason) > 40 {
		reason = reason[:40]
	}
	return strings.ReplaceAll(reason, " ", "_")
}

// Header formats the verdict header's value: it always starts with "yes"
// or "no", then says why. Keys are listed only when revealKeys is set:
// they would tell a sender what to change.
func (v Verdict) Header(revealKeys bool) string {
	var b strings.Builder
	if v.Bulk {
		b.WriteString("yes")
	} else {
		b.WriteString("no")
	}
	switch {
	case v.Err != nil:
		b.WriteString("; error=store-unavailable")
	case v.Unsigned:
		b.WriteString("; unsigned")
	default:
		b.WriteString("; family=" + v.Family.String())
		b.WriteString("; volume=" + strconv.FormatInt(v.Volume, 10))
	}
	if v.Override != "" {
		b.WriteString("; feedback=" + strings.ReplaceAll(v.Override, " ", "-"))
	}
	if revealKeys && len(v.IDs) > 0 {
		b.WriteString("; keys=" + strings.Join(v.IDs, ","))
	}
	return b.String()
}
