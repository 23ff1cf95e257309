package detect

import (
	"bytes"
	"net/netip"
	"strings"

	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/declared"
	"github.com/bulkmilter/bulkmilter/mailtext"
)

// Limits bound what one message may cost: every byte kept of it (header
// fields, body, recipients), the text analysed and the recipient names
// stripped. Past a limit the message is analysed on what fits and
// Message.Truncated is set; a limit never gives an error verdict.
//
// With DefaultLimits a message keeps at most about 13 MiB (4 MiB of body,
// 256 KiB of header values plus the first Subject as the MTA sent it, 8 MiB
// of recipient addresses), whatever the MTA hands over: Postfix's defaults
// allow a 10 MB message, header fields of about 60 KB and, for local
// submissions, any number of recipients.
type Limits struct {
	BodyBytes      int // body bytes kept (limits.max_message_bytes)
	HeaderFields   int // header fields kept (limits.max_headers)
	HeaderBytes    int // bytes of header values kept, all fields together (limits.max_header_bytes)
	FieldBytes     int // bytes kept of one header value
	Recipients     int // envelope recipients kept (limits.max_recipients)
	RecipientBytes int // bytes of recipient addresses kept, all together
	AddressBytes   int // bytes kept of one address; a longer one is cut
	// NameWords bounds the words of one recipient's display name that are
	// stripped from the text (see personalWords).
	NameWords int
	Text      mailtext.Limits // the MIME walk and the decoded text
}

// DefaultLimits are the limits of the default configuration.
var DefaultLimits = Limits{
	BodyBytes:      4 << 20,
	HeaderFields:   1000,
	HeaderBytes:    256 << 10,
	FieldBytes:     16 << 10,
	Recipients:     100_000,
	RecipientBytes: 8 << 20,
	AddressBytes:   512,
	NameWords:      4,
	Text:           mailtext.DefaultLimits,
}

// orDefault fills zero limits from DefaultLimits.
func (l Limits) orDefault() Limits {
	d := DefaultLimits
	for _, p := range []struct{ v, def *int }{
		{&l.BodyBytes, &d.BodyBytes}, {&l.HeaderFields, &d.HeaderFields}, {&l.HeaderBytes, &d.HeaderBytes},
		{&l.FieldBytes, &d.FieldBytes}, {&l.Recipients, &d.Recipients}, {&l.RecipientBytes, &d.RecipientBytes},
		{&l.AddressBytes, &d.AddressBytes}, {&l.NameWords, &d.NameWords},
	} {
		if *p.v <= 0 {
			*p.v = *p.def
		}
	}
	return l
}

// Field is one header field as an MTA hands it to a milter: the name
// without the colon, and the value after it without the one space that
// follows the colon, folded lines joined by "\n" (Postfix's and Sendmail's
// form, without SMFIP_HDR_LEADSPC).
type Field struct{ Name, Value string }

// Split cuts a raw message into header fields and body exactly as Postfix
// hands them to a milter (checked against a real Postfix in
// TestSplitAsPostfix), so that a message read from a file runs the same
// bytes through the same code as one the MTA sent:
//
//   - a field is a name of printable ASCII characters, optional blanks and a
//     colon; the value loses one leading space (not a tab); continuation
//     lines are joined with "\n", their leading blanks kept;
//   - CRs at the end of a line are dropped and a CR inside a line becomes a
//     space, in the header and in the body;
//   - the header ends at the first empty line, which is not part of the
//     body, or at the first line that is neither a field nor a continuation,
//     which is the first body line;
//   - every body line ends with CRLF, as Postfix sends it (a bare LF
//     becomes CRLF, a missing final line end is added).
//
// An mbox "From " line at the top, which a mailbox stores and an MTA never
// sends (Postfix turns it into an X-Mailbox-Line field, which no analysis
// reads), is skipped. Split never fails: anything is a header and a body.
func Split(raw []byte) (fields []Field, body []byte) {
	fields, body = split(raw, nil)
	return fields, crlfBody(body)
}

