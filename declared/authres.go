package declared

import (
	"errors"
	"strings"
)

// AuthResults is one Authentication-Results field (RFC 8601 §2.2).
type AuthResults struct {
	// AuthservID names the host that made the results, as written.
	AuthservID string
	Results    []Result
}

// Result is one method's result: "dkim=pass header.d=example.com …".
type Result struct {
	Method string // lower case, without a version: "dkim", "spf"
	Value  string // lower case: "pass", "fail", …
	Reason string
	// Props holds the properties by lower-case "ptype.property"
	// ("header.d", "header.b"), values as written.
	Props map[string]string
}

// maxResults bounds the results kept of one field: a verifier writes a
// handful, a forger may write thousands.
const maxResults = 32

// ParseAuthResults parses an Authentication-Results value. It is lenient
// where RFC 8601 lets verifiers differ (comments anywhere, a version after
// the authserv-id, unknown properties) and skips a result it cannot read
// to the next ";"; it fails only without an authserv-id.
func ParseAuthResults(v string) (AuthResults, error) {
	var ar AuthResults
	l := lexer{s: v}
	id, ok := l.value()
	if !ok || id == ";" || id == "=" || id == "" {
		return ar, errors.New("authentication-results: no authserv-id")
	}
	ar.AuthservID = id
	if t, ok := l.peek(); ok && t != ";" && isDigits(t) {
		l.value() // authres-version
	}
	for len(ar.Results) < maxResults {
		t, ok := l.value()
		if !ok {
			break
		}
		if t != ";" {
			continue // junk between results: skip to the next one
		}
		if r, ok := l.result(); ok {
			ar.Results = append(ar.Results, r)
		}
	}
	return ar, nil
}

// AuthservID returns the authserv-id of an Authentication-Results value,
// "" when it has none.
func AuthservID(v string) string {
	l := lexer{s: v}
	if id, ok := l.value(); ok && id != ";" && id != "=" {
		return id
	}
	return ""
}

// result reads "method[/version] = result [reason=…] [ptype.prop=value…]"
// up to the next ";" (not consumed).
func (l *lexer) result() (Result, bool) {
	method, ok := l.value()
	if !ok || method == ";" || method == "=" {
		l.unread(method)
		return Result{}, false
	}
	r := Result{Method: strings.ToLower(method)}
	if i := strings.IndexByte(r.Method, '/'); i >= 0 {
		r.Method = strings.TrimSpace(r.Method[:i])
	}
	if t, _ := l.value(); t != "=" {
		l.unread(t)
		return Result{}, false // "none" or junk: no result
	}
	val, ok := l.value()
	if !ok || val == ";" {
		l.unread(val)
		return Result{}, false
	}
	r.Value = strings.ToLower(val)
	for {
		name, ok := l.value()
		if !ok || name == ";" {
			l.unread(name)
			return r, true
		}
		if t, _ := l.value(); t != "=" {
			l.unread(t)
			continue
		}
		pv, ok := l.pvalue()
		if !ok {
			continue
		}
		name = strings.ToLower(name)
		switch {
		case name == "reason":
			r.Reason = pv
		case strings.Contains(name, "."):
			if r.Props == nil {
				r.Props = map[string]string{}
			}
			if _, dup := r.Props[name]; !dup {
				r.Props[name] = pv
			}
		}
	}
}

// lexer cuts a structured header value into words, quoted strings, ";"
// and "=", skipping blanks and comments (RFC 5322 CFWS).
type lexer struct {
	s    string
	back string // one token pushed back
}

func (l *lexer) unread(t string) { l.back = t }

func (l *lexer) peek() (string, bool) {
	t, ok := l.value()
	l.unread(t)
	return t, ok
}

// skip passes blanks and (nested) comments.
func (l *lexer) skip() {
	for len(l.s) > 0 {
		switch c := l.s[0]; {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			l.s = l.s[1:]
		case c == '(':
			depth := 0
			i := 0
			for ; i < len(l.s); i++ {
				switch l.s[i] {
				case '\\':
					i++
				case '(':
					depth++
				case ')':
					depth--
				}
				if depth == 0 {
					break
				}
			}
			l.s = l.s[min(i+1, len(l.s)):]
		default:
			return
		}
	}
}

// value returns the next token: ";", "=", a quoted string's content or a
// word (up to a blank, ";", "=", "(" or '"').
func (l *lexer) value() (string, bool) {
	if l.back != "" {
		t := l.back
		l.back = ""
		return t, true
	}
	l.skip()
	if len(l.s) == 0 {
		return "", false
	}
	switch l.s[0] {
	case ';', '=':
		t := l.s[:1]
		l.s = l.s[1:]
		return t, true
	case '"':
		return l.quoted(), true
	}
	return l.until(" \t\r\n;=(\""), true
}

// pvalue reads a property value: a quoted string, or everything up to a
// blank, ";" or "(" ("=" included: a base64 header.b may end in it).
func (l *lexer) pvalue() (string, bool) {
	l.skip()
	if len(l.s) == 0 || l.s[0] == ';' {
		return "", false
	}
	if l.s[0] == '"' {
		return l.quoted(), true
	}
	return l.until(" \t\r\n;("), true
}

// until reads up to the first of the bytes in stop, or to the end.
func (l *lexer) until(stop string) string {
	i := strings.IndexAny(l.s, stop)
	if i < 0 {
		i = len(l.s)
	}
	t := l.s[:i]
	l.s = l.s[i:]
	return t
}

func (l *lexer) quoted() string {
	var b strings.Builder
	i := 1
	for ; i < len(l.s) && l.s[i] != '"'; i++ {
		if l.s[i] == '\\' && i+1 < len(l.s) {
			i++
		}
		b.WriteByte(l.s[i])
	}
	l.s = l.s[min(i+1, len(l.s)):]
	return b.String()
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
