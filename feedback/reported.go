package feedback

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"strings"

	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/detect"
)

// Bounds on the walk for the attached message: a report is a short
// wrapper around one message.
const (
	maxWalkDepth = 4
	maxWalkParts = 64
	maxHeaders   = 1000
	maxHeaderLen = 64 << 10
)

// Reported returns the message a report is about: the first
// message/rfc822 (or message/global) part of the report, at any depth of
// multipart nesting up to a small bound, else the report itself. attached
// reports which one it is. The result's Recipients are left empty and its
// Truncated flag is the report's. Broken MIME never fails: it falls back
// to the report itself.
func Reported(report *detect.Message) (msg *detect.Message, attached bool) {
	body, err := io.ReadAll(report.Body)
	self := &detect.Message{Header: report.Header, Body: bytes.NewReader(body), Truncated: report.Truncated}
	if err != nil {
		return self, false
	}
	raw, ok := findMessage(report.Header.Get("Content-Type"), report.Header.Get("Content-Transfer-Encoding"), body, 0, new(int))
	if !ok {
		return self, false
	}
	h, rest, err := readHeader(raw)
	if err != nil {
		return self, false
	}
	return &detect.Message{Header: h, Body: bytes.NewReader(rest), Truncated: report.Truncated}, true
}

// findMessage looks for the first attached message in an entity with the
// given content type, transfer encoding and body.
func findMessage(contentType, cte string, body []byte, depth int, parts *int) ([]byte, bool) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, false
	}
	switch {
	case mt == "message/rfc822" || mt == "message/global":
		// RFC 2046 allows only 7bit, 8bit and binary here; some clients
		// base64-encode it anyway.
		return decode(cte, body), true
	case strings.HasPrefix(mt, "multipart/") && depth < maxWalkDepth:
		boundary := params["boundary"]
		if boundary == "" {
			return nil, false
		}
		mr := multipart.NewReader(bytes.NewReader(body), boundary)
		for *parts < maxWalkParts {
			p, err := mr.NextRawPart()
			if err != nil {
				return nil, false
			}
			*parts++
			data, err := io.ReadAll(p)
			if err != nil {
				return nil, false
			}
			ct := p.Header.Get("Content-Type")
			if ct == "" {
				ct = "text/plain"
				if mt == "multipart/digest" {
					ct = "message/rfc822"
				}
			}
			if m, ok := findMessage(ct, p.Header.Get("Content-Transfer-Encoding"), data, depth+1, parts); ok {
				return m, true
			}
		}
	}
	return nil, false
}

// decode undoes a base64 or quoted-printable transfer encoding; anything
// else, or data that does not decode, is returned as it is.
func decode(cte string, data []byte) []byte {
	var r io.Reader
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, &newlineDropper{r: bytes.NewReader(data)})
	case "quoted-printable":
		r = quotedprintable.NewReader(bytes.NewReader(data))
	default:
		return data
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return data
	}
	return out
}

// newlineDropper removes line breaks and spaces, which base64 bodies carry
// and the decoder rejects.
type newlineDropper struct{ r io.Reader }

func (d *newlineDropper) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	j := 0
	for _, c := range p[:n] {
		if c != '\r' && c != '\n' && c != ' ' && c != '\t' {
			p[j] = c
			j++
		}
	}
	return j, err
}

// readHeader splits a raw message into its header, with values unfolded
// the way the milter hands them to the pipeline, and its body.
func readHeader(raw []byte) (textproto.Header, []byte, error) {
	br := bufio.NewReader(bytes.NewReader(raw))
	src, err := textproto.ReadHeader(br)
	if err != nil && !errors.Is(err, io.EOF) {
		return textproto.Header{}, nil, err
	}
	rest, _ := io.ReadAll(br)
	// Rebuild from the raw fields, in order, unfolded and bounded the way
	// milter/session.go treats what the MTA sends (the value after the
	// colon without its first space and final line break).
	var h textproto.Header
	n := 0
	for f := src.Fields(); f.Next() && n < maxHeaders; n++ {
		var v []byte
		if raw, err := f.Raw(); err == nil {
			_, v, _ = bytes.Cut(raw, []byte(":"))
			v = bytes.TrimSuffix(bytes.TrimSuffix(v, []byte("\n")), []byte("\r"))
			v = bytes.TrimPrefix(v, []byte(" "))
		} else {
			v = []byte(f.Value()) // not RFC 6532 text: the parsed value
		}
		if len(v) > maxHeaderLen {
			v = v[:maxHeaderLen]
		}
		h.Add(f.Key(), unfold(string(v)))
	}
	return h, rest, nil
}

// unfold joins a folded header value into one line, as milter/session.go
// does with the fields the MTA sends.
func unfold(v string) string {
	if !strings.ContainsAny(v, "\r\n") {
		return v
	}
	v = strings.ReplaceAll(v, "\r\n", "")
	return strings.ReplaceAll(v, "\n", "")
}
