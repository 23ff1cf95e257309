package mailtext

import (
	"bufio"
	"bytes"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/emersion/go-message/textproto"
)

// maxDomains bounds the link domains kept per message.
const maxDomains = 64

// Extract reads a whole raw message (header and body) and returns what a
// reader sees of it. It never fails: a broken header (a line without a
// colon, an mbox "From " line, no blank line) or body still yields whatever
// text can be read, with Defects saying what was wrong. Zero fields of lim
// take their value from DefaultLimits.
func Extract(r io.Reader, lim Limits) *Text {
	w := getWalker(lim)
	defer putWalker(w)
	s := w.stream(r)
	var h partHeader
	w.readHeader(s, &h, true) // no multipart is open yet: no boundary can end it
	return w.run(s, &h)
}

// ExtractParts is Extract for a message whose top-level header has already
// been parsed (the milter receives header fields one by one): h is that
// header and body the raw body after the blank line.
func ExtractParts(h textproto.Header, body io.Reader, lim Limits) *Text {
	w := getWalker(lim)
	defer putWalker(w)
	s := w.stream(body)
	ph := headerFrom(&h)
	return w.run(s, &ph)
}

// walker holds the state of one extraction.
type walker struct {
	lim    Limits
	t      *Text
	budget int  // decoded text bytes left
	stop   bool // a limit was reached: read no further
	hint   string
	// sniffed is the double-byte charset the first unlabelled or
	// mislabelled part was read in: the Subject's hint when no part
	// names a charset (an unlabelled Big5 body has a Big5 Subject).
	sniffed string
	br      *bufio.Reader
	raw     []byte        // raw lines of the current text part
	dec     []byte        // transfer-decoded bytes
	html    htmlExtractor // its domainMemo serves the plain-text parts' links too
	// The word sets of wordSimilarity, empty between uses.
	simA, simB map[string]struct{}
}

var walkerPool = sync.Pool{New: func() any {
	return &walker{br: bufio.NewReaderSize(nil, lineBufSize),
		simA: make(map[string]struct{}), simB: make(map[string]struct{})}
}}

func getWalker(lim Limits) *walker {
	if lim.MaxDepth <= 0 {
		lim.MaxDepth = DefaultLimits.MaxDepth
	}
	if lim.MaxParts <= 0 {
		lim.MaxParts = DefaultLimits.MaxParts
	}
	if lim.MaxTextBytes <= 0 {
		lim.MaxTextBytes = DefaultLimits.MaxTextBytes
	}
	if lim.MaxAttachments == 0 {
		lim.MaxAttachments = DefaultLimits.MaxAttachments
	}
	if lim.MaxAttachBytes <= 0 {
		lim.MaxAttachBytes = DefaultLimits.MaxAttachBytes
	}
	w := walkerPool.Get().(*walker)
	w.lim = lim
	w.t = &Text{}
	w.budget = lim.MaxTextBytes
	w.stop = false
	w.hint, w.sniffed = "", ""
	return w
}

func putWalker(w *walker) {
	w.t = nil
	w.br.Reset(nil)
	if cap(w.raw) > 1<<20 {
		w.raw = nil
	}
	if cap(w.dec) > 1<<20 {
		w.dec = nil
	}
	w.html.release()
	walkerPool.Put(w)
}

// stream starts a stream on r using the walker's buffer. Nested streams
// (an encoded message/rfc822) get their own buffer.
func (w *walker) stream(r io.Reader) *stream {
	return newStream(r, w.br)
}

// run walks the body of the top-level entity and assembles the Text.
func (w *walker) run(s *stream, h *partHeader) *Text {
	var res result
	w.entity(s, h, 0, &res)
	t := w.t
	t.Parts = res.parts
	t.Domains = dedupe(res.domains, maxDomains)
	t.Images = dedupe(res.images, maxImages)
	if h.hasSubject {
		hint := w.hint
		if hint == "" {
			hint = w.sniffed
		}
		t.Subject = w.decodeSubject(h.subject, hint)
	}
	for _, p := range t.Parts {
		t.Stats.TextBytes += len(p.Text)
	}
	return t
}

// defect records a defect of kind k once per message.
func (w *walker) defect(k DefectKind, detail string) {
	for _, d := range w.t.Defects {
		if d.Kind == k {
			return
		}
	}
	w.t.Defects = append(w.t.Defects, Defect{Kind: k, Detail: detail})
}

