package daemon

import (
	"context"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/detect"
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

// Check reuses its builders (replay.go): every message, checked after
// large, broken and attachment-carrying ones, has the analysis it has
// when taken in alone, and keeps it after the messages checked after it.
// A body or field left in a reused builder, or an analysis pointing into
// its buffers, fails it.
func TestCheckReusesBuilder(t *testing.T) {
	rt, _ := embeddedRuntime(t)
	words := strings.Repeat("Our weekly offers on garden furniture and outdoor lighting for your home. ", 20)
	msgs := []string{
		"Subject: weekly offers\nFrom: shop@example.test\n\n" + words + "\n",
		"Subject: large\n\n" + strings.Repeat("a long line of the large message with words in it\n", 40000),
		"Subject: broken\nContent-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: text/plain; charset=utf-8\n" +
			"Content-Transfer-Encoding: base64\n\n!!!not base64\xff\xfe\n--b\nContent-Type: text/html\n\n<p>unclosed <b>" + words,
		"Subject: attached\nContent-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: text/plain\n\n" + words +
			"\n--b\nContent-Type: application/pdf\nContent-Transfer-Encoding: base64\n\n" +
			strings.Repeat("JVBERi0xLjQKJcfsj6IKNSAwIG9iago8PC9MZW5ndGggNiAwIFI+PgpzdHJlYW0K\n", 30) + "--b--\n",
		"Subject: crlf\r\n\r\n" + strings.ReplaceAll(words, ". ", ".\r\n"),
		"Subject: weekly offers\nFrom: shop@example.test\n\n" + words + "\n",
	}
	rcpts := []string{"someone@example.test"}
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	verdicts := make([]detect.Verdict, len(msgs))
	for i, m := range msgs {
		if verdicts[i] = rt.Check(context.Background(), []byte(m), rcpts, at); verdicts[i].Err != nil {
			t.Fatalf("message %d: %v", i, verdicts[i].Err)
		}
	}
	for i, m := range msgs {
		got, want := verdicts[i].Analysis, rt.Analyze([]byte(m), rcpts)
		if !reflect.DeepEqual(got.Keys, want.Keys) || !reflect.DeepEqual(got.Doc, want.Doc) || !reflect.DeepEqual(got.Text, want.Text) {
			t.Errorf("message %d: checked after others %d keys, %d tokens; alone %d keys, %d tokens",
				i, len(got.Keys), len(got.Doc.Tokens), len(want.Keys), len(want.Doc.Tokens))
		}
	}
	if len(verdicts[0].Analysis.Keys) == 0 || len(verdicts[3].Analysis.Text.Attachments) == 0 {
		t.Fatalf("the messages do not exercise the pipeline: %d keys, %d attachments",
			len(verdicts[0].Analysis.Keys), len(verdicts[3].Analysis.Text.Attachments))
	}
}
