package feedback

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/internal/ratelog"
	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// Analyzer computes a message's keys: the daemon's detect.Engine.
type Analyzer interface {
	Analyze(msg *detect.Message) *detect.Analysis
	StoreID(k signature.Key) string
}

// VoteRecorder stores votes.
type VoteRecorder interface {
	RecordVote(ctx context.Context, v store.Vote) error
}

// Observer is told about votes; the daemon's metrics implement it (see
// detect.Observer for why each package defines its own).
type Observer interface {
	Vote(kind string)               // a vote recorded: not_bulk, bulk
	FeedbackRejected(reason string) // feedback not recorded, by Reason*
	Error(stage string)             // StageFeedback: the store failed
}

// StageFeedback is the stage Observer.Error is given when a vote could not
// be stored.
const StageFeedback = "feedback"

type nop struct{}

func (nop) Vote(string)             {}
func (nop) FeedbackRejected(string) {}
func (nop) Error(string)            {}

// Rejection reasons, the values of bulkmilter_feedback_rejected_total's
// reason label.
const (
	ReasonUntrusted   = "untrusted"
	ReasonRateLimited = "rate_limited"
	ReasonInvalid     = "invalid"
	ReasonUnsigned    = "unsigned"
	ReasonStoreError  = "store_error"
)

// maxVoterLen bounds a voter identity (an address is at most 254 bytes).
const maxVoterLen = 320

// Report is a message that carries the feedback header, with what the
// MTA vouches for: the SASL login, and the envelope sender and client
// address in Message.
type Report struct {
	Value    string // the header's value, e.g. "not-bulk"
	AuthUser string // the SASL login, empty when not authenticated
	Message  *detect.Message
	Logger   *slog.Logger

	// Set by Handle for the message's log line: the voter (masked), how
	// the report was trusted ("sasl", "network"), the vote's kind and,
	// when it was not recorded, why (a Reason*).
	Voter, TrustedBy, Kind, Rejected string
}

// Outcome is what a Handler made of a report.
type Outcome int8

const (
	// Ignored: not feedback the handler accepts (an untrusted sender). The
	// message is checked like any other; the feedback header is removed.
	Ignored Outcome = iota
	// Consumed: feedback from a trusted sender, recorded or refused
	// (invalid, rate limited). feedback.keep decides whether it is
	// discarded or delivered (without the feedback header).
	Consumed
	// Retry: trusted feedback whose vote could not be recorded now (the
	// store failed). The MTA is told to try again later, so the vote is
	// not lost.
	Retry
)

// String names the outcome for logs.
func (o Outcome) String() string {
	switch o {
	case Consumed:
		return "consumed"
	case Retry:
		return "retry"
	}
	return "ignored"
}

