package milter

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	gomilter "github.com/d--j/go-milter"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/detect"
)

// apply turns a verdict into modifications of the message. Incoming copies
// of the verdict and feedback headers go first, so a sender can forge
// neither.
func (s *session) apply(m gomilter.Modifier, v detect.Verdict, log *slog.Logger) error {
	cfg := s.state.Config
	met := s.srv.opt.Metrics
	errs := s.removeIncoming(m, log)

	routed, bulkFor := routedRecipients(v, s.rcpts, &cfg.Actions)
	value := v.Header(cfg.Actions.RevealKeys)
	if v.Bulk && bulkFor == 0 {
		// Every recipient is exempt: for them the message is not bulk.
		value = "no" + strings.TrimPrefix(value, "yes") + "; exempt"
	}
	errs = append(errs, m.AddHeader(cfg.Actions.Header, value))
	met.Action("header")

	if len(routed) > 0 {
		if detail := cfg.Actions.RecipientDetail; detail != "" {
			for _, r := range routed {
				to, ok := withDetail(r, detail)
				if !ok || alreadyRouted(r, to, detail) {
					continue
				}
				errs = append(errs, m.DeleteRecipient(r), m.AddRecipient(to, ""))
			}
			met.Action("recipient_detail")
		}
	}
	// The Subject tag and quarantine change the one copy every recipient
	// gets, so they apply only when the message is routed for all of them:
	// an exempt recipient's mail is never tagged or held.
	if len(routed) > 0 && len(routed) == len(s.rcpts) {
		if tag := cfg.Actions.SubjectTag; tag != "" {
			errs = append(errs, s.tagSubject(m, tag))
			met.Action("subject_tag")
		}
		if cfg.Actions.Quarantine {
			errs = append(errs, m.Quarantine(fmt.Sprintf("bulk: family=%s volume=%d", v.Family, v.Volume)))
			met.Action("quarantine")
		}
	} else if len(routed) > 0 && (cfg.Actions.SubjectTag != "" || cfg.Actions.Quarantine) {
		log.Debug("bulk for some recipients only; subject tag and quarantine skipped",
			"routed", len(routed), "recipients", len(s.rcpts))
	}
	return errors.Join(errs...)
}

// removeIncoming deletes every incoming copy of the verdict and feedback
// headers.
func (s *session) removeIncoming(m gomilter.Modifier, log *slog.Logger) []error {
	cfg := s.state.Config
	var errs []error
	// Delete from the last copy back, so indexes of earlier copies hold.
	for i := s.ownHeaders; i >= 1; i-- {
		errs = append(errs, m.ChangeHeader(i, cfg.Actions.Header, ""))
	}
	for i := s.fbHeaders; i >= 1; i-- {
		errs = append(errs, m.ChangeHeader(i, cfg.Feedback.Header, ""))
	}
	if s.ownHeaders+s.fbHeaders > 0 {
		s.srv.opt.Metrics.Action("remove_forged")
		// Debug: a sender can add these to every message; the feedback
		// handler reports untrusted feedback, rate-limited.
		log.Debug("removed incoming verdict or feedback headers", "verdict_headers", s.ownHeaders, "feedback_headers", s.fbHeaders)
	}
	return errs
}

// routedRecipients returns the recipients a message is routed for, and how
// many recipients it is bulk for (the routed ones plus those that get the
// verdict header only). It is bulk for every recipient when it is bulk for
// those without votes of their own (the base verdict), but the exceptions
// and those whose own "not bulk" votes exempt them; else for those whose
// own "bulk" votes make it so.
func routedRecipients(v detect.Verdict, rcpts []string, a *config.Actions) (routed []string, bulkFor int) {
	exempt := map[string]bool{}
	for _, r := range v.NotBulkFor {
		exempt[r] = true
	}
	wanted := map[string]bool{}
	for _, r := range v.BulkFor {
		wanted[r] = true
	}
	for _, r := range rcpts {
		n := detect.NormaliseAddress(r)
		if matches(n, a.ExceptRecipients, a.ExceptDomains) {
			continue
		}
		if !(v.Base && !exempt[n]) && !wanted[n] {
			continue
		}
		bulkFor++
		if !matches(n, a.HeaderOnlyRecipients, a.HeaderOnlyDomains) {
			routed = append(routed, r)
		}
	}
	return routed, bulkFor
}

// matches reports whether a normalised address is one of addrs or in one of
// domains; a domain with a leading dot matches its subdomains.
// An address with a +detail matches its base address too.
func matches(addr string, addrs, domains []string) bool {
	local, domain, _ := strings.Cut(addr, "@")
	base, _, _ := strings.Cut(local, "+")
	base += "@" + domain
	for _, r := range addrs {
		if strings.EqualFold(r, addr) || strings.EqualFold(r, base) {
			return true
		}
	}
	for _, d := range domains {
		if sub, ok := strings.CutPrefix(d, "."); ok {
			if len(domain) > len(sub) && strings.HasSuffix(strings.ToLower(domain), "."+strings.ToLower(sub)) {
				return true
			}
			continue
		}
		if strings.EqualFold(d, domain) {
			return true
		}
	}
	return false
}

// withDetail returns user+detail@domain. An existing detail is replaced:
// Postfix and Dovecot split the local part at the first delimiter.
func withDetail(addr, detail string) (string, bool) {
	local, domain, ok := strings.Cut(detect.NormaliseAddress(addr), "@")
	if !ok || local == "" {
		return "", false
	}
	local, _, _ = strings.Cut(local, "+")
	return local + "+" + detail + "@" + domain, true
}

// alreadyRouted reports whether rcpt already is to, with the detail in
// the same case (mailbox names are case-sensitive).
func alreadyRouted(rcpt, to, detail string) bool {
	return strings.EqualFold(detect.NormaliseAddress(rcpt), to) && strings.Contains(rcpt, "+"+detail+"@")
}

func (s *session) tagSubject(m gomilter.Modifier, tag string) error {
	if s.subject == 0 {
		return m.AddHeader("Subject", tag)
	}
	cur := s.header.Get("Subject")
	if strings.HasPrefix(strings.TrimSpace(cur), tag) {
		return nil
	}
	return m.ChangeHeader(1, "Subject", tag+" "+strings.TrimSpace(cur))
}
