package declared

import (
	"errors"
	"strings"
)

// Signature is what a DKIM-Signature field (RFC 6376 §3.5) says about
// itself: who signed, with which key, and which header fields it covers.
type Signature struct {
	Domain   string // d=, lower case
	Selector string // s=, lower case
	B        string // b=, blanks removed
	// Headers are the covered field names (h=), lower case, in order; a
	// name listed twice covers two instances.
	Headers []string
}

// ParseSignature reads a DKIM-Signature value's tag list. It does not
// verify anything: that is the verifier's job, reported in
// Authentication-Results.
func ParseSignature(v string) (Signature, error) {
	var s Signature
	for _, tag := range strings.Split(v, ";") {
		name, val, ok := strings.Cut(tag, "=")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch strings.TrimSpace(name) {
		case "d":
			s.Domain = strings.ToLower(val)
		case "s":
			s.Selector = strings.ToLower(val)
		case "b":
			s.B = strings.Join(strings.Fields(val), "")
		case "h":
			for _, h := range strings.Split(val, ":") {
				if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
					s.Headers = append(s.Headers, h)
				}
			}
		}
	}
	if s.Domain == "" || len(s.Headers) == 0 {
		return s, errors.New("dkim-signature: no d= or h= tag")
	}
	return s, nil
}

// covers reports whether the signature covers a field of the name.
func (s Signature) covers(name string) bool {
	for _, h := range s.Headers {
		if strings.EqualFold(h, name) {
			return true
		}
	}
	return false
}

// Header is what Judge reads of a message's header: the values of the
// fields of a name, in order (textproto.Header has it).
type Header interface {
	Values(name string) []string
}

// Evidence kinds: the declarations Judge looks for.
const (
	OneClick   = "one-click"   // List-Unsubscribe with List-Unsubscribe-Post: List-Unsubscribe=One-Click (RFC 8058)
	ListID     = "list-id"     // List-Id (RFC 2919)
	Precedence = "precedence"  // Precedence: bulk or list
	FeedbackID = "feedback-id" // an ESP's Feedback-ID (Gmail's Feedback Loop)
)

// Judgement is what Judge found.
type Judgement struct {
	// Declared is true when at least one declaration is covered by a
	// signature that verified.
	Declared bool
	// Domain is the d= of the signature that covered the evidence, or of
	// the first that verified.
	Domain string
	// Evidence lists the covered declarations (OneClick, ListID, …).
	Evidence []string
	// Uncovered lists declarations present but not covered by a verified
	// signature: a claim anybody could have written.
	Uncovered []string
	// Passed counts the signatures the trusted results say verified,
	// when the message declares anything (else nothing is parsed).
	Passed int
}

// Judge decides whether a message declares itself as bulk. trusted holds
// the Authentication-Results values of the site's own authserv-id that the
// caller trusts (see the package doc); only their dkim=pass results count,
// each matched to the DKIM-Signature field it names. The first trusted
// field with a dkim result is the verifier's: a later one's dkim results
// are ignored, so a forged field below it cannot turn its fail into a pass.
func Judge(h Header, trusted []string) Judgement {
	var j Judgement
	present := declarations(h)
	if len(present) == 0 {
		return j // nothing declared: no signature to look at
	}
	var sigs []Signature
	for _, v := range h.Values("DKIM-Signature") {
		if s, err := ParseSignature(v); err == nil {
			sigs = append(sigs, s)
		}
	}
	var passed []Signature
	verifierPasses(trusted, func(r Result) {
		if s, ok := named(r, sigs); ok {
			passed = append(passed, s)
		}
	})
	j.Passed = len(passed)
	if len(passed) > 0 {
		j.Domain = passed[0].Domain
	}
	for _, d := range present {
		covered := false
		for _, s := range passed {
			if coversAll(s, d.fields) {
				covered = true
				if len(j.Evidence) == 0 {
					j.Domain = s.Domain
				}
				break
			}
		}
		if covered {
			j.Evidence = append(j.Evidence, d.kind)
		} else {
			j.Uncovered = append(j.Uncovered, d.kind)
		}
	}
	j.Declared = len(j.Evidence) > 0
	return j
}

// verifierPasses calls pass with each dkim=pass result of the verifier's
// field: the first trusted field with a dkim result. A later one's dkim
// results are ignored, so a forged field below it cannot turn its fail
// into a pass.
func verifierPasses(trusted []string, pass func(Result)) {
	for _, v := range trusted {
		ar, err := ParseAuthResults(v)
		if err != nil {
			continue
		}
		dkim := false
		for _, r := range ar.Results {
			if r.Method != "dkim" {
				continue
			}
			dkim = true
			if r.Value == "pass" {
				pass(r)
			}
		}
		if dkim {
			return
		}
	}
}

// declaration is a kind of evidence and the fields a signature must cover
// for it to count.
type declaration struct {
	kind   string
	fields []string
}

// declarations returns what the header declares, signed or not.
func declarations(h Header) []declaration {
	var out []declaration
	if len(h.Values("List-Unsubscribe")) > 0 && oneClick(h.Values("List-Unsubscribe-Post")) {
		// RFC 8058 §4: both fields must be covered by the signature.
		out = append(out, declaration{OneClick, []string{"List-Unsubscribe", "List-Unsubscribe-Post"}})
	}
	if len(h.Values("List-Id")) > 0 {
		out = append(out, declaration{ListID, []string{"List-Id"}})
	}
	for _, p := range h.Values("Precedence") {
		if p = strings.ToLower(strings.TrimSpace(p)); p == "bulk" || p == "list" {
			out = append(out, declaration{Precedence, []string{"Precedence"}})
			break
		}
	}
	if len(h.Values("Feedback-ID")) > 0 {
		out = append(out, declaration{FeedbackID, []string{"Feedback-ID"}})
	}
	return out
}

func oneClick(posts []string) bool {
	for _, p := range posts {
		if strings.EqualFold(strings.Join(strings.Fields(p), ""), "List-Unsubscribe=One-Click") {
			return true
		}
	}
	return false
}

func coversAll(s Signature, fields []string) bool {
	for _, f := range fields {
		if !s.covers(f) {
			return false
		}
	}
	return true
}

// named returns the signature a dkim result names: the same d= (header.d,
// or the domain of header.i), the same s= when header.s is given, and b=
// starting with header.b when given (OpenDKIM writes its first 8
// characters). Without header.b the result must name exactly one
// signature, or it is not matched.
func named(r Result, sigs []Signature) (Signature, bool) {
	d := strings.ToLower(r.Props["header.d"])
	if d == "" {
		if _, dom, ok := strings.Cut(r.Props["header.i"], "@"); ok {
			d = strings.ToLower(dom)
		}
	}
	sel := strings.ToLower(r.Props["header.s"])
	b := r.Props["header.b"]
	var found []Signature
	for _, s := range sigs {
		switch {
		case d == "" || s.Domain != d:
		case sel != "" && s.Selector != sel:
		case b != "" && !strings.HasPrefix(s.B, b):
		default:
			found = append(found, s)
		}
	}
	if len(found) == 1 || (b != "" && len(found) > 0) {
		return found[0], true
	}
	return Signature{}, false
}