// Options configure a Handler: the feedback section of the configuration,
// parsed, and what the handler works with.
type Options struct {
	// TrustAuthenticated accepts reports from SASL-authenticated senders;
	// the voter is the login (feedback.trust_authenticated).
	TrustAuthenticated bool
	// TrustedNetworks accepts reports from these client networks; the
	// voter is the envelope sender (feedback.trusted_networks).
	TrustedNetworks []netip.Prefix
	// LoginDomain completes a voter without a domain (feedback.login_domain).
	LoginDomain string
	// RateLimit is the most votes a voter may cast per hour.
	RateLimit int
	// SubjectTag is actions.subject_tag, removed from a reported Subject.
	SubjectTag string
	// StoreTimeout bounds the store call of one vote.
	StoreTimeout time.Duration
	// Limits, VerdictHeader and FeedbackHeader are the daemon's: the
	// attached message is read with them as if the MTA had sent it.
	Limits                        detect.Limits
	VerdictHeader, FeedbackHeader string

	Engine Analyzer
	Store  VoteRecorder
	// Limiter is shared across reloads; nil makes a new one.
	Limiter  *Limiter
	Observer Observer // nil observes nothing
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Handler records the votes carried by feedback reports. It is safe for
// concurrent use.
type Handler struct {
	opt       Options
	limiter   *Limiter
	met       Observer
	now       func() time.Time
	untrusted ratelog.Sampler
}

// New returns a handler.
func New(o Options) (*Handler, error) {
	if o.Engine == nil || o.Store == nil {
		return nil, errors.New("feedback: engine and store are required")
	}
	h := &Handler{opt: o, limiter: o.Limiter, met: o.Observer, now: o.Now, untrusted: ratelog.Sampler{Every: time.Minute}}
	if h.limiter == nil {
		h.limiter = NewLimiter(o.RateLimit, 0)
	} else {
		h.limiter.SetRate(o.RateLimit)
	}
	if h.met == nil {
		h.met = nop{}
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.opt.StoreTimeout <= 0 {
		h.opt.StoreTimeout = 500 * time.Millisecond
	}
	return h, nil
}

// ParseKind reads a feedback header value: "not-bulk" or "bulk", in any
// case, with any whitespace (folding included) around or inside.
func ParseKind(value string) (store.VoteKind, bool) {
	switch strings.ToLower(strings.Join(strings.Fields(value), "")) {
	case "not-bulk":
		return store.VoteNotBulk, true
	case "bulk":
		return store.VoteBulk, true
	}
	return store.VoteNone, false
}

// Handle records the vote a report carries, when its sender is trusted.
func (h *Handler) Handle(ctx context.Context, r *Report) Outcome {
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	voter, via, trusted := h.trust(r)
	if !trusted {
		h.met.FeedbackRejected(ReasonUntrusted)
		if n, ok := h.untrusted.Allow(h.now()); ok {
			log.Warn("feedback header from an untrusted sender; removed, message checked as usual",
				"client_addr", r.Message.Client.String(), "authenticated", r.AuthUser != "", "since_last_report", n)
		}
		return Ignored
	}
	r.Voter, r.TrustedBy = maskAddress(voter), via
	log = log.With("voter", r.Voter, "trusted_by", via)
	reject := func(reason, msg string, args ...any) Outcome {
		h.met.FeedbackRejected(reason)
		r.Rejected = reason
		log.Warn(msg, append(args, "reason", reason)...)
		return Consumed
	}

	kind, ok := ParseKind(r.Value)
	if !ok {
		return reject(ReasonInvalid, "feedback not recorded: value is not \"not-bulk\" or \"bulk\"", "value", truncate(r.Value, 40))
	}
	r.Kind = kind.String()
	if voter == "" || len(voter) > maxVoterLen {
		return reject(ReasonInvalid, "feedback not recorded: no usable voter (empty or overlong envelope sender or login)")
	}
	if !h.limiter.Allow(voter, h.now()) {
		return reject(ReasonRateLimited, "feedback not recorded: voter over feedback.rate_limit", "rate_limit", h.opt.RateLimit)
	}

	msg, attached := h.reported(r.Message)
	msg.Recipients = []string{voter}
	if h.opt.SubjectTag != "" {
		msg.Header = untagSubject(msg.Header, h.opt.SubjectTag)
	}
	a := h.opt.Engine.Analyze(msg)
	if len(a.Keys) == 0 {
		return reject(ReasonUnsigned, "feedback not recorded: no signature family could sign the reported message", "attached", attached)
	}
	ids := make([]string, len(a.Keys))
	for i, k := range a.Keys {
		ids[i] = h.opt.Engine.StoreID(k)
	}

	sctx, cancel := context.WithTimeout(ctx, h.opt.StoreTimeout)
	defer cancel()
	if err := h.opt.Store.RecordVote(sctx, store.Vote{Keys: ids, Voter: voter, Kind: kind, Time: h.now()}); err != nil {
		h.limiter.Refund(voter)
		h.met.FeedbackRejected(ReasonStoreError)
		r.Rejected = ReasonStoreError
		h.met.Error(StageFeedback)
		log.Warn("feedback not recorded: store failed; the MTA is asked to retry", "err", err)
		return Retry
	}
	h.met.Vote(strings.ReplaceAll(kind.String(), "-", "_"))
	// Debug: the milter logs the message's info line, with the voter.
	log.Debug("feedback recorded", "kind", kind.String(), "keys", len(ids), "attached", attached)
	return Consumed
}

// trust decides whether a report counts and who the voter is: the SASL
// login when authenticated senders are trusted, else the envelope sender
// when the client is in a trusted network. Nothing in the message itself
// names the voter.
func (h *Handler) trust(r *Report) (voter, via string, ok bool) {
	if r.AuthUser != "" && h.opt.TrustAuthenticated {
		return Voter(r.AuthUser, h.opt.LoginDomain), "sasl", true
	}
	if addr := r.Message.Client; addr.IsValid() {
		for _, p := range h.opt.TrustedNetworks {
			if p.Contains(addr) {
				return Voter(r.Message.Sender, h.opt.LoginDomain), "network", true
			}
		}
	}
	return "", "", false
}

// Voter normalises a voter's identity like recipients (detect.
// NormaliseAddress) and completes one without a domain with loginDomain
// (feedback.login_domain), so that it names the address her mail arrives
// with. The votes command uses it too.
func Voter(raw, loginDomain string) string {
	v := detect.NormaliseAddress(raw)
	if v != "" && !strings.Contains(v, "@") && loginDomain != "" {
		v += "@" + strings.ToLower(loginDomain)
	}
	return v
}

// untagSubject removes the verdict's subject tag (actions.subject_tag),
// which the milter put on the copy the user received after signing it.
func untagSubject(h textproto.Header, tag string) textproto.Header {
	subj := h.Get("Subject")
	rest, ok := strings.CutPrefix(strings.TrimSpace(subj), tag)
	if !ok {
		return h
	}
	h = h.Copy()
	h.Set("Subject", strings.TrimPrefix(rest, " "))
	return h
}

// maskAddress keeps logs free of full addresses: "a***@example.com".
func maskAddress(a string) string {
	local, domain, ok := strings.Cut(a, "@")
	if local == "" {
		return a
	}
	m := local[:1] + "***"
	if ok {
		m += "@" + domain
	}
	return m
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
