package declared

import (
	"net/mail"
	"strings"
)

// Senders is a site's allow-list of signing domains
// (actions.except_senders): a domain, or ".example.com" for the
// subdomains of example.com, as the recipient exceptions match.
type Senders struct {
	domains map[string]bool
	subs    []string // ".example.com"
}

// NewSenders returns the allow-list of the given domains, matched without
// case.
func NewSenders(domains []string) Senders {
	s := Senders{domains: map[string]bool{}}
	for _, d := range domains {
		d = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
		if sub, ok := strings.CutPrefix(d, "."); ok {
			s.subs = append(s.subs, "."+sub)
		} else if d != "" {
			s.domains[d] = true
		}
	}
	return s
}

// Empty reports whether the list holds no domain.
func (s Senders) Empty() bool { return len(s.domains) == 0 && len(s.subs) == 0 }

func (s Senders) match(d string) bool {
	if s.domains[d] {
		return true
	}
	for _, sub := range s.subs {
		if len(d) > len(sub) && strings.HasSuffix(d, sub) {
			return true
		}
	}
	return false
}

// Exempt returns the listed domain that exempts a message: a dkim=pass
// result of the site's verifier (trusted, as for Judge: the first trusted
// field with a dkim result is the verifier's) whose header.d, or
// header.i's domain, is in the list, with the message's one From address
// in that domain or a subdomain of it (DMARC's relaxed alignment, RFC 7489
// §3.1.1, without the public suffix list: the signer's domain must be the
// From domain or its parent). A From a sender writes, a signature of a
// domain other than the From's, or a result anybody could have added
// exempts nothing: a spammer signs his own domain and forges the From.
func (s Senders) Exempt(h Header, trusted []string) (string, bool) {
	if s.Empty() {
		return "", false
	}
	// The verifier's passes of listed domains first: most mail has none,
	// and then its From is never parsed.
	var passed []string
	verifierPasses(trusted, func(r Result) {
		if d := signingDomain(r); d != "" && s.match(d) {
			passed = append(passed, d)
		}
	})
	if len(passed) == 0 {
		return "", false
	}
	from, ok := fromDomain(h)
	if !ok {
		return "", false
	}
	for _, d := range passed {
		if from == d || strings.HasSuffix(from, "."+d) {
			return d, true
		}
	}
	return "", false
}

// signingDomain is a dkim result's header.d, else header.i's domain,
// lower case.
func signingDomain(r Result) string {
	d := r.Props["header.d"]
	if d == "" {
		_, d, _ = strings.Cut(r.Props["header.i"], "@")
	}
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
}

// fromDomain returns the domain of the message's From address: there must
// be one From field with one address (RFC 7489 §6.6.1 leaves the rest to
// the receiver; an exemption refuses it).
func fromDomain(h Header) (string, bool) {
	fs := h.Values("From")
	if len(fs) != 1 {
		return "", false
	}
	as, err := mail.ParseAddressList(fs[0])
	if err != nil || len(as) != 1 {
		return "", false
	}
	i := strings.LastIndexByte(as[0].Address, '@')
	if i < 0 {
		return "", false
	}
	d := strings.TrimSuffix(strings.ToLower(as[0].Address[i+1:]), ".")
	return d, d != ""
}
