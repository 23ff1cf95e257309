package testenv

import (
	"os"
	"testing"
)

// Golden returns the golden file at path for the caller to compare with
// got, after rewriting it with got when update is set (a package's -update
// flag).
func Golden(t testing.TB, path string, got []byte, update bool) []byte {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	return want
}
