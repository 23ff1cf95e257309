package corpus

import (
	"errors"
	"os"
	"path/filepath"
)

// DefaultDir returns where the shared corpora are expected: $CORPORA when
// set, else ../shared/corpora beside the repository (the directory holding
// go.mod) above the working directory. It does not check that it exists.
func DefaultDir() (string, error) {
	if d := os.Getenv("CORPORA"); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", "corpora"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("corpora: no $CORPORA and no repository (go.mod) above the working directory")
		}
		dir = parent
	}
}
