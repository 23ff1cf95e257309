package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/bundled"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/signature"
)

var rebuildLexicon = flag.Bool("rebuild-lexicon", false, "rewrite bundled/lexicon.bmlx from the corpora")

// bundledSources are the corpora the bundled lexicon is built from: only
// those whose terms allow shipping derived statistics (bundled/README.md).
var bundledSources = []string{
	"20newsgroups-bydate/20news-bydate.tar.gz",
	"enron-spam-preprocessed/enron1.tar.gz",
	"enron-spam-preprocessed/enron2.tar.gz",
	"enron-spam-preprocessed/enron3.tar.gz",
	"enron-spam-preprocessed/enron4.tar.gz",
	"enron-spam-preprocessed/enron5.tar.gz",
	"enron-spam-preprocessed/enron6.tar.gz",
}

// The bundled lexicon is exactly what "bulklab lexicon build" makes of its
// sources: the build is deterministic, and a change to extraction or
// canonicalisation that changes a token shows up here.
func TestBundledLexiconReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 35,391 corpus messages")
	}
	dir := testenv.Corpora(t)
	out := filepath.Join(t.TempDir(), "lexicon.bmlx")
	args := []string{"-o", out, "-q"}
	for _, s := range bundledSources {
		args = append(args, filepath.Join(dir, s))
	}
	var stdout, stderr bytes.Buffer
	if err := lexiconBuild(args, &stdout, &stderr); err != nil {
		t.Fatalf("lexicon build: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "35391 documents") {
		t.Errorf("lexicon build read a different number of documents: %s", stdout.String())
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if *rebuildLexicon {
		if err := os.WriteFile("../../bundled/lexicon.bmlx", got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(got, bundled.LexiconBytes()) {
		lex, _ := signature.LoadLexicon(got)
		t.Fatalf("rebuilt lexicon (%d bytes, %s) differs from bundled/lexicon.bmlx (%d bytes): extraction, canonicalisation, the builder or the corpora changed; rebuild with go test ./cmd/bulklab -run TestBundledLexiconReproducible -rebuild-lexicon and update bundled/README.md",
			len(got), lex.Hash(), len(bundled.LexiconBytes()))
	}
}
