package daemon

import (
	"testing"

	"github.com/bulkmilter/bulkmilter/config"
)

func TestSplitHeader(t *testing.T) {
	c := config.Default()
	cfg := &c
	for _, tc := range []struct {
		raw     string
		subject string
		body    string
		fields  int
	}{
		{raw: "Subject: a\r\n b\r\nX-Bulk: yes\r\nTo: x@y\r\n\r\nbody\r\n", subject: "a b", body: "body\r\n", fields: 2},
		{raw: "From x Mon Apr  1 10:00:00 2024\nSubject: s\n\nb\n", subject: "s", body: "b\n", fields: 1},
		// A line that is not a field ends the header and starts the body.
		{raw: "Subject: s\nnot a header line\nmore\n", subject: "s", body: "not a header line\nmore\n", fields: 1},
		{raw: "Subject: only a header", subject: "only a header", body: "", fields: 1},
	} {
		h, body := SplitHeader([]byte(tc.raw), cfg)
		if got := h.Get("Subject"); got != tc.subject {
			t.Errorf("%q: subject %q, want %q", tc.raw, got, tc.subject)
		}
		if string(body) != tc.body {
			t.Errorf("%q: body %q, want %q", tc.raw, body, tc.body)
		}
		if n := h.Len(); n != tc.fields {
			t.Errorf("%q: %d fields, want %d", tc.raw, n, tc.fields)
		}
		if h.Has("X-Bulk") {
			t.Errorf("%q: the verdict header reached the pipeline", tc.raw)
		}
	}
}
