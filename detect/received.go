package detect

import (
	"net/mail"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-message/textproto"
)

// A stored message (an archive, a corpus) no longer has its envelope, but
// its header says what the site's MTA was told: the receiving MTA writes
// the client's address, often the envelope recipient and the time into
// the Received field it adds on top, and the delivery agent the envelope
// sender into Return-Path. A replay (milterd scan, the lab) reads them
// here so that it sees every volume dimension the daemon sees.

// Received is what one Received header field says of its hop.
type Received struct {
	// Client is the address the receiving MTA saw the client connect
	// from: an address literal in the from clause's comment ("from helo
	// (rdns [192.0.2.1])", qmail's "(192.0.2.1)"), else a bracketed one
	// in the clause itself (Exim's "from [192.0.2.1]"). A bare address
	// outside the comment is the client's HELO, which it chooses, and is
	// never taken. Zero when the field names none.
	Client netip.Addr
	// For is the envelope recipient of the for clause ("for <a@b>"), as
	// written; MTAs write it only for a single recipient.
	For string
	// Time is the date after the last ';', zero when there is none.
	Time time.Time
}

// maxReceivedBytes bounds the part of a Received value that is read: the
// clauses an MTA writes fit in a few hundred bytes.
const maxReceivedBytes = 4096

// ParseReceived reads a Received field's value (RFC 5321 §4.4). It never
// fails: what it cannot read stays zero.
func ParseReceived(v string) Received {
	var r Received
	if i := strings.LastIndexByte(v, ';'); i >= 0 {
		if t, err := mail.ParseDate(strings.Join(strings.Fields(v[i+1:]), " ")); err == nil {
			r.Time = t
		}
		v = v[:i]
	}
	if len(v) > maxReceivedBytes {
		v = v[:maxReceivedBytes]
	}
	// Tokens split at blanks and parentheses, each with its comment depth
	// and clause ("from", "by", "for", ...).
	depth, clause := 0, ""
	var inComment, bracketed netip.Addr
	forNext := false
	tok := func(s string) {
		if s == "" {
			return
		}
		if depth == 0 {
			switch low := strings.ToLower(s); low {
			case "from", "by", "via", "with", "id", "for":
				clause, forNext = low, low == "for"
				return
			}
			if forNext && clause == "for" {
				r.For, forNext = strings.TrimSuffix(strings.TrimPrefix(s, "<"), ">"), false
				return
			}
		}
		if clause != "from" {
			return
		}
		lit := strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]")
		if depth == 0 && !lit {
			return // the HELO name
		}
		a, ok := ParseClientAddr(s)
		if !ok {
			return
		}
		switch {
		case depth > 0 && !inComment.IsValid():
			inComment = a
		case depth == 0 && !bracketed.IsValid():
			bracketed = a
		}
	}
	start := 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case ' ', '\t', '\r', '\n', '(', ')':
			tok(v[start:i])
			start = i + 1
			if c == '(' {
				depth++
			} else if c == ')' && depth > 0 {
				depth--
			}
		}
	}
	tok(v[start:])
	r.Client = inComment
	if !r.Client.IsValid() {
		r.Client = bracketed
	}
	return r
}

// FromHeader names the parts of the envelope a replay takes from a stored
// message's header.
type FromHeader struct {
	Recipients bool // HeaderRecipients, when it names any
	Client     bool // ReceivedClient
	Sender     bool // ReturnPath
}

// SetFromHeader sets the parts of m's envelope that from names from m's
// header. Recipients taken from the header are bounded by the header's
// own limits (Limits.HeaderBytes).
func (m *Message) SetFromHeader(from FromHeader) {
	if from.Recipients {
		if rs := HeaderRecipients(m.Header); len(rs) > 0 {
			m.Recipients = rs
		}
	}
	if from.Client {
		m.Client, _ = ReceivedClient(m.Header)
	}
	if from.Sender {
		m.Sender = ReturnPath(m.Header)
	}
}