// result is what one entity contributes: its visible text parts and links.
type result struct {
	parts   []Part
	domains []string
	images  []string
}

func (r *result) add(o *result) {
	r.parts = append(r.parts, o.parts...)
	r.domains = append(r.domains, o.domains...)
	r.images = append(r.images, o.images...)
}

func (r *result) hasHTML() bool {
	for _, p := range r.parts {
		if p.ContentType == "text/html" {
			return true
		}
	}
	return false
}

func (r *result) hasText() bool {
	for _, p := range r.parts {
		if p.ContentType != "message/rfc822" && strings.TrimSpace(p.Text) != "" {
			return true
		}
	}
	return false
}

// entity reads the body of an entity whose header h has been read, up to the
// boundary (or end of input) that ends it, which it returns.
func (w *walker) entity(s *stream, h *partHeader, depth int, out *result) hit {
	if w.stop {
		return eofHit
	}
	if w.t.Stats.Parts >= w.lim.MaxParts {
		w.defect(DefectPartLimit, strconv.Itoa(w.lim.MaxParts)+" parts")
		w.stop = true
		return eofHit
	}
	w.t.Stats.Parts++
	w.t.Stats.MaxDepth = max(w.t.Stats.MaxDepth, depth)

	mt := h.mediaType
	switch {
	case strings.HasPrefix(mt, "multipart/"):
		return w.multipart(s, h, depth, out)
	case mt == "message/rfc822" || mt == "message/global" || mt == "message/news":
		// Read even when marked as an attachment: a forwarded message is
		// shown to the reader either way.
		return w.message(s, h, depth, out)
	case mt == "text/plain" || mt == "text/html" || mt == "text/enriched" || mt == "text/richtext":
		if dispositionIsAttachment(h.disposition) {
			return w.skip(s)
		}
		return w.textPart(s, h, out)
	}
	return w.attachment(s, h)
}

// attachment reads a non-text leaf: it is transfer-decoded and kept when
// it is within the limits, and skipped otherwise. Text types not read
// as text (text/calendar, text/csv …) are skipped.
func (w *walker) attachment(s *stream, h *partHeader) hit {
	if w.lim.MaxAttachments < 0 || strings.HasPrefix(h.mediaType, "text/") {
		return w.skip(s)
	}
	if len(w.t.Attachments) >= w.lim.MaxAttachments {
		w.t.Stats.AttachSkipped++
		return w.skip(s)
	}
	hh, dropped := w.collect(s, attachRawCap(w.lim.MaxAttachBytes, h.cte), false)
	if dropped > 0 {
		w.t.Stats.AttachSkipped++
		return hh
	}
	dec := w.transferDecode(h.cte)
	if cteKind(h.cte) != cteBase64 && len(dec) > 0 && dec[len(dec)-1] == '\n' {
		dec = dec[:len(dec)-1] // the line end before a boundary is the boundary's (RFC 2046 §5.1.1)
	}
	switch {
	case len(dec) == 0:
		return hh
	case len(dec) > w.lim.MaxAttachBytes:
		w.t.Stats.AttachSkipped++
		return hh
	}
	// The attachment takes the buffer it was decoded into (or read into,
	// for an identity encoding) rather than a copy of it; the walker's
	// next part reads into a buffer of its own.
	w.t.Attachments = append(w.t.Attachments, Attachment{ContentType: h.mediaType, Data: dec})
	if dk := cteKind(h.cte); dk == cteBase64 || dk == cteQP {
		w.dec = nil
	} else {
		w.raw = nil
	}
	return hh
}

// attachRawCap is how many raw bytes of a non-text part are kept for a
// decoded size of n: base64 adds a third and a line end every 76
// characters, quoted-printable can triple the size.
func attachRawCap(n int, cte string) int {
	switch cteKind(cte) {
	case cteBase64:
		return n/3*4 + n/3*4/64 + 4096
	case cteQP:
		return 3*n + 4096
	}
	return n + 16
}

// skip consumes the body of an entity that is not read.
func (w *walker) skip(s *stream) hit {
	for {
		line, start, ok := s.lr.next()
		if !ok {
			return eofHit
		}
		if start {
			if hh, ok := s.match(line); ok {
				return hh
			}
		}
	}
}

