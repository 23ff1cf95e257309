// Package mailtext turns a raw message, however broken, into the text a
// reader sees: the decoded Subject, the text of text/plain parts and the
// visible text of text/html parts, plus the registrable domains of link
// targets. Hidden HTML text is measured, not returned as visible text.
//
// Parsing is bounded (nesting depth, number of parts, bytes of text) and
// never fails: what cannot be read is recorded as a Defect and skipped.
//
// # What the reader sees
//
//   - Subject: RFC 2047 encoded-words in any charset go-message's charset
//     package knows; raw 8-bit bytes are decoded with the charset of the
//     first text part (or a guess) when they are not valid UTF-8.
//   - text/plain (and text/enriched, shown as plain text): transfer
//     encoding and charset decoded, format=flowed unwrapped.
//   - text/html: the visible text only (see html.go): script, style,
//     comments, title and template content are dropped, and so is text
//     hidden by CSS (display, visibility, opacity, tiny or zero font, zero
//     boxes with overflow hidden, off-screen offsets, mso-hide, text coloured
//     like its background, simple class rules from style blocks).
//   - message/rfc822 parts (forwarded mail): descended into, counting one
//     level of depth; their Subject becomes a Part of type message/rfc822.
//   - Parts marked Content-Disposition: attachment are not read as text.
//   - Non-text leaves (images, PDFs, archives …, inline or attached) are
//     not read as text either: each is transfer-decoded and kept
//     (Text.Attachments), within
//     Limits.MaxAttachments and Limits.MaxAttachBytes, in the same walk.
//     Image spam says what it says in an image, and reuses it.
//
// # multipart/alternative
//
// A reader sees one alternative. Most readers render HTML, so the
// alternative that carries HTML (the last such one) is used; when it has no
// visible text (an image-only HTML part), the last alternative with text is
// used instead. The other alternatives are parsed but their text and links
// are not returned. A bland text/plain alternative next to a spammy HTML one
// is a known filter-evasion trick: when both a text/plain and a text/html
// alternative have enough words and their word sets differ a lot, Stats
// counts an AltMismatch and a DefectAltMismatch is recorded.
//
// # Link domains
//
// The registrable domain (public suffix + 1, golang.org/x/net/publicsuffix)
// of every http, https, ftp and scheme-less "www." link target: href of
// visible <a> and <area> elements and bare URLs in visible text. Hosts are
// lower-cased and converted to their ASCII (punycode) form, so a homoglyph
// domain stays distinct from the brand it imitates. mailto:, tel:, cid: and
// javascript: targets are ignored: an address is not a place a reader is
// sent to, and it is often the recipient's own. IP literals are kept as is.
//
// # Why not go-message's multipart reader
//
// go-message (github.com/emersion/go-message) provides the header type
// ([textproto.Header], used by [ExtractParts]) and, through its charset
// package, the charset registry used for bodies and encoded-words. The
// multipart boundaries are split by a single-pass scanner of our own: go-
// message nests one reader per level (quadratic cost with depth), stops a
// whole multipart at the first part header line without a colon, buffers
// part header lines without a limit, and picks CRLF or LF once per
// multipart. The scanner here checks each line against the whole stack of
// open boundaries (an outer boundary closes the inner parts whose own final
// boundary is missing), bounds every line and header, and keeps going past
// malformed part headers.
//
// It imports nothing of bulkmilter.
//
// [textproto.Header]: https://pkg.go.dev/github.com/emersion/go-message/textproto#Header
package mailtext

// Limits bound the work done on one message.
type Limits struct {
	MaxDepth     int // MIME nesting depth, message/rfc822 included
	MaxParts     int // MIME parts visited
	MaxTextBytes int // bytes of decoded text kept per message
	// MaxAttachments is the number of non-text parts kept
	// (Text.Attachments); a negative value keeps none.
	MaxAttachments int
	// MaxAttachBytes is the largest decoded non-text part kept; a
	// larger one is skipped unread past the cap (Stats.AttachSkipped).
	MaxAttachBytes int
}

// DefaultLimits are the limits used when none are configured.
var DefaultLimits = Limits{MaxDepth: 32, MaxParts: 256, MaxTextBytes: 1 << 20, MaxAttachments: 16, MaxAttachBytes: 512 << 10}

