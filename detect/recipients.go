package detect

import (
	"mime"
	"net/mail"
	"slices"
	"strings"
	"unicode"

	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/signature"
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

// maxStripped is how many words stripping may remove before the text is
// signed unstripped too (Engine.Analyze): a recipient's name and address
// parts in a greeting, a subject and a footer. Measured on the eval's
// campaigns (milterd eval, seed 1): 98 % of the personalise attack's copies
// strip at most 8 words, so few pay for a second signing; a display name
// of four of the body's own words strips more than 8 in 55 % of copies,
// and the attack's recall is 0.956 (0.923 with 16, 0.999 with 4, where a
// third of personalised copies would be signed twice).
const maxStripped = 8

// maxNameWord bounds one word of a display name, in bytes.
const maxNameWord = 40

var wordDecoder = mime.WordDecoder{CharsetReader: nil}

// personalWords returns the words that personalise a copy for its
// recipients: the parts of each recipient's address, and the words of the
// display name the To or Cc header gives that address. Spammers and
// newsletters insert these into the Subject and body ("Dear John Smith",
// "sent to john.smith@…"), so every copy differs.
//
// What the sender writes is bounded, since every word returned is removed
// wherever it occurs: one display name per recipient (the first), used only
// when it is name-like, at most nameWords words each made of letters (with
// inner hyphens, apostrophes and dots, "O'Neil", "Jean-Luc", "J.") and no
// longer than maxNameWord bytes. A display name of forty words, or one with
// digits or symbols, is not a name and strips nothing. Only the header
// fields the message kept are read (Limits.HeaderBytes), and an address is
// parsed only when its field names a recipient.
func personalWords(h textproto.Header, rcpts []string, nameWords int) []string {
	if len(rcpts) == 0 || len(rcpts) > maxPersonalised {
		return nil
	}
	var words []string
	want := make([]string, 0, len(rcpts))
	for _, r := range rcpts {
		addr := NormaliseAddress(r)
		if addr == "" {
			continue
		}
		want = append(want, addr)
		local, domain, _ := strings.Cut(addr, "@")
		words = append(words, local)
		words = append(words, strings.FieldsFunc(local, isAddrSep)...)
		if label, _, ok := strings.Cut(domain, "."); ok {
			words = append(words, label)
		}
	}
	named := make([]bool, len(want))
	for _, key := range []string{"To", "Cc"} {
		for _, raw := range h.Values(key) {
			if !containsAnyFold(raw, want) {
				continue
			}
			if dec, err := wordDecoder.DecodeHeader(raw); err == nil {
				raw = dec
			}
			for _, item := range strings.Split(raw, ",") {
				i := indexFold(item, want)
				if i < 0 || named[i] {
					continue
				}
				a, err := mail.ParseAddress(strings.TrimSpace(item))
				if err != nil || NormaliseAddress(a.Address) != want[i] {
					continue
				}
				named[i] = true
				if name := strings.Fields(a.Name); nameLike(name, nameWords) {
					words = append(words, name...)
				}
			}
		}
	}
	return words
}

// nameLike reports whether a display name's words can be a person's name.
func nameLike(words []string, max int) bool {
	if len(words) == 0 || len(words) > max {
		return false
	}
	for _, w := range words {
		if len(w) > maxNameWord {
			return false
		}
		letters := 0
		for i, r := range w {
			switch {
			case unicode.IsLetter(r):
				letters++
			case (r == '-' || r == '\'' || r == '.' || r == '’') && i > 0:
			default:
				return false
			}
		}
		if letters == 0 {
			return false
		}
	}
	return true
}

// containsAnyFold reports whether s contains one of the (lower-case)
// addresses, in any case.
func containsAnyFold(s string, addrs []string) bool {
	return indexFold(s, addrs) >= 0
}

// indexFold returns the index of the first (lower-case) address s
// contains in any case, or -1.
func indexFold(s string, addrs []string) int {
	ls := strings.ToLower(s)
	for i, a := range addrs {
		if strings.Contains(ls, a) {
			return i
		}
	}
	return -1
}

func isAddrSep(r rune) bool {
	return r == '.' || r == '_' || r == '-' || r == '+'
}

// mergeKeys appends the keys of more that keys lacks.
func mergeKeys(keys, more []signature.Key) []signature.Key {
	n := len(keys)
	for _, k := range more {
		if !slices.Contains(keys[:n], k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// mergeExplains keeps, for each family, the explanation with more keys.
func mergeExplains(exps, more []signature.Explain) []signature.Explain {
	for _, m := range more {
		for i := range exps {
			if exps[i].Family == m.Family && m.Keys > exps[i].Keys {
				exps[i] = m
			}
		}
	}
	return exps
}