// collect reads the raw body of a leaf entity into w.raw (LF line ends), up
// to maxRaw bytes; the rest is consumed and counted in dropped, or, with
// stopWhenFull (the text budget is spent: nothing more will be read),
// not read at all.
func (w *walker) collect(s *stream, maxRaw int, stopWhenFull bool) (hh hit, dropped int) {
	w.raw = w.raw[:0]
	for {
		line, start, ok := s.lr.next()
		if !ok {
			return eofHit, dropped
		}
		if start {
			if m, ok := s.match(line); ok {
				return m, dropped
			}
		}
		if len(line) == lineBufSize && s.lr.midLine {
			w.defect(DefectLineLong, "")
		}
		// Normalise CRLF to LF.
		if n := len(line); n >= 2 && line[n-1] == '\n' && line[n-2] == '\r' {
			line = line[:n-1]
			line[n-2] = '\n'
		}
		if room := maxRaw - len(w.raw); room < len(line) {
			if room > 0 {
				w.raw = append(w.raw, line[:room]...)
			}
			dropped += len(line) - max(room, 0)
			if stopWhenFull {
				return eofHit, dropped
			}
			continue
		}
		w.raw = append(w.raw, line...)
	}
}

// transferDecode decodes w.raw by Content-Transfer-Encoding into w.dec and
// returns it.
func (w *walker) transferDecode(cte string) []byte {
	switch cteKind(cte) {
	case cteBase64:
		var bad bool
		w.dec, bad = decodeBase64(slices.Grow(w.dec[:0], len(w.raw)/4*3+3), w.raw)
		if bad {
			w.defect(DefectBase64, "")
		}
		return w.dec
	case cteQP:
		var bad bool
		w.dec, bad = decodeQP(slices.Grow(w.dec[:0], len(w.raw)), w.raw)
		if bad {
			w.defect(DefectQP, "")
		}
		return w.dec
	case cteUnknown:
		w.defect(DefectEncodingUnknown, truncate(strings.TrimSpace(cte), 40))
	}
	return w.raw
}

// rawCap is how many raw bytes of a part are kept for a decoded-text budget
// of n bytes: quoted-printable can triple the size, base64 adds a third.
func rawCap(n int, cte string) int {
	switch cteKind(cte) {
	case cteBase64:
		return n/3*4 + 4096
	case cteQP:
		return 3*n + 4096
	}
	return n + 16
}

// textPart reads a text/plain or text/html leaf.
func (w *walker) textPart(s *stream, h *partHeader, out *result) hit {
	if w.budget <= 0 {
		w.defect(DefectTextLimit, "")
		w.stop = true
		hh, dropped := w.collect(s, 0, true)
		w.t.Stats.TruncatedBytes += dropped
		return hh
	}
	hh, droppedRaw := w.collect(s, rawCap(w.budget, h.cte), true)
	dec := w.transferDecode(h.cte)
	if len(dec) > w.budget {
		w.t.Stats.TruncatedBytes += len(dec) - w.budget
		dec = dec[:w.budget]
		w.defect(DefectTextLimit, "")
	}
	w.t.Stats.TruncatedBytes += droppedRaw
	if droppedRaw > 0 {
		w.defect(DefectTextLimit, "")
	}

	mt := h.mediaType
	if !h.hasCT && sniffHTML(dec) {
		w.defect(DefectHTMLSniffed, "")
		mt = "text/html"
	}
	label := h.charset
	if label == "" && mt == "text/html" {
		label = metaCharset(dec)
	}
	text := w.decodeText(dec, label, "")
	if w.hint == "" && label != "" {
		if _, ok := lookupCharset(label); ok {
			w.hint = label
		}
	}
	if strings.ContainsRune(text, '\r') {
		text = strings.ReplaceAll(text, "\r", "")
	}
	text = w.spend(text)

	switch mt {
	case "text/html":
		r := w.html.extract(text)
		w.t.Stats.VisibleChars += r.visible
		w.t.Stats.HiddenChars += r.hidden
		w.t.Stats.CommentChars += r.comment
		if r.depthLimited {
			w.defect(DefectHTMLDepth, "")
		}
		out.parts = append(out.parts, Part{ContentType: "text/html", Text: r.text})
		out.domains = append(out.domains, r.domains...)
		out.images = append(out.images, r.images...)
	default:
		if h.flowed {
			text = unflow(text, h.delsp)
		}
		out.parts = append(out.parts, Part{ContentType: "text/plain", Text: text})
		out.domains = appendTextDomains(out.domains, text, &w.html.links)
	}
	return hh
}

