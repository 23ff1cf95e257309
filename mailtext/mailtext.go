// Package mailtext turns a raw message, however broken, into the text a
// reader sees: the decoded Subject, the text of text/plain parts and the
// visible text of text/html parts, plus the registrable domains of link
// targets. Hidden HTML text is measured, not returned as visible text.
//
// Parsing is bounded (nesting depth, number of parts, bytes of text) and
// never fails: what cannot be read is recorded as a Defect and skipped.
package mailtext

// Limits bound the work done on one message.
type Limits struct {
	MaxDepth     int // MIME nesting depth, message/rfc822 included
	MaxParts     int // MIME parts visited
	MaxTextBytes int // bytes of decoded text kept per message
}

// DefaultLimits are the limits used when none are configured.
var DefaultLimits = Limits{MaxDepth: 32, MaxParts: 256, MaxTextBytes: 1 << 20}

// Text is what a reader sees of a message.
type Text struct {
	Subject string
	Parts   []Part   // visible text parts in reading order
	Domains []string // registrable domains of link targets, each once, in order of appearance
	Stats   Stats
	Defects []Defect
}

// Part is the visible text of one MIME part.
type Part struct {
	ContentType string // "text/plain" or "text/html"
	Text        string // valid UTF-8
}

// Stats describe the message's structure and what was cut or hidden.
type Stats struct {
	Parts          int // MIME parts visited
	MaxDepth       int // deepest nesting seen
	TextBytes      int // bytes of visible text kept
	TruncatedBytes int // bytes of decoded text dropped by Limits.MaxTextBytes
	VisibleChars   int // characters of visible HTML text
	HiddenChars    int // characters of HTML text hidden from the reader
}

// DefectKind names a class of defect.
type DefectKind string

// Defect is something wrong with the message that extraction worked around.
type Defect struct {
	Kind   DefectKind
	Detail string
}
