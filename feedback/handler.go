package feedback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/internal/ratelog"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/milter"
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

// Options configure a Handler.
type Options struct {
	// Config supplies the feedback section, actions.subject_tag and
	// policy.store_timeout.
	Config *config.Config
	Engine Analyzer
	Store  VoteRecorder
	// Limiter is shared across reloads; nil makes a new one.
	Limiter *Limiter
	Metrics *metrics.Metrics // may be nil
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Handler records the votes carried by feedback messages. It implements
// milter.FeedbackHandler and is safe for concurrent use.
type Handler struct {
	fb         config.Feedback
	subjectTag string
	timeout    time.Duration
	trusted    []netip.Prefix
	engine     Analyzer
	store      VoteRecorder
	limiter    *Limiter
	met        *metrics.Metrics
	now        func() time.Time
	untrusted  ratelog.Sampler
}

// New returns a handler.
func New(o Options) (*Handler, error) {
	if o.Config == nil || o.Engine == nil || o.Store == nil {
		return nil, errors.New("feedback: config, engine and store are required")
	}
	h := &Handler{
		fb:         o.Config.Feedback,
		subjectTag: o.Config.Actions.SubjectTag,
		timeout:    o.Config.Policy.StoreTimeout.D(),
		engine:     o.Engine,
		store:      o.Store,
		limiter:    o.Limiter,
		met:        o.Metrics,
		now:        o.Now,
		untrusted:  ratelog.Sampler{Every: time.Minute},
	}
	for i, n := range h.fb.TrustedNetworks {
		p, err := config.ParseNetwork(n)
		if err != nil {
			return nil, fmt.Errorf("feedback.trusted_networks[%d]: %w", i, err)
		}
		h.trusted = append(h.trusted, p)
	}
	if h.limiter == nil {
		h.limiter = NewLimiter(h.fb.RateLimit, 0)
	} else {
		h.limiter.SetRate(h.fb.RateLimit)
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.timeout <= 0 {
		h.timeout = 500 * time.Millisecond
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

// HandleFeedback implements milter.FeedbackHandler.
func (h *Handler) HandleFeedback(ctx context.Context, fb *milter.Feedback) milter.FeedbackOutcome {
	log := fb.Logger
	if log == nil {
		log = slog.Default()
	}
	voter, via, trusted := h.trust(fb)
	if !trusted {
		h.met.FeedbackRejected(ReasonUntrusted)
		if n, ok := h.untrusted.Allow(h.now()); ok {
			log.Warn("feedback header from an untrusted sender; removed, message checked as usual",
				"client_addr", fb.ClientAddr, "authenticated", fb.AuthUser != "", "since_last_report", n)
		}
		return milter.FeedbackIgnored
	}
	log = log.With("voter", maskAddress(voter), "trusted_by", via)
	reject := func(reason, msg string, args ...any) milter.FeedbackOutcome {
		h.met.FeedbackRejected(reason)
		log.Warn(msg, append(args, "reason", reason)...)
		return milter.FeedbackConsumed
	}

	kind, ok := ParseKind(fb.Value)
	if !ok {
		return reject(ReasonInvalid, "feedback not recorded: value is not \"not-bulk\" or \"bulk\"", "value", truncate(fb.Value, 40))
	}
	if voter == "" || len(voter) > maxVoterLen {
		return reject(ReasonInvalid, "feedback not recorded: no usable voter (empty or overlong envelope sender or login)")
	}
	if !h.limiter.Allow(voter, h.now()) {
		return reject(ReasonRateLimited, "feedback not recorded: voter over feedback.rate_limit", "rate_limit", h.fb.RateLimit)
	}

	msg, attached := Reported(fb.Message)
	msg.Recipients = []string{voter}
	if h.subjectTag != "" {
		msg.Header = untagSubject(msg.Header, h.subjectTag)
	}
	a := h.engine.Analyze(msg)
	if len(a.Keys) == 0 {
		return reject(ReasonUnsigned, "feedback not recorded: no signature family could sign the reported message", "attached", attached)
	}
	ids := make([]string, len(a.Keys))
	for i, k := range a.Keys {
		ids[i] = h.engine.StoreID(k)
	}

	sctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	if err := h.store.RecordVote(sctx, store.Vote{Keys: ids, Voter: voter, Kind: kind, Time: h.now()}); err != nil {
		h.limiter.Refund(voter)
		h.met.FeedbackRejected(ReasonStoreError)
		h.met.Error(metrics.StageFeedback)
		log.Warn("feedback not recorded: store failed; the MTA is asked to retry", "err", err)
		return milter.FeedbackRetry
	}
	h.met.Vote(strings.ReplaceAll(kind.String(), "-", "_"))
	log.Info("feedback recorded", "kind", kind.String(), "keys", len(ids), "attached", attached)
	return milter.FeedbackConsumed
}

// trust decides whether a report counts and who the voter is: the SASL
// login when authenticated senders are trusted, else the envelope sender
// when the client is in a trusted network. Nothing in the message itself
// names the voter.
func (h *Handler) trust(fb *milter.Feedback) (voter, via string, ok bool) {
	if fb.AuthUser != "" && h.fb.TrustAuthenticated {
		return h.normaliseVoter(fb.AuthUser), "sasl", true
	}
	if addr, ok := parseClientAddr(fb.ClientAddr); ok {
		for _, p := range h.trusted {
			if p.Contains(addr) {
				return h.normaliseVoter(fb.Sender), "network", true
			}
		}
	}
	return "", "", false
}

func (h *Handler) normaliseVoter(v string) string { return Voter(v, h.fb.LoginDomain) }

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

// parseClientAddr reads {client_addr}: Postfix sends IPv6 plain, Sendmail
// with an "IPv6:" prefix; some wrap it in brackets.
func parseClientAddr(s string) (netip.Addr, bool) {
	s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "["), "]")
	if len(s) > 5 && strings.EqualFold(s[:5], "ipv6:") {
		s = s[5:]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
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
