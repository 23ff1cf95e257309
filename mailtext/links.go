package mailtext

import (
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// maxURLLen bounds the part of a link target looked at.
const maxURLLen = 2048

// idnaProfile converts hosts to their ASCII form the way a browser looks
// them up, but without rejecting what a browser would still try.
var idnaProfile = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.StrictDomainName(false), idna.VerifyDNSLength(false), idna.BidiRule())

// domainMemo holds the last host linkDomain looked up and its answer:
// a message's links mostly repeat their host, and publicsuffix allocates
// an error for every lookup (netip.ParseAddr's, checking that the host is
// no IP address). Reset it when the text it points into is done with.
type domainMemo struct {
	host, dom string
	ok        bool
}

// registrable is publicsuffix.EffectiveTLDPlusOne's answer for host.
func (m *domainMemo) registrable(host string) (string, bool) {
	if m.host != host || m.host == "" {
		d, err := publicsuffix.EffectiveTLDPlusOne(host)
		m.host, m.dom, m.ok = host, d, err == nil
	}
	return m.dom, m.ok
}

// linkDomain returns the registrable domain of a link target, or ok=false
// for targets that are not web links (mailto:, tel:, cid:, javascript:,
// relative links) or whose host cannot be read. memo remembers the last
// lookup.
func linkDomain(u string, memo *domainMemo) (string, bool) {
	if len(u) > maxURLLen {
		u = u[:maxURLLen]
	}
	u = strings.TrimSpace(u)
	u = strings.Trim(u, "\"'<>")
	// Browsers drop tabs and newlines inside URLs and read '\' as '/'.
	if strings.ContainsAny(u, "\t\r\n\\") {
		u = strings.Map(func(r rune) rune {
			switch r {
			case '\t', '\r', '\n':
				return -1
			case '\\':
				return '/'
			}
			return r
		}, u)
	}
	var rest string
	switch {
	case hasPrefixFold(u, "http://"):
		rest = u[7:]
	case hasPrefixFold(u, "https://"):
		rest = u[8:]
	case hasPrefixFold(u, "ftp://"):
		rest = u[6:]
	case hasPrefixFold(u, "http:/"), hasPrefixFold(u, "https:/"):
		// "http:/host" and "http:host": browsers repair these.
		rest = strings.TrimLeft(u[strings.IndexByte(u, ':')+1:], "/")
	case strings.HasPrefix(u, "//"):
		rest = u[2:]
	case hasPrefixFold(u, "www."):
		rest = u
	default:
		return "", false
	}
	rest = strings.TrimLeft(rest, "/")
	end := strings.IndexAny(rest, "/?#")
	if end >= 0 {
		rest = rest[:end]
	}
	host := rest
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		host = host[at+1:] // userinfo: "http://paypal.com@evil.example/"
	}
	if strings.HasPrefix(host, "[") {
		if e := strings.IndexByte(host, ']'); e > 0 {
			if a, err := netip.ParseAddr(host[1:e]); err == nil {
				return a.String(), true
			}
		}
		return "", false
	}
	if c := strings.LastIndexByte(host, ':'); c >= 0 {
		host = host[:c]
	}
	host = percentDecode(host)
	host = strings.TrimRight(strings.ToLower(host), ".")
	if host == "" || !utf8.ValidString(host) {
		return "", false
	}
	if c := host[len(host)-1]; '0' <= c && c <= '9' {
		if a, err := netip.ParseAddr(host); err == nil {
			return a.String(), true
		}
	}
	ascii, ok := hostASCII(host)
	if !ok {
		return "", false
	}
	ascii = strings.TrimRight(ascii, ".")
	if !validHost(ascii) {
		return "", false
	}
	return memo.registrable(ascii)
}

// hostASCII converts a lower-case host to its ASCII form; an ASCII host
// IDNA rejects is kept as it is. A host that is ASCII and has no
// punycode label ("xn--") is its own ASCII form (IDNA would return it or
// reject it: TestHostASCIIAsIDNA), so it skips the IDNA mapping, most
// of what reading a link cost.
func hostASCII(host string) (string, bool) {
	ascii := isASCIIString(host)
	if ascii && !strings.Contains(host, "xn--") {
		return host, true
	}
	a, err := idnaProfile.ToASCII(host)
	if err != nil {
		return host, ascii
	}
	return a, true
}

