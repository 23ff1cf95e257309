package refile

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzStateFile: whatever the state files hold (a truncated write, a
// file from another version, garbage), New never fails on their content
// and never panics; what it keeps is within the bounds.
func FuzzStateFile(f *testing.F) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	f.Add([]byte(`{"version":1,"ledger":[{"campaign":"a","copy":{"recipient":"r@x","message_id":"<1@x>"},"at":"`+now+`"}]}`),
		[]byte(`{"version":1,"jobs":[{"campaign":"a","copies":[{"recipient":"r@x","message_id":"<1@x>"}]}]}`))
	f.Add([]byte(`{"version":2}`), []byte(`{"version":1,"jobs":[null,{"copies":[]}]}`))
	f.Add([]byte(`{"ledger":[null,{"campaign":""}]`), []byte("\x00"))
	f.Fuzz(func(t *testing.T, ledger, queue []byte) {
		dir := t.TempDir()
		file := filepath.Join(dir, "refile.json")
		if err := os.WriteFile(file, ledger, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file+".queue", queue, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := New(Options{Mover: &inbox{failures: 1 << 30}, File: file, Backoff: time.Hour, MaxEntries: 3, MaxPerCampaign: 2})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if _, rem := r.Pending(); rem > 3 {
			t.Errorf("remembered %d past max_entries 3", rem)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
