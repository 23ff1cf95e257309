package daemon

import (
	"io"
	"testing"
	"time"
)

// A raw message is taken in as the milter session takes it: the verdict
// and feedback headers never reach the pipeline, the body is what follows
// the header (CRLF, as the MTA sends it), an mbox postmark is dropped.
func TestReplayMessage(t *testing.T) {
	rt, _ := embeddedRuntime(t)
	for _, tc := range []struct {
		raw     string
		subject string
		body    string
		fields  int
	}{
		{raw: "Subject: a\r\n b\r\nX-Bulk: yes\r\nTo: x@y\r\n\r\nbody\r\n", subject: "a b", body: "body\r\n", fields: 2},
		{raw: "From x Mon Apr  1 10:00:00 2024\nSubject: s\n\nb\n", subject: "s", body: "b\r\n", fields: 1},
		// A line that is not a field ends the header and starts the body.
		{raw: "Subject: s\nnot a header line\nmore\n", subject: "s", body: "not a header line\r\nmore\r\n", fields: 1},
		{raw: "Subject: only a header", subject: "only a header", body: "", fields: 1},
	} {
		m := rt.Message([]byte(tc.raw), []string{"r@example.test"}, time.Time{})
		body, _ := io.ReadAll(m.Body)
		if got := m.Header.Get("Subject"); got != tc.subject {
			t.Errorf("%q: subject %q, want %q", tc.raw, got, tc.subject)
		}
		if string(body) != tc.body {
			t.Errorf("%q: body %q, want %q", tc.raw, body, tc.body)
		}
		if n := m.Header.Len(); n != tc.fields {
			t.Errorf("%q: %d fields, want %d", tc.raw, n, tc.fields)
		}
		if m.Header.Has("X-Bulk") || len(m.Recipients) != 1 {
			t.Errorf("%q: verdict header %v, recipients %q", tc.raw, m.Header.Has("X-Bulk"), m.Recipients)
		}
	}
}
