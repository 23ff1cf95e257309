package sample

import (
	"bytes"
	"testing"
)

// A message is split as the milter holds it: header fields parsed, the
// body as the MTA sends it (CRLF); a message whose header does not parse
// is all body.
func TestAdd(t *testing.T) {
	var c Corpus
	raws := []string{
		"Subject: hello\nFrom: a@example.org\n\nline one\nline two\n",
		"no header here\nat all\n",
		"Subject: crlf\r\n\r\nalready\r\nCRLF\r\n",
	}
	n := 0
	for _, r := range raws {
		c.add([]byte(r))
		n += len(r)
	}
	if len(c.Messages) != 3 || c.Bytes != int64(n) {
		t.Fatalf("%d messages, %d bytes", len(c.Messages), c.Bytes)
	}
	m := c.Messages[0]
	if m.Header.Get("Subject") != "hello" || m.Header.Get("From") != "a@example.org" {
		t.Errorf("header: %v", m.Header)
	}
	if !bytes.Equal(m.Body, []byte("line one\r\nline two\r\n")) {
		t.Errorf("body %q", m.Body)
	}
	if m := c.Messages[1]; m.Header.Len() != 0 || !bytes.Equal(m.Body, []byte("no header here\r\nat all\r\n")) {
		t.Errorf("headerless message: header %v, body %q", m.Header, m.Body)
	}
	if m := c.Messages[2]; m.Header.Get("Subject") != "crlf" || !bytes.Equal(m.Body, []byte("already\r\nCRLF\r\n")) {
		t.Errorf("CRLF message: header %v, body %q", m.Header, m.Body)
	}
}

func TestLoadCorpusMissing(t *testing.T) {
	if _, err := LoadCorpus(t.TempDir(), SpamAssassin, 4, 10); err == nil {
		t.Error("no error for a directory without the archives")
	}
}