// Text is what a reader sees of a message.
type Text struct {
	Subject string
	Parts   []Part   // visible text parts in reading order
	Domains []string // registrable domains of link targets, each once, in order of appearance
	// Images are the paths of the remote images a reader sees (http(s)
	// <img src> of the HTML she is shown, without tracking pixels and
	// spacers declared 1 or 2 pixels wide or high), each once, in order of
	// appearance: host, query and fragment dropped, lower-cased, slashes
	// folded. Image spam whose offer is remote images and whose text is
	// hidden shares them across its copies and hosts.
	Images []string
	// Attachments are the decoded non-text parts, in the order of the
	// message (every part, whichever alternative a reader sees).
	Attachments []Attachment
	Stats       Stats
	Defects     []Defect
}

// Part is the visible text of one MIME part.
type Part struct {
	// ContentType is "text/plain" or "text/html" for the text of a part,
	// or "message/rfc822" for the Subject of an attached message.
	ContentType string
	Text        string // valid UTF-8
}

// Attachment is one decoded non-text part: an image, a PDF, an archive.
// Its bytes are kept as they are, not digested: whoever signs them digests
// or decodes them, and only for the messages it signs (package signature
// signs the parts only of messages whose text it does not sign).
type Attachment struct {
	ContentType string // lower-case media type, e.g. "image/gif"
	Data        []byte // the decoded bytes
}

// Stats describe the message's structure and what was cut or hidden.
type Stats struct {
	Parts          int // MIME parts visited
	MaxDepth       int // deepest nesting seen
	TextBytes      int // bytes of visible text kept
	TruncatedBytes int // bytes of text dropped by Limits.MaxTextBytes (counted before decoding where the rest was not decoded)
	VisibleChars   int // characters of visible HTML text
	HiddenChars    int // characters of HTML text hidden from the reader
	CommentChars   int // characters inside HTML comments (a hiding place for hash-busters)
	Alternatives   int // multipart/alternative groups resolved
	AltMismatch    int // of those, groups whose text/plain and text/html words disagree
	AttachSkipped  int // non-text parts not kept: larger than Limits.MaxAttachBytes, or past Limits.MaxAttachments
}

// DefectKind names a class of defect.
type DefectKind string

// Defect is something wrong with the message that extraction worked around.
type Defect struct {
	Kind   DefectKind
	Detail string
}

// The defect kinds. Each is recorded at most once per message, with the
// detail of its first occurrence.
const (
	DefectMboxFrom         DefectKind = "mbox-from-line"       // message starts with an mbox "From " line
	DefectHeaderMalformed  DefectKind = "header-malformed"     // a header line that is neither a field nor a continuation
	DefectHeaderNoBlank    DefectKind = "header-no-blank-line" // the header ended without a blank line
	DefectHeaderLong       DefectKind = "header-too-long"      // a header field or the header was cut
	DefectNoBoundary       DefectKind = "multipart-no-boundary"
	DefectBoundaryMissing  DefectKind = "boundary-missing"   // a multipart ended without its final boundary
	DefectBoundaryNotFound DefectKind = "boundary-not-found" // a multipart never showed its boundary; its body was read as text
	DefectDepthLimit       DefectKind = "depth-limit"
	DefectPartLimit        DefectKind = "part-limit"
	DefectTextLimit        DefectKind = "text-limit"
	DefectCharsetUnknown   DefectKind = "charset-unknown"  // label not known; text decoded by guess
	DefectCharsetMismatch  DefectKind = "charset-mismatch" // label contradicted by the bytes
	DefectCharsetGuessed   DefectKind = "charset-guessed"  // 8-bit text without a label
	DefectEncodingUnknown  DefectKind = "encoding-unknown" // Content-Transfer-Encoding not known; read as 8bit
	DefectBase64           DefectKind = "base64-invalid"
	DefectQP               DefectKind = "qp-invalid"
	DefectInvalidUTF8      DefectKind = "utf8-invalid" // invalid bytes left after decoding, replaced by U+FFFD
	DefectSubject8bit      DefectKind = "subject-8bit" // raw 8-bit Subject that is not UTF-8
	DefectHTMLSniffed      DefectKind = "html-sniffed" // no Content-Type, body is HTML
	DefectHTMLDepth        DefectKind = "html-depth-limit"
	DefectAltMismatch      DefectKind = "alternative-mismatch"
	DefectLineLong         DefectKind = "line-too-long" // a body line longer than the line buffer
)
