package detect

import (
	"mime"
	"net/mail"
	"strings"

	"github.com/emersion/go-message/textproto"
)

// NormaliseAddress turns an envelope address into the form recipients and
// voters are counted under: without angle brackets, trimmed, lower case.
func NormaliseAddress(a string) string {
	a = strings.TrimSpace(a)
	a = strings.TrimPrefix(a, "<")
	a = strings.TrimSuffix(a, ">")
	return strings.ToLower(strings.TrimSpace(a))
}

// normaliseAll normalises and de-duplicates recipients, keeping order.
func normaliseAll(rcpts []string) []string {
	out := make([]string, 0, len(rcpts))
	seen := make(map[string]bool, len(rcpts))
	for _, r := range rcpts {
		n := NormaliseAddress(r)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
	}
	return out
}

// maxPersonalised bounds the recipients whose names are stripped: a
// message to many recipients is not personalised per copy.
const maxPersonalised = 8

var wordDecoder = mime.WordDecoder{CharsetReader: nil}

// personalWords returns the words that personalise a copy for its
// recipients: the parts of each recipient's address and the display name
// the To or Cc header gives that address. Spammers insert these into the
// Subject and body ("Dear john.smith"), so every copy differs.
func personalWords(h textproto.Header, rcpts []string) []string {
	if len(rcpts) == 0 || len(rcpts) > maxPersonalised {
		return nil
	}
	var words []string
	want := map[string]bool{}
	for _, r := range rcpts {
		addr := NormaliseAddress(r)
		want[addr] = true
		local, domain, _ := strings.Cut(addr, "@")
		words = append(words, local)
		words = append(words, strings.FieldsFunc(local, isAddrSep)...)
		if label, _, ok := strings.Cut(domain, "."); ok {
			words = append(words, label)
		}
	}
	for _, key := range []string{"To", "Cc"} {
		for _, raw := range h.Values(key) {
			if dec, err := wordDecoder.DecodeHeader(raw); err == nil {
				raw = dec
			}
			for _, item := range strings.Split(raw, ",") {
				a, err := mail.ParseAddress(strings.TrimSpace(item))
				if err != nil || !want[NormaliseAddress(a.Address)] || a.Name == "" {
					continue
				}
				words = append(words, strings.Fields(a.Name)...)
			}
		}
	}
	return words
}

func isAddrSep(r rune) bool {
	return r == '.' || r == '_' || r == '-' || r == '+'
}