// split is Split with the body as it is in raw (its line ends not yet
// made CRLF), the fields appended to fields.
func split(raw []byte, fields []Field) ([]Field, []byte) {
	if bytes.HasPrefix(raw, []byte("From ")) {
		_, raw = cutLine(raw)
	}
	// The open field's value is raw[vstart:vend] with its line breaks as
	// in the input; it is rewritten once the field ends.
	vstart, vend := -1, -1
	endField := func() {
		if vstart >= 0 {
			fields[len(fields)-1].Value = mtaValue(raw[vstart:vend])
			vstart = -1
		}
	}
	rest := raw
	for len(rest) > 0 {
		line, next := cutLine(rest)
		content := trimEOL(line)
		switch {
		case len(content) == 0:
			endField()
			return fields, next
		case content[0] == ' ' || content[0] == '\t':
			if len(fields) == 0 {
				return fields, rest
			}
			vend = len(raw) - len(next)
		default:
			name, colon, ok := fieldName(content)
			if !ok {
				endField()
				return fields, rest
			}
			endField()
			fields = append(fields, Field{Name: string(name)})
			start := len(raw) - len(rest)
			vstart, vend = start+colon+1, len(raw)-len(next)
		}
		rest = next
	}
	endField()
	return fields, nil
}

// cutLine returns the first line of b with its line break, and the rest.
func cutLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i+1], b[i+1:]
	}
	return b, nil
}

// trimEOL returns a line's content as Postfix passes it on: without its
// line break and every CR before it, a CR inside it turned into a space.
func trimEOL(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimRight(line, "\r")
	if bytes.IndexByte(line, '\r') < 0 {
		return line
	}
	return bytes.ReplaceAll(line, []byte("\r"), []byte(" "))
}

// fieldName returns the name of a "Name: value" line and the index of its
// colon: printable ASCII but the colon, then optional blanks (Postfix's
// is_header).
func fieldName(line []byte) (name []byte, colon int, ok bool) {
	i := 0
	for i < len(line) && line[i] > ' ' && line[i] < 0x7f && line[i] != ':' {
		i++
	}
	j := i
	for j < len(line) && (line[j] == ' ' || line[j] == '\t') {
		j++
	}
	if i == 0 || j >= len(line) || line[j] != ':' {
		return nil, 0, false
	}
	return line[:i], j, true
}