func validHost(h string) bool {
	if h == "" || len(h) > 253 || !strings.Contains(h, ".") {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return !strings.Contains(h, "..")
}

func isASCIIString(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// appendTextDomains appends the registrable domains of bare URLs in text:
// "http://", "https://", "ftp://" and word-initial "www.", in order.
func appendTextDomains(dst []string, text string, memo *domainMemo) []string {
	for i := 0; i < len(text); {
		start := nextURL(text, i)
		if start < 0 {
			break
		}
		end := start
		for end < len(text) && end-start < maxURLLen {
			c := text[end]
			if c < 0x80 {
				if c <= ' ' || c == '<' || c == '>' || c == '"' || c == ')' || c == ']' || c == '}' || c == '\'' {
					break
				}
				end++
				continue
			}
			r, n := utf8.DecodeRuneInString(text[end:])
			if unicode.IsSpace(r) {
				break
			}
			end += n
		}
		u := strings.TrimRight(text[start:end], ".,;:!?")
		if d, ok := linkDomain(u, memo); ok {
			dst = append(dst, d)
		}
		i = max(end, start+1)
	}
	return dst
}

// nextURL returns the start of the first URL at or after from, or -1. It
// looks for "://" and "www." with the fast substring search and checks
// what surrounds them.
func nextURL(s string, from int) int {
	best := -1
	// Scheme URLs.
	for i := from; ; {
		j := strings.Index(s[i:], "://")
		if j < 0 {
			break
		}
		j += i
		k := j
		for k > from && k > j-5 && ('a' <= s[k-1]|0x20 && s[k-1]|0x20 <= 'z') {
			k--
		}
		if scheme := strings.ToLower(s[k:j]); scheme == "http" || scheme == "https" || scheme == "ftp" {
			best = k
			break
		}
		i = j + 3
	}
	// Scheme-less "www." (either case), before best if any.
	limit := len(s)
	if best >= 0 {
		limit = best
	}
	for _, w := range [...]string{"www.", "WWW."} {
		for i := from; i < limit; {
			j := strings.Index(s[i:limit], w)
			if j < 0 {
				break
			}
			j += i
			if j == 0 || !isWordByte(s[j-1]) {
				limit = j
				break
			}
			i = j + 4
		}
	}
	if limit < len(s) && (best < 0 || limit < best) {
		return limit
	}
	return best
}

func isWordByte(c byte) bool {
	return 'a' <= c|0x20 && c|0x20 <= 'z' || '0' <= c && c <= '9' || c >= 0x80 || c == '.' || c == '/'
}

// altMismatchThreshold is the word-set similarity below which a text/plain
// alternative is counted as disagreeing with its text/html sibling. Plain
// and HTML renderings of one message share most words (ham in the corpora:
// median above 0.9, see docs/text-extraction.md).
const altMismatchThreshold = 0.5

// altMinWords is how many distinct words each alternative needs before
// their similarity is judged.
const altMinWords = 8

// wordSimilarity is the Jaccard similarity of the sets of lower-case words
// (runs of letters) of a and b; ok=false when either has too few words.
// The sets are built in sa and sb, emptied first and after: the walker's
// maps, reused from message to message rather than two maps grown for
// each message.
func wordSimilarity(a, b string, sa, sb map[string]struct{}) (float64, bool) {
	defer clear(sa)
	defer clear(sb)
	wordSet(a, sa)
	wordSet(b, sb)
	if len(sa) < altMinWords || len(sb) < altMinWords {
		return 0, false
	}
	inter := 0
	for w := range sa {
		if _, ok := sb[w]; ok {
			inter++
		}
	}
	union := len(sa) + len(sb) - inter
	return float64(inter) / float64(union), true
}

// maxSimWords bounds the words compared per alternative.
const maxSimWords = 2000

// wordSet adds the lower-case words of s to set, which it empties first.
func wordSet(s string, set map[string]struct{}) {
	clear(set)
	start := -1
	for i, r := range s {
		if unicode.IsLetter(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			set[strings.ToLower(s[start:i])] = struct{}{}
			start = -1
			if len(set) >= maxSimWords {
				return
			}
		}
	}
	if start >= 0 {
		set[strings.ToLower(s[start:])] = struct{}{}
	}
}
