//go:build bundledbuild

package bundled

// The build of the bundled lexicon. It needs the canonicaliser and the
// message-text extractor (branch issue3-text) and the shared corpora, so
// it is behind the bundledbuild tag; see README.md.

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/corpus"
	"github.com/bulkmilter/bulkmilter/mailtext"
	"github.com/bulkmilter/bulkmilter/signature"
)

var rebuild = flag.Bool("rebuild", false, "rewrite lexicon.bmlx from the corpora")

// bundledSources are the corpora whose terms allow shipping derived
// statistics, with the messages taken from each.
var bundledSources = []struct {
	path   string
	filter func(name string) bool
}{
	{"20newsgroups-bydate/20news-bydate.tar.gz", nil},
	{"enron-spam-preprocessed/enron1.tar.gz", isHam},
	{"enron-spam-preprocessed/enron2.tar.gz", isHam},
	{"enron-spam-preprocessed/enron3.tar.gz", isHam},
	{"enron-spam-preprocessed/enron4.tar.gz", isHam},
	{"enron-spam-preprocessed/enron5.tar.gz", isHam},
	{"enron-spam-preprocessed/enron6.tar.gz", isHam},
}

func isHam(name string) bool { return strings.Contains(name, "/ham/") }

// BuildBundled builds the bundled lexicon from the corpora under dir.
func buildBundled(t *testing.T, dir string) (*signature.Lexicon, int) {
	b := signature.NewLexiconBuilder(signature.DefaultBuilderOptions())
	n := 0
	for _, src := range bundledSources {
		opts := corpus.Options{Filter: src.filter}
		err := opts.Walk(filepath.Join(dir, src.path), func(m *corpus.Message) error {
			txt := mailtext.Extract(bytes.NewReader(m.Data), mailtext.DefaultLimits)
			s := signature.Source{Subject: txt.Subject, Domains: txt.Domains}
			for _, p := range txt.Parts {
				s.Parts = append(s.Parts, p.Text)
			}
			b.Add(signature.Canonicalize(s))
			n++
			return nil
		})
		if err != nil {
			t.Fatalf("read %s: %v", src.path, err)
		}
	}
	l, err := b.Build(signature.DefaultLexiconParams())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("documents %d; builder %+v; lexicon %+v; hash %s", n, b.Stats(), l.Stats(), l.Hash())
	return l, n
}

// TestBundledLexiconReproducible rebuilds the lexicon and compares it byte
// for byte with the embedded file (-rebuild rewrites the file).
func TestBundledLexiconReproducible(t *testing.T) {
	// The corpora sit beside the repository (../shared/corpora from its
	// root); CORPORA overrides that for a checkout elsewhere.
	dir := os.Getenv("CORPORA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "corpora")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("corpora not found at %s: %v", dir, err)
	}
	l, n := buildBundled(t, dir)
	if n != 18846+16545 {
		t.Errorf("read %d documents, want 35391 (18,846 posts + 16,545 Enron ham)", n)
	}
	raw, _ := l.MarshalBinary()
	if *rebuild {
		if err := os.WriteFile("lexicon.bmlx", raw, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(raw, LexiconBytes()) {
		t.Fatalf("rebuilt lexicon (%d bytes, %s) differs from lexicon.bmlx (%d bytes): canonicalisation, the builder or the corpora changed; rebuild with -rebuild and bump nothing else (the lexicon hash is part of the signature version)", len(raw), l.Hash(), len(LexiconBytes()))
	}
}