// mtaValue turns the raw value of a field (after the colon, up to and
// with its last line break) into what the MTA sends: one leading space
// dropped, each line as trimEOL leaves it, joined by "\n".
func mtaValue(v []byte) string {
	v = bytes.TrimPrefix(v, []byte(" "))
	v = bytes.TrimSuffix(v, []byte("\n"))
	if bytes.IndexByte(v, '\r') < 0 {
		return string(v)
	}
	lines := bytes.Split(v, []byte("\n"))
	for i, l := range lines {
		lines[i] = trimEOL(l)
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// crlfBody returns the body with every line ended by CRLF, as an MTA
// sends it to a milter. A body that is already so is returned as it is.
func crlfBody(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	lf, ok := isCRLF(b)
	if ok {
		return b
	}
	out, _ := appendCRLF(make([]byte, 0, len(b)+lf+2), b, -1)
	return out
}

// isCRLF reports whether every line of b ends with CRLF and no other CR
// is in it (true for an empty b): crlfBody leaves it as it is. lf is b's
// count of LF.
func isCRLF(b []byte) (lf int, ok bool) {
	if len(b) == 0 {
		return 0, true
	}
	lf, crlf := bytes.Count(b, []byte("\n")), bytes.Count(b, []byte("\r\n"))
	return lf, lf == crlf && crlf == bytes.Count(b, []byte("\r")) && b[len(b)-1] == '\n'
}

// appendCRLF appends crlfBody(b), cut at limit bytes when limit >= 0;
// cut reports that crlfBody(b) is longer than limit.
func appendCRLF(dst, b []byte, limit int) (out []byte, cut bool) {
	start := len(dst)
	for len(b) > 0 {
		line, rest := cutLine(b)
		dst = append(dst, trimEOL(line)...)
		dst = append(dst, '\r', '\n')
		b = rest
		if limit >= 0 && len(dst)-start >= limit {
			// Every line left adds at least its CRLF.
			return dst[:start+limit], len(dst)-start > limit || len(b) > 0
		}
	}
	return dst, false
}

// unfold joins a folded value into one line for analysis (RFC 5322
// §2.2.3): the line breaks go, the blanks after them stay.
func unfold(v string) string {
	if !hasLineBreak(v) {
		return v
	}
	return string(appendUnfolded(make([]byte, 0, len(v)), v))
}

// hasLineBreak reports whether v holds a CR or an LF. Two IndexByte scans
// (vectorised) rather than strings.ContainsAny, which reads a two-byte
// set byte by byte: 2.2 µs a message over its header fields in the
// milter's profile.
func hasLineBreak(v string) bool {
	return strings.IndexByte(v, '\n') >= 0 || strings.IndexByte(v, '\r') >= 0
}

// appendUnfolded appends v without its CR and LF bytes, the runs between
// them copied whole. Bytes, not runes: strings.Map would turn each
// invalid UTF-8 byte into a three-byte U+FFFD and let a value grow past
// Limits.FieldBytes.
func appendUnfolded(b []byte, v string) []byte {
	for len(v) > 0 {
		i := strings.IndexByte(v, '\n')
		line := v
		if i >= 0 {
			line, v = v[:i], v[i+1:]
		} else {
			v = ""
		}
		for {
			j := strings.IndexByte(line, '\r')
			if j < 0 {
				b = append(b, line...)
				break
			}
			b = append(b, line[:j]...)
			line = line[j+1:]
		}
	}
	return b
}

// FieldKind says what a Builder did with a header field.
type FieldKind int8

const (
	FieldKept     FieldKind = iota // kept for analysis
	FieldDropped                   // past a limit, not kept
	FieldVerdict                   // a copy of the verdict header, never analysed
	FieldFeedback                  // a copy of the feedback header, never analysed
)

// maxFeedbackValue bounds the feedback header's value kept ("not-bulk").
const maxFeedbackValue = 256

// Builder turns what an MTA hands over (envelope sender, recipients,
// client address, header fields one by one, body chunks), or a raw
// message through ReadRaw, into a Message, within Limits. The milter
// session, the feedback reader and the offline commands all use it, so a
// message is the same whichever way it came.
//
// Incoming copies of the verdict and feedback headers are counted, never
// analysed: a sender can forge neither. A Builder is reused with Reset; it
// is not safe for concurrent use.
type Builder struct {
	lim                 Limits
	verdictName, fbName string // trimmed, as configured; compared without case
	// Grant, when set, is asked for every byte kept; must is true while
	// the message keeps no more than every message may (256 KiB), and then
	// it must grant them. false means the daemon holds too much already:
	// the message is analysed on what it kept so far. The milter session
	// sets it to the server's memory budget.
	Grant func(n int, must bool) bool
	// LevelHeader names the level header (actions.level_header): its
	// incoming copies are counted like the verdict header's.
	LevelHeader string
	// AuthservID is the site's own authserv-id (policy.authserv_id).
	// Authentication-Results fields of it at the top of the header, above
	// every other field, are the verifiers' (a milter running before this
	// one inserts its results there) and go to Message.AuthResults; those
	// below came with the message, are forged (RFC 8601 §5) and are
	// counted for removal (ForgedResults). Empty trusts none.
	AuthservID string

	msg       Message
	hdr       fieldList
	header    textproto.Header // hdr built, when built is set
	built     bool
	body      bytes.Buffer
	held      int // bytes kept, all kinds
	fields    int
	hdrBytes  int
	rcptBytes int
	verdicts  int
	feedbacks int
	fbValue   string
	subject   string
	subjects  int
	subjectOK bool // the first Subject was kept whole
	levels    int
	results   int     // Authentication-Results fields so far
	forged    []int   // indexes (from 1) among them of the forged ones
	below     bool    // a field other than Authentication-Results was seen
	rawFields []Field // ReadRaw's fields, emptied after use
}

// maxTrustedResults bounds the Authentication-Results fields trusted: a
// verifier or three add one each.
const maxTrustedResults = 8

// NewBuilder returns a builder for messages whose verdict and feedback
// headers are named as given (actions.header and feedback.header).
func NewBuilder(lim Limits, verdictHeader, feedbackHeader string) *Builder {
	b := &Builder{lim: lim.orDefault(), verdictName: strings.TrimSpace(verdictHeader), fbName: strings.TrimSpace(feedbackHeader)}
	b.hdr.arena.limit = b.lim.HeaderBytes
	return b
}

// Limits returns the builder's limits.
func (b *Builder) Limits() Limits { return b.lim }

// Reset forgets the message; a large body buffer is let go.
func (b *Builder) Reset() {
	b.msg = Message{}
	b.hdr.reset()
	b.header, b.built = textproto.Header{}, false
	b.body.Reset()
	if b.body.Cap() > 1<<20 {
		b.body = bytes.Buffer{}
	}
	b.held, b.fields, b.hdrBytes, b.rcptBytes = 0, 0, 0, 0
	b.verdicts, b.feedbacks, b.subjects = 0, 0, 0
	b.levels, b.results, b.forged, b.below = 0, 0, b.forged[:0], false
	b.fbValue, b.subject, b.subjectOK = "", "", false
}

// floor is what every message may keep whatever the daemon holds, so
// that ordinary mail is never cut because others are large.
const floor = 256 << 10

// take accounts for n more bytes: false when the daemon's budget refuses
// them.
func (b *Builder) take(n int) bool {
	if b.Grant != nil && !b.Grant(n, b.held+n <= floor) {
		b.msg.Truncated = true
		return false
	}
	b.held += n
	return true
}

// Held returns the bytes the builder keeps for the current message.
func (b *Builder) Held() int { return b.held }

// Sender sets the envelope sender (MAIL FROM), cut at Limits.AddressBytes.
func (b *Builder) Sender(s string) {
	b.msg.Sender = b.cutAddress(s)
}

// Client sets the SMTP client's address from the MTA's {client_addr}.
func (b *Builder) Client(addr string) {
	b.msg.Client, _ = ParseClientAddr(addr)
}

// Recipient adds an envelope recipient. Past Limits.Recipients or
// Limits.RecipientBytes it is not kept and the message is marked
// truncated; an address longer than Limits.AddressBytes is kept cut (it
// still counts as a recipient of its own).
func (b *Builder) Recipient(r string) {
	r = b.cutAddress(r)
	// A string header costs 16 bytes beside the address.
	n := len(r) + 16
	if len(b.msg.Recipients) >= b.lim.Recipients || b.rcptBytes+n > b.lim.RecipientBytes || !b.take(n) {
		b.msg.Truncated = true
		return
	}
	b.rcptBytes += n
	b.msg.Recipients = append(b.msg.Recipients, r)
}

func (b *Builder) cutAddress(a string) string {
	if len(a) > b.lim.AddressBytes {
		b.msg.Truncated = true
		return strings.Clone(a[:b.lim.AddressBytes])
	}
	return a
}

// IsCut reports whether an address is as long as Limits.AddressBytes: it
// was cut (no real address is that long), so nothing may be done to it
// beyond counting.
func (b *Builder) IsCut(addr string) bool { return len(addr) >= b.lim.AddressBytes }

// Header adds a header field as the MTA sent it. Names are compared
// trimmed and without case: "x-bulk " is the verdict header too.
func (b *Builder) Header(name, value string) FieldKind {
	name = strings.TrimSpace(name)
	if strings.EqualFold(name, "Authentication-Results") {
		b.authResults(value)
	} else {
		b.below = true
	}
	switch {
	case b.LevelHeader != "" && strings.EqualFold(name, strings.TrimSpace(b.LevelHeader)):
		b.levels++
		return FieldVerdict
	case b.verdictName != "" && strings.EqualFold(name, b.verdictName):
		b.verdicts++
		return FieldVerdict
	case b.fbName != "" && strings.EqualFold(name, b.fbName):
		b.feedbacks++
		if b.feedbacks == 1 {
			b.fbValue = strings.Clone(strings.TrimSpace(value[:min(len(value), maxFeedbackValue)]))
		}
		return FieldFeedback
	case strings.EqualFold(name, "Subject"):
		// The first Subject as the MTA has it, for the subject tag,
		// whatever the limits below keep for analysis.
		if b.subjects++; b.subjects == 1 && b.take(len(value)) {
			b.subject, b.subjectOK = value, true
		}
	}
	v := value[:min(len(value), b.lim.FieldBytes)]
	// The first of each field the text is read from is always kept: a
	// sender who puts a thousand fields first must not choose whether his
	// Content-Type or Subject is read.
	text := textField(name)
	first := text && !b.hdr.hasText(name)
	if !first && (b.fields >= b.lim.HeaderFields || b.hdrBytes+len(v) > b.lim.HeaderBytes) || !b.take(len(v)+len(name)) {
		b.msg.Truncated = true
		return FieldDropped
	}
	if len(v) < len(value) {
		b.msg.Truncated = true
		v = strings.Clone(v) // not the whole value behind it
	}
	b.fields++
	b.hdrBytes += len(v)
	b.hdr.add(name, v, text)
	b.built = false
	return FieldKept
}

// HeaderBytes is Header for a field whose bytes are valid only for the
// call (the milter session's): they are copied into the message's arena,
// where they were two strings a field.
func (b *Builder) HeaderBytes(name, value []byte) FieldKind {
	return b.Header(b.hdr.arena.str(name), b.hdr.arena.str(value))
}

// authResults sorts an Authentication-Results field of the site's own
// authserv-id: trusted at the top of the header, forged below.
func (b *Builder) authResults(value string) {
	b.results++
	if b.AuthservID == "" || !strings.EqualFold(declared.AuthservID(value), b.AuthservID) {
		return
	}
	if b.below {
		b.forged = append(b.forged, b.results)
		return
	}
	v := value[:min(len(value), b.lim.FieldBytes)]
	if len(b.msg.AuthResults) < maxTrustedResults && b.take(len(v)) {
		b.msg.AuthResults = append(b.msg.AuthResults, b.hdr.arena.unfold(v))
	}
}

// textField reports whether mailtext reads the field of a message's top
// level (mailtext.ExtractParts).
func textField(name string) bool {
	for _, f := range [...]string{"Subject", "Content-Type", "Content-Transfer-Encoding", "Content-Disposition"} {
		if strings.EqualFold(name, f) {
			return true
		}
	}
	return false
}

// Body appends a chunk of the body as the MTA sent it; past
// Limits.BodyBytes the rest is dropped.
func (b *Builder) Body(chunk []byte) {
	room := b.lim.BodyBytes - b.body.Len()
	if room < len(chunk) {
		chunk = chunk[:max(room, 0)]
		b.msg.Truncated = true
	}
	if len(chunk) == 0 || !b.take(len(chunk)) {
		return
	}
	b.body.Write(chunk)
}

// ReadRaw adds a raw message's header fields and body as Split cuts them,
// the way the MTA would have sent them.
func (b *Builder) ReadRaw(raw []byte) {
	var body []byte
	b.rawFields, body = split(raw, b.rawFields[:0])
	for _, f := range b.rawFields {
		b.Header(f.Name, f.Value)
	}
	clear(b.rawFields) // no message's strings kept past it
	b.readBody(body)
}

// readBody is Body(crlfBody(body)) with the line ends made CRLF straight
// into the body buffer: crlfBody's copy of a body with LF line ends (every
// mailbox's) was a second copy of it, as large as the first.
func (b *Builder) readBody(body []byte) {
	lf, ok := isCRLF(body)
	if ok {
		b.Body(body)
		return
	}
	room := max(b.lim.BodyBytes-b.body.Len(), 0)
	// No longer than body with a CR before every LF and a final CRLF.
	b.body.Grow(min(len(body)+lf+2, room))
	out, cut := appendCRLF(b.body.AvailableBuffer(), body, room)
	if cut {
		b.msg.Truncated = true
	}
	b.Body(out) // within room: Body only accounts for it and keeps it
}

// Message returns the message built so far. Its body shares the
// builder's buffer: it is valid until the next Reset.
func (b *Builder) Message() *Message {
	if !b.built {
		b.header, b.built = b.hdr.build(), true
	}
	mb := &messageBody{m: b.msg} // one allocation, not the message and its reader apart
	mb.m.Header = b.header
	mb.r.Reset(b.body.Bytes())
	mb.m.Body = &mb.r
	return &mb.m
}

// messageBody is a Message with the reader of its body.
type messageBody struct {
	m Message
	r bytes.Reader
}

// VerdictHeaders returns the number of incoming verdict header fields.
func (b *Builder) VerdictHeaders() int { return b.verdicts }

// LevelHeaders returns the number of incoming level header fields.
func (b *Builder) LevelHeaders() int { return b.levels }

// ForgedResults returns the indexes, from 1 among the message's
// Authentication-Results fields, of those of the site's authserv-id that
// came with the message (see Builder.AuthservID).
func (b *Builder) ForgedResults() []int { return b.forged }

// FeedbackHeaders returns the number of incoming feedback header fields
// and the first one's value, trimmed.
func (b *Builder) FeedbackHeaders() (n int, value string) { return b.feedbacks, b.fbValue }

// Subject returns the first Subject field's value as the MTA sent it, the
// number of Subject fields, and whether the value was kept (the daemon's
// memory budget may refuse it).
func (b *Builder) Subject() (value string, n int, kept bool) {
	return b.subject, b.subjects, b.subjectOK
}

// ParseClientAddr reads the MTA's {client_addr}: Postfix sends IPv6 plain,
// Sendmail with an "IPv6:" prefix; some wrap it in brackets. The result
// has no zone and IPv4 unmapped.
func ParseClientAddr(s string) (netip.Addr, bool) {
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
