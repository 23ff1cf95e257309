package daemon

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
