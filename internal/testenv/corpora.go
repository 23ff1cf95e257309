package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// Corpora returns the shared corpora directory: $CORPORA when set, else
// ../shared/corpora next to the repository (the directory holding go.mod).
// Without it the test fails under CI=true and skips loudly otherwise.
func Corpora(tb testing.TB) string {
	tb.Helper()
	c := os.Getenv("CORPORA")
	if c == "" {
		root, err := RepoRoot()
		if err != nil {
			tb.Fatal(err)
		}
		c = filepath.Join(root, "..", "shared", "corpora")
	}
	if _, err := os.Stat(c); err != nil {
		if InCI() {
			tb.Fatalf("corpora not found at %s: %v", c, err)
		}
		tb.Skipf("SKIPPED, NOT TESTED: corpora not found at %s (%v); this test needs the shared corpora", c, err)
	}
	return c
}

// RepoRoot returns the directory holding go.mod, above the working
// directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}
