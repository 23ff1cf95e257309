package daemon

import (
	"bytes"
	"context"
	"strings"
	"time"

	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/detect"
)

// Replaying raw messages (scan, the lab's eval and bench): the runtime's
// pipeline fed the way the milter session feeds it: header fields one by
// one (the verdict and feedback headers left out), the body as it
// follows, both cut at the configured limits.

// Message splits a raw message as an MTA hands it over, arriving at at
// (zero: now).
func (rt *Runtime) Message(raw []byte, rcpts []string, at time.Time) *detect.Message {
	cfg := rt.cfg
	h, body := SplitHeader(raw, cfg)
	truncated := false
	if limit := int(cfg.Limits.MaxMessageBytes); limit > 0 && len(body) > limit {
		body, truncated = body[:limit], true
	}
	return &detect.Message{Header: h, Body: bytes.NewReader(body), Recipients: rcpts, Truncated: truncated, Time: at}
}

// Check runs the whole pipeline for one raw message arriving at at (zero:
// now).
func (rt *Runtime) Check(ctx context.Context, raw []byte, rcpts []string, at time.Time) detect.Verdict {
	return rt.engine.Check(ctx, rt.Message(raw, rcpts, at))
}

// Analyze runs the pure part of the pipeline for one raw message.
func (rt *Runtime) Analyze(raw []byte, rcpts []string) *detect.Analysis {
	return rt.engine.Analyze(rt.Message(raw, rcpts, time.Time{}))
}

// MaxHeaderValue matches the milter session's cap on one field.
const MaxHeaderValue = 16 << 10

// SplitHeader reads the top-level header fields the way Postfix passes
// them to a milter: a line that is not a field (no colon) ends the header
// and starts the body. Folded values are unfolded; the verdict and
// feedback headers are dropped, as the milter does.
func SplitHeader(raw []byte, cfg *config.Config) (textproto.Header, []byte) {
	var h textproto.Header
	var name, value string
	count := 0
	flush := func() {
		if name == "" {
			return
		}
		if !strings.EqualFold(name, cfg.Actions.Header) && !strings.EqualFold(name, cfg.Feedback.Header) && count < cfg.Limits.MaxHeaders {
			if len(value) > MaxHeaderValue {
				value = value[:MaxHeaderValue]
			}
			h.Add(name, value)
			count++
		}
		name, value = "", ""
	}
	rest := raw
	if bytes.HasPrefix(rest, []byte("From ")) { // an mbox postmark
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			rest = rest[i+1:]
		}
	}
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		line, next := rest, []byte(nil)
		if i >= 0 {
			line, next = rest[:i], rest[i+1:]
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		switch {
		case len(line) == 0:
			flush()
			return h, next
		case line[0] == ' ' || line[0] == '\t':
			// Past the cap the rest is dropped anyway; appending it
			// would be quadratic in a header folded many times.
			if name != "" && len(value) <= MaxHeaderValue {
				value += " " + strings.TrimSpace(string(line))
			}
		default:
			colon := bytes.IndexByte(line, ':')
			if colon <= 0 || bytes.ContainsAny(line[:colon], " \t") {
				flush()
				return h, rest
			}
			flush()
			name, value = string(line[:colon]), strings.TrimSpace(string(line[colon+1:]))
		}
		rest = next
	}
	flush()
	return h, nil
}