// spend takes text out of the budget, cutting what does not fit (charset
// decoding can make text longer than the bytes it came from).
func (w *walker) spend(text string) string {
	if len(text) > w.budget {
		w.t.Stats.TruncatedBytes += len(text) - w.budget
		text = strings.ToValidUTF8(text[:w.budget], "")
		w.defect(DefectTextLimit, "")
	}
	w.budget -= len(text)
	if w.budget <= 0 {
		w.stop = true
	}
	return text
}

// sniffHTML reports whether a body without Content-Type is HTML: readers
// that get no type commonly render such a body as HTML.
func sniffHTML(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) > 64 {
		b = b[:64]
	}
	for _, p := range []string{"<html", "<!doctype html", "<head", "<body", "<meta", "<div", "<table", "<p>", "<font", "<center"} {
		if len(b) >= len(p) && bytes.EqualFold(b[:len(p)], []byte(p)) {
			return true
		}
	}
	return false
}

// metaCharset finds a <meta> charset declaration near the top of an HTML
// body that has no MIME charset.
func metaCharset(b []byte) string {
	if len(b) > 2048 {
		b = b[:2048]
	}
	i := indexFold(b, "charset=")
	if i < 0 {
		return ""
	}
	v := b[i+len("charset="):]
	v = bytes.TrimLeft(v, "\"' ")
	end := 0
	for end < len(v) && end < 40 {
		c := v[end]
		if c == '"' || c == '\'' || c == ';' || c == '>' || c == ' ' || c == '/' {
			break
		}
		end++
	}
	return strings.ToLower(string(v[:end]))
}

// indexFold is bytes.Index for an ASCII lower-case needle, ignoring case.
func indexFold(b []byte, needle string) int {
	n := len(needle)
	first := needle[0]
	for i := 0; i+n <= len(b); i++ {
		c := b[i]
		if c|0x20 != first && c != first {
			continue
		}
		if asciiEqualFold(b[i:i+n], needle) {
			return i
		}
	}
	return -1
}

// multipart reads a multipart body: preamble, parts, epilogue.
func (w *walker) multipart(s *stream, h *partHeader, depth int, out *result) hit {
	if h.boundary == "" {
		w.defect(DefectNoBoundary, h.mediaType)
		th := *h
		th.mediaType, th.hasCT = "text/plain", false
		return w.textPart(s, &th, out)
	}
	if depth >= w.lim.MaxDepth {
		w.defect(DefectDepthLimit, strconv.Itoa(depth))
		return w.skip(s)
	}
	s.stack = append(s.stack, []byte(h.boundary))
	level := len(s.stack) - 1
	pop := func() { s.stack = s.stack[:level] }

	// Preamble. It is kept (bounded) in case the boundary never shows:
	// then the body is read as text rather than lost.
	hh, dropped := w.collect(s, min(rawCap(w.budget, ""), 1<<16), false)
	if hh.level != level {
		pop()
		w.defect(DefectBoundaryNotFound, "")
		w.t.Stats.TruncatedBytes += dropped
		if len(bytes.TrimSpace(w.raw)) > 0 && w.budget > 0 {
			w.preambleAsText(h, out)
		}
		if hh.level > level {
			hh = eofHit // cannot happen: deeper levels are not open
		}
		return hh
	}
	alt := h.mediaType == "multipart/alternative"
	var groups []result
	for !hh.close {
		var child result
		var ch partHeader
		if m, ok := w.readHeader(s, &ch, false); ok {
			hh = m // a part without body
		} else {
			hh = w.entity(s, &ch, depth+1, &child)
		}
		if alt {
			groups = append(groups, child)
		} else {
			out.add(&child)
		}
		if hh.level != level {
			break
		}
	}
	pop()
	if alt {
		w.chooseAlternative(groups, out)
	}
	if hh.level == level && hh.close {
		// Epilogue: skipped up to an outer boundary.
		return w.skip(s)
	}
	if !w.stop {
		w.defect(DefectBoundaryMissing, "")
	}
	return hh
}

