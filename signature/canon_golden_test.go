package signature

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite golden files")

// readCanonFixture reads a fixture: "Subject:", "Strip:" and "Domains:"
// lines, a blank line, then the body (one part).
func readCanonFixture(t *testing.T, path string) Source {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head, body, ok := strings.Cut(string(raw), "\n\n")
	if !ok {
		t.Fatalf("%s: no blank line after the fixture header", path)
	}
	var src Source
	for _, line := range strings.Split(head, "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "Subject":
			src.Subject = v
		case "Strip":
			src.Strip = strings.Fields(v)
		case "Domains":
			src.Domains = strings.Fields(v)
		default:
			t.Fatalf("%s: unknown fixture field %q", path, k)
		}
	}
	src.Parts = []string{body}
	return src
}

func renderDoc(d *Doc) string {
	var b strings.Builder
	b.WriteString("tokens:\n")
	for i, tok := range d.Tokens {
		if i > 0 && i%12 == 0 {
			b.WriteByte('\n')
		} else if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(tok)
	}
	fmt.Fprintf(&b, "\nletters:\n%s\ndomains: %s\n", d.Letters, strings.Join(d.Domains, " "))
	s := d.Stats
	fmt.Fprintf(&b, "stats: words=%d folded=%d joined=%d removed=%d stripped=%d nonletter=%d\n",
		s.Words, s.Folded, s.Joined, s.Removed, s.Stripped, s.NonLetterRun)
	return b.String()
}

// TestCanonGolden canonicalises the fixtures under testdata/canon and
// compares with their .golden files (go test -run CanonGolden -update
// rewrites them). A change here changes every stored signature: bump
// CanonVersion with it.
func TestCanonGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/canon/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata/canon")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			got := renderDoc(Canonicalize(readCanonFixture(t, f)))
			want := testenv.Golden(t, strings.TrimSuffix(f, ".txt")+".golden", []byte(got), *update)
			if got != string(want) {
				t.Errorf("canonical form of %s changed:\n got:\n%s\nwant:\n%s", f, got, want)
			}
		})
	}
}
