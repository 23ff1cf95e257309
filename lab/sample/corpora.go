package sample

import (
	"os"
	"path/filepath"
)

// DefaultCorpora is where the shared corpora are: $CORPORA when set, else
// ../shared/corpora next to the repository holding the working directory
// (the directory with go.mod, as internal/testenv finds it), else
// ../shared/corpora from the working directory.
func DefaultCorpora() string {
	if c := os.Getenv("CORPORA"); c != "" {
		return c
	}
	dir, err := os.Getwd()
	if err != nil {
		return filepath.Join("..", "shared", "corpora")
	}
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "..", "shared", "corpora")
		}
		parent := filepath.Dir(d)
		if parent == d {
			return filepath.Join("..", "shared", "corpora")
		}
		d = parent
	}
}
