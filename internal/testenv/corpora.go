package testenv

import (
	"os"
	"testing"

	"github.com/bulkmilter/bulkmilter/lab/corpus"
)

// Corpora returns the shared corpora directory (corpus.DefaultDir: $CORPORA
// or ../shared/corpora beside the repository). Without it the test fails
// under CI=true and skips loudly otherwise.
func Corpora(tb testing.TB) string {
	tb.Helper()
	c, err := corpus.DefaultDir()
	if err == nil {
		_, err = os.Stat(c)
	}
	if err != nil {
		if InCI() {
			tb.Fatalf("corpora not found at %s: %v", c, err)
		}
		tb.Skipf("SKIPPED, NOT TESTED: corpora not found at %s (%v); this test needs the shared corpora", c, err)
	}
	return c
}
