package feedback

import (
	"bytes"
	"io"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/mailtext"
)

// reported returns the message a report is about: the first attached
// message/rfc822 (or message/global) part of the report, found by
// mailtext.Attached, else the report itself; attached says which. The
// attached message is read through a detect.Builder with the daemon's
// limits, exactly as if the MTA had sent it. The result's Recipients are
// empty; it is truncated when the report was. Broken MIME never fails: it
// falls back to the report itself.
func (h *Handler) reported(report *detect.Message) (msg *detect.Message, attached bool) {
	body, err := io.ReadAll(report.Body)
	self := &detect.Message{Header: report.Header, Body: bytes.NewReader(body), Truncated: report.Truncated}
	if err != nil {
		return self, false
	}
	raw, ok := mailtext.Attached(report.Header, bytes.NewReader(body), h.opt.Limits.Text, len(body))
	if !ok {
		return self, false
	}
	b := detect.NewBuilder(h.opt.Limits, h.opt.VerdictHeader, h.opt.FeedbackHeader)
	b.ReadRaw(raw)
	msg = b.Message()
	msg.Truncated = msg.Truncated || report.Truncated
	return msg, true
}
