package milter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	gomilter "github.com/d--j/go-milter"

	"github.com/bulkmilter/bulkmilter/detect"
)

// apply turns a verdict into modifications of the message. Incoming copies
// of the verdict and feedback headers go first, so a sender can forge
// neither.
func (s *session) apply(m gomilter.Modifier, msg *detect.Message, v detect.Verdict, log *msgLogger) error {
	act := &s.state.Actions
	met := s.srv.opt.Observer
	errs := s.removeIncoming(m, log)

	routed, bulkFor := routedRecipients(v, msg.Recipients, act)
	bulk := v.Tagged()
	value := v.Header(act.RevealKeys) // "no; …; exempt=sender" for an exempt sender
	if bulk && bulkFor == 0 {
		// Every recipient is exempt: for them the message is not bulk.
		nb := v
		nb.Bulk, bulk = false, false
		value = nb.Header(act.RevealKeys) + "; exempt"
	}
	errs = append(errs, m.AddHeader(act.Header, value))
	if act.LevelHeader != "" {
		errs = append(errs, m.AddHeader(act.LevelHeader, strconv.Itoa(v.LevelAs(bulk))))
	}
	met.Action("header")

	if len(routed) > 0 {
		if detail := act.RecipientDetail; detail != "" {
			for _, r := range routed {
				if s.b.IsCut(r) {
					continue // cut at limits.AddressBytes: not the address the MTA has
				}
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
	if len(routed) > 0 && len(routed) == len(msg.Recipients) {
		if tag := act.SubjectTag; tag != "" {
			errs = append(errs, s.tagSubject(m, tag))
			met.Action("subject_tag")
		}
		if act.Quarantine {
			errs = append(errs, m.Quarantine(fmt.Sprintf("bulk: family=%s volume=%d", v.Family, v.Volume)))
			met.Action("quarantine")
		}
	} else if len(routed) > 0 && (act.SubjectTag != "" || act.Quarantine) {
		log.debug("bulk for some recipients only; subject tag and quarantine skipped",
			"routed", len(routed), "recipients", len(msg.Recipients))
	}
	return errors.Join(errs...)
}

// removeIncoming deletes every incoming copy of the verdict, level and
// feedback headers, and the Authentication-Results fields of the site's
// authserv-id that came with the message (RFC 8601 §5).
func (s *session) removeIncoming(m gomilter.Modifier, log *msgLogger) []error {
	act := &s.state.Actions
	own := s.b.VerdictHeaders()
	levels := s.b.LevelHeaders()
	fb, _ := s.b.FeedbackHeaders()
	forged := s.b.ForgedResults()
	var errs []error
	// Delete from the last copy back, so indexes of earlier copies hold.
	for i := own; i >= 1; i-- {
		errs = append(errs, m.ChangeHeader(i, act.Header, ""))
	}
	for i := levels; i >= 1; i-- {
		errs = append(errs, m.ChangeHeader(i, act.LevelHeader, ""))
	}
	for i := fb; i >= 1; i-- {
		errs = append(errs, m.ChangeHeader(i, act.FeedbackHeader, ""))
	}
	for i := len(forged) - 1; i >= 0; i-- {
		errs = append(errs, m.ChangeHeader(forged[i], "Authentication-Results", ""))
	}
	if own+levels+fb+len(forged) > 0 {
		s.srv.opt.Observer.Action("remove_forged")
		// Debug: a sender can add these to every message (the message's
		// info line counts them); the feedback handler reports untrusted
		// feedback, rate-limited.
		log.debug("removed incoming verdict, level, feedback or forged Authentication-Results headers",
			"verdict_headers", own, "level_headers", levels, "feedback_headers", fb, "forged_results", len(forged))
	}
	return errs
}

// routedRecipients returns the recipients a message is routed for, and how
// many recipients it is bulk for (the routed ones plus those that get the
// verdict header only). It is bulk for every recipient when it is bulk for
// those without votes of their own (the base verdict), but the exceptions
// and those whose own "not bulk" votes exempt them; else for those whose
// own "bulk" votes make it so. An exempt sender's message is bulk for no
// one.
func routedRecipients(v detect.Verdict, rcpts []string, a *Actions) (routed []string, bulkFor int) {
	if v.ExemptSender != "" {
		return nil, 0 // actions.except_senders: bulk for no one, whatever the votes
	}
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
		if a.Except.Match(n) {
			continue
		}
		if !(v.Base && !exempt[n]) && !wanted[n] {
			continue
		}
		bulkFor++
		if !a.HeaderOnly.Match(n) {
			routed = append(routed, r)
		}
	}
	return routed, bulkFor
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

// tagSubject prefixes the tag to the first Subject as the MTA has it
// (folding and all, whatever the limits kept for analysis), or adds a
// Subject when there is none.
func (s *session) tagSubject(m gomilter.Modifier, tag string) error {
	cur, n, kept := s.b.Subject()
	switch {
	case n == 0:
		return m.AddHeader("Subject", tag)
	case !kept:
		return nil // refused by the memory budget: never replace what is not known
	}
	cur = strings.TrimLeft(cur, " \t")
	if strings.HasPrefix(cur, tag) {
		return nil
	}
	return m.ChangeHeader(1, "Subject", tag+" "+cur)
}
