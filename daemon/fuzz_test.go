package daemon

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/config"
)

// The secret key file: whatever it holds, LoadSecret refuses it with an
// error or returns at least 16 bytes that are exactly its hex content.
func FuzzLoadSecret(f *testing.F) {
	for _, s := range []string{strings.Repeat("0f", 32) + "\n", "", "zz", strings.Repeat("a", 31), " " + strings.Repeat("AB", 16) + " \r\n", "\x00\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "secret.key")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		secret, created, err := LoadSecret(path)
		if err != nil {
			return
		}
		if created || len(secret) < 16 || hex.EncodeToString(secret) != strings.ToLower(strings.TrimSpace(string(data))) {
			t.Fatalf("LoadSecret(%q) = %x, created %v", data, secret, created)
		}
	})
}

// The replay's header splitter (scan, eval, bench): the body is what follows the
// header in the input, the fields kept are bounded in number and size,
// and the verdict and feedback headers are never kept.
func FuzzSplitHeader(f *testing.F) {
	for _, s := range []string{
		"From a@b Mon Jan 1\nSubject: x\n folded\nX-Bulk: yes\n\nbody",
		"Subject: x\r\nX-Bulk-Feedback: not-bulk\r\n\r\nbody",
		"not a header\nSubject: x\n",
		"A: " + strings.Repeat("v", 20000) + "\n " + strings.Repeat("w", 20000) + "\n\nb",
		" leading fold\n\n",
	} {
		f.Add([]byte(s))
	}
	cfg := config.Default()
	cfg.Limits.MaxHeaders = 8
	f.Fuzz(func(t *testing.T, raw []byte) {
		h, body := SplitHeader(raw, &cfg)
		if !bytes.HasSuffix(raw, body) {
			t.Fatalf("body %q is not the end of the input", body)
		}
		n := 0
		for f := h.Fields(); f.Next(); n++ {
			if strings.EqualFold(f.Key(), cfg.Actions.Header) || strings.EqualFold(f.Key(), cfg.Feedback.Header) {
				t.Errorf("kept %s", f.Key())
			}
			if len(f.Value()) > MaxHeaderValue {
				t.Errorf("field %s: %d bytes", f.Key(), len(f.Value()))
			}
		}
		if n > cfg.Limits.MaxHeaders {
			t.Errorf("%d fields kept, limit %d", n, cfg.Limits.MaxHeaders)
		}
	})
}
