package mailtext

import (
	"bytes"
	"io"

	"github.com/emersion/go-message/textproto"
)

// Attached finds the first message attached to a message whose top-level
// header is h and raw body is body: a message/rfc822 or message/global
// part (a part of a multipart/digest without a Content-Type is one), at
// any depth of multipart nesting within lim's depth and part limits, with
// its transfer encoding (base64, quoted-printable, which RFC 2046 forbids
// there but clients use) undone. It returns the attached message raw, as
// at most maxBytes bytes, and false when there is none. Like Extract it
// never fails: a broken multipart is walked as far as it can be, with the
// same boundary scanner, so a feedback report is read the way the message
// it reports is.
func Attached(h textproto.Header, body io.Reader, lim Limits, maxBytes int) ([]byte, bool) {
	w := getWalker(lim)
	defer putWalker(w)
	s := w.stream(body)
	ph := headerFrom(&h)
	raw, found, _ := w.attached(s, &ph, 0, maxBytes)
	return raw, found
}

// attached looks for an attached message in the body of an entity whose
// header h has been read. Unless it found one, it returns the boundary (or
// end of input) that ended the entity.
func (w *walker) attached(s *stream, h *partHeader, depth, maxBytes int) ([]byte, bool, hit) {
	if w.t.Stats.Parts >= w.lim.MaxParts {
		w.defect(DefectPartLimit, "")
		return nil, false, eofHit
	}
	w.t.Stats.Parts++
	switch mt := h.mediaType; {
	case mt == "message/rfc822" || mt == "message/global":
		_, dropped := w.collect(s, rawCap(maxBytes, h.cte), true)
		raw := w.transferDecode(h.cte)
		if dropped > 0 || len(raw) > maxBytes {
			raw = raw[:min(len(raw), maxBytes)]
		}
		return bytes.Clone(raw), true, eofHit
	case len(mt) > len("multipart/") && mt[:len("multipart/")] == "multipart/":
		if h.boundary == "" || depth >= w.lim.MaxDepth {
			return nil, false, w.skip(s)
		}
		s.stack = append(s.stack, []byte(h.boundary))
		level := len(s.stack) - 1
		hh := w.skip(s) // the preamble
		for hh.level == level && !hh.close {
			var ch partHeader
			if m, ok := w.readHeader(s, &ch, false); ok {
				hh = m // a part without a body
				continue
			}
			if mt == "multipart/digest" && !ch.hasCT {
				ch.mediaType = "message/rfc822" // RFC 2046 §5.1.5
			}
			var raw []byte
			var found bool
			if raw, found, hh = w.attached(s, &ch, depth+1, maxBytes); found {
				return raw, true, hh
			}
		}
		s.stack = s.stack[:level]
		if hh.level == level {
			hh = w.skip(s) // the epilogue, up to an outer boundary
		}
		return nil, false, hh
	}
	return nil, false, w.skip(s)
}