// ReceivedClient returns the client address named by the topmost Received
// field that names one, skipping loopback hops (a content filter handing
// the message back to its MTA on the same host).
func ReceivedClient(h textproto.Header) (netip.Addr, bool) {
	for _, v := range topDown(h, "Received") {
		if a := ParseReceived(v).Client; a.IsValid() && !a.IsLoopback() && !a.IsUnspecified() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// maxRelayHops bounds the Received fields RelayedClient reads: a site's
// own relays are a hop or two.
const maxRelayHops = 8

// RelayedClient returns the client a message came from when client, the
// SMTP client, is one of the site's own relays (a front MX, a forwarder,
// a department's gateway): the first address, top down, of the Received
// fields that is neither a relay nor loopback. Every field above it was
// written by the site's MTA or a relay, so it names the host that
// connected to the relay; fields further down are the sender's to write
// and are never read. client itself when it is no relay or the fields name
// no outside client.
func RelayedClient(h textproto.Header, client netip.Addr, relays []netip.Prefix) netip.Addr {
	if !inPrefixes(client, relays) {
		return client
	}
	for i, v := range topDown(h, "Received") {
		if i == maxRelayHops {
			break
		}
		a := ParseReceived(v).Client
		if !a.IsValid() || a.IsLoopback() || a.IsUnspecified() || inPrefixes(a, relays) {
			continue
		}
		return a
	}
	return client
}

func inPrefixes(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ReceivedTime returns the date of the topmost Received field, when the
// receiving MTA took the message in; zero when it has none.
func ReceivedTime(h textproto.Header) time.Time {
	if rs := topDown(h, "Received"); len(rs) > 0 {
		return ParseReceived(rs[0]).Time
	}
	return time.Time{}
}

// DateTime returns the time a replay counts a stored message at by its
// Date field: the Date, unless it is later than the topmost Received
// field's date (ReceivedTime), when the site's MTA took the message in:
// no message arrives before it is sent, so a later Date is a sender's
// forgery or wrong clock (spam dated 2090 or days ahead), and the
// delivery time stands for it. Counting a message at a forged future
// time put it in a store bucket of its own ahead of every other
// message's, and the embedded store's ring, which keeps the newest
// bucket, then refused the present's writes in that slot
// (docs/evaluation.md, "Real stream"). ok is false when the Date does not
// parse.
func DateTime(h textproto.Header) (t time.Time, ok bool) {
	d, err := mail.ParseDate(h.Get("Date"))
	if err != nil {
		return time.Time{}, false
	}
	if r := ReceivedTime(h); !r.IsZero() && d.After(r) {
		return r, true
	}
	return d, true
}

// HeaderRecipients returns the envelope recipients a stored message's
// header names: the for clause of the topmost Received field (what the
// site's MTA was given in RCPT TO), else the topmost Delivered-To or
// X-Original-To (what Postfix's delivery agents write), else every To and
// Cc address. Lower fields are not read: a sender can write them.
func HeaderRecipients(h textproto.Header) []string {
	if rs := topDown(h, "Received"); len(rs) > 0 {
		if f := NormaliseAddress(ParseReceived(rs[0]).For); strings.Contains(f, "@") {
			return []string{f}
		}
	}
	for _, k := range []string{"Delivered-To", "X-Original-To"} {
		if vs := topDown(h, k); len(vs) == 0 {
			continue
		} else if f := NormaliseAddress(vs[0]); strings.Contains(f, "@") {
			return []string{f}
		}
	}
	var out []string
	for _, k := range []string{"To", "Cc"} {
		for _, v := range h.Values(k) {
			l, err := mail.ParseAddressList(v)
			if err != nil {
				continue
			}
			for _, a := range l {
				out = append(out, a.Address)
			}
		}
	}
	return out
}

// ReturnPath returns the envelope sender the delivery agent recorded
// (Return-Path), "" for the null sender or when there is none.
func ReturnPath(h textproto.Header) string {
	vs := topDown(h, "Return-Path")
	if len(vs) == 0 {
		return ""
	}
	v := strings.TrimSpace(vs[0])
	if i := strings.IndexByte(v, '<'); i >= 0 {
		v = v[i+1:]
		if j := strings.IndexByte(v, '>'); j >= 0 {
			v = v[:j]
		}
	}
	return NormaliseAddress(v)
}

// topDown returns a field's values in the order they stand in the message.
// A Builder's header is as if its fields were added in arrival order with
// Header.Add, which go-message takes for prepending: Values lists a
// Builder's fields bottom up.
func topDown(h textproto.Header, key string) []string {
	vs := h.Values(key)
	slices.Reverse(vs)
	return vs
}