// preambleAsText reads the collected body of a multipart whose boundary
// never appeared as a text/plain part (or HTML if it looks like HTML).
func (w *walker) preambleAsText(h *partHeader, out *result) {
	dec := w.raw
	if len(dec) > w.budget {
		dec = dec[:w.budget]
	}
	text := w.spend(w.decodeText(dec, h.charset, w.hint))
	if sniffHTML(dec) {
		r := w.html.extract(text)
		w.t.Stats.VisibleChars += r.visible
		w.t.Stats.HiddenChars += r.hidden
		out.parts = append(out.parts, Part{ContentType: "text/html", Text: r.text})
		out.domains = append(out.domains, r.domains...)
		out.images = append(out.images, r.images...)
		return
	}
	out.parts = append(out.parts, Part{ContentType: "text/plain", Text: text})
	out.domains = appendTextDomains(out.domains, text, &w.html.links)
}

// chooseAlternative picks what a reader sees of a multipart/alternative:
// the last alternative carrying HTML, unless it has no visible text; then
// the last alternative with text. It also measures whether the text/plain
// and text/html alternatives say the same thing.
func (w *walker) chooseAlternative(groups []result, out *result) {
	if len(groups) == 0 {
		return
	}
	w.t.Stats.Alternatives++
	pick := -1
	for i := len(groups) - 1; i >= 0; i-- {
		if groups[i].hasHTML() && groups[i].hasText() {
			pick = i
			break
		}
	}
	if pick < 0 {
		for i := len(groups) - 1; i >= 0; i-- {
			if groups[i].hasText() {
				pick = i
				break
			}
		}
	}
	if pick < 0 {
		pick = len(groups) - 1
	}
	// Compare a plain-only alternative with the chosen HTML one.
	if groups[pick].hasHTML() {
		for i := range groups {
			if i == pick || groups[i].hasHTML() || !groups[i].hasText() {
				continue
			}
			sim, ok := wordSimilarity(joinParts(&groups[i]), joinParts(&groups[pick]), w.simA, w.simB)
			if ok && sim < altMismatchThreshold {
				w.t.Stats.AltMismatch++
				w.defect(DefectAltMismatch, "similarity "+strconv.FormatFloat(sim, 'f', 2, 64))
			}
			break
		}
	}
	out.add(&groups[pick])
	// The links a reader can click and the images she sees are those of
	// the HTML alternative, even when its text is empty (an image-only
	// message).
	if !groups[pick].hasHTML() {
		for i := len(groups) - 1; i >= 0; i-- {
			if groups[i].hasHTML() {
				out.domains = append(out.domains, groups[i].domains...)
				out.images = append(out.images, groups[i].images...)
				break
			}
		}
	}
}

func joinParts(r *result) string {
	if len(r.parts) == 1 {
		return r.parts[0].Text
	}
	var b strings.Builder
	for _, p := range r.parts {
		b.WriteString(p.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// message reads a message/rfc822 part: a forwarded or attached message,
// whose Subject and text a reader sees too.
func (w *walker) message(s *stream, h *partHeader, depth int, out *result) hit {
	if depth >= w.lim.MaxDepth {
		w.defect(DefectDepthLimit, strconv.Itoa(depth))
		return w.skip(s)
	}
	switch cteKind(h.cte) {
	case cteBase64, cteQP:
		// An encoded message: decode it (bounded), then walk it as a
		// stream of its own.
		hh, dropped := w.collect(s, rawCap(w.budget, h.cte), true)
		w.t.Stats.TruncatedBytes += dropped
		inner := bytes.Clone(w.transferDecode(h.cte))
		sub := newStream(bytes.NewReader(inner), bufio.NewReaderSize(nil, min(lineBufSize, len(inner)+16)))
		var ih partHeader
		w.readHeader(sub, &ih, false)
		w.innerSubject(&ih, out)
		w.entity(sub, &ih, depth+1, out)
		return hh
	}
	var ih partHeader
	if m, ok := w.readHeader(s, &ih, false); ok {
		w.innerSubject(&ih, out)
		return m
	}
	w.innerSubject(&ih, out)
	return w.entity(s, &ih, depth+1, out)
}

func (w *walker) innerSubject(h *partHeader, out *result) {
	if !h.hasSubject {
		return
	}
	if subj := w.decodeSubject(h.subject, w.hint); subj != "" && w.budget > 0 {
		out.parts = append(out.parts, Part{ContentType: "message/rfc822", Text: w.spend(subj)})
	}
}

func dedupe(in []string, n int) []string {
	if len(in) == 0 {
		return nil
	}
	out := make([]string, 0, min(len(in), n))
	for _, d := range in {
		if slices.Contains(out, d) {
			continue
		}
		out = append(out, d)
		if len(out) == n {
			break
		}
	}
	return out
}
