package mailtext

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite golden files")

// render prints a Text in the stable form the golden files hold.
func render(t *Text) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Subject: %q\n", t.Subject)
	for i, p := range t.Parts {
		fmt.Fprintf(&b, "--- part %d %s\n%s\n", i, p.ContentType, p.Text)
	}
	fmt.Fprintf(&b, "--- domains\n%s\n", strings.Join(t.Domains, "\n"))
	s := t.Stats
	fmt.Fprintf(&b, "--- stats\nparts=%d depth=%d text=%d truncated=%d visible=%d hidden=%d comment=%d alternatives=%d altmismatch=%d\n",
		s.Parts, s.MaxDepth, s.TextBytes, s.TruncatedBytes, s.VisibleChars, s.HiddenChars, s.CommentChars, s.Alternatives, s.AltMismatch)
	b.WriteString("--- defects\n")
	for _, d := range t.Defects {
		fmt.Fprintf(&b, "%s %s\n", d.Kind, d.Detail)
	}
	return b.String()
}

// TestGolden extracts every fixture under testdata/golden and compares the
// result with its .golden file (go test -run Golden -update rewrites them).
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/golden/*.eml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata/golden")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got := render(Extract(bytes.NewReader(raw), DefaultLimits))
			want := testenv.Golden(t, strings.TrimSuffix(f, ".eml")+".golden", []byte(got), *update)
			if got != string(want) {
				t.Errorf("extraction of %s changed:\n got:\n%s\nwant:\n%s", f, got, want)
			}
		})
	}
}
