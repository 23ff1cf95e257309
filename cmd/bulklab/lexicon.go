package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/cli"
	"github.com/bulkmilter/bulkmilter/lab/corpus"
	"github.com/bulkmilter/bulkmilter/mailtext"
	"github.com/bulkmilter/bulkmilter/signature"
)

// lexiconCommand is "bulklab lexicon build"; "milterd lexicon info"
// describes the result.
func lexiconCommand(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "build" {
		fmt.Fprintln(stderr, "usage: bulklab lexicon build -o FILE [flags] CORPUS...")
		return cli.ErrUsage
	}
	return lexiconBuild(args[1:], stdout, stderr)
}

// lexiconBuild computes document frequencies and bigram contexts over
// corpora with the daemon's own extraction and canonicalisation, and
// writes a lexicon file. The same corpora and flags give the same bytes.
func lexiconBuild(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bulklab lexicon build", stderr)
	out := fs.String("o", "", "write the lexicon to this `file` (required)")
	exclude := fs.String("exclude-label", "spam", "skip messages the corpus labels so (spam, ham, none)")
	p := signature.DefaultLexiconParams()
	fs.Float64Var(&p.NidfMin, "nidf-min", p.NidfMin, "lower end of the primary lexicon's normalised idf window")
	fs.Float64Var(&p.NidfMax, "nidf-max", p.NidfMax, "upper end of the primary lexicon's normalised idf window")
	fs.IntVar(&p.MinDF, "min-df", p.MinDF, "drop terms in fewer documents")
	fs.IntVar(&p.MaxSecondary, "max-secondary", p.MaxSecondary, "largest secondary lexicon")
	fs.IntVar(&p.DictMinDF, "dict-min-df", p.DictMinDF, "least document frequency of a shingle dictionary word")
	fs.IntVar(&p.ContextMinCount, "context-min", p.ContextMinCount, "least count of a valid context bigram")
	fs.IntVar(&p.ContextsPerTerm, "contexts-per-term", p.ContextsPerTerm, "most contexts kept per lexicon term")
	quiet := fs.Bool("q", false, "no progress on stderr")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bulklab lexicon build -o FILE [flags] CORPUS...\n\nCORPUS is an mbox, a maildir, a directory of messages or a tar archive (.gz, .bz2, .xz).")
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() == 0 {
		fs.Usage()
		return cli.ErrUsage
	}
	if err := p.Validate(); err != nil {
		return err
	}
	skip := corpus.Label(-1)
	switch *exclude {
	case "spam":
		skip = corpus.Spam
	case "ham":
		skip = corpus.Ham
	case "none":
	default:
		return fmt.Errorf("-exclude-label %q: want spam, ham or none", *exclude)
	}

	b := signature.NewLexiconBuilder(signature.DefaultBuilderOptions())
	start, n := time.Now(), 0
	for _, path := range fs.Args() {
		err := corpus.Walk(path, func(m *corpus.Message) error {
			if m.Label == skip {
				return nil
			}
			b.Add(canonical(m.Data))
			n++
			if !*quiet && n%5000 == 0 {
				fmt.Fprintf(stderr, "%d documents (%s)\n", n, time.Since(start).Round(time.Second))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
	}
	lex, err := b.Build(p)
	if err != nil {
		return err
	}
	raw, err := lex.MarshalBinary()
	if err != nil {
		return err
	}
	if err := writeFileAtomic(*out, raw); err != nil {
		return err
	}
	st := lex.Stats()
	fmt.Fprintf(stdout, "%s: %d documents, %d terms (%d primary, %d secondary), %d contexts, %d bytes, sha256 %s\n",
		*out, n, st.Terms, st.Primary, st.Secondary, st.Contexts, len(raw), lex.Hash())
	return nil
}

// canonical runs one raw message through the daemon's extraction and
// canonicalisation.
func canonical(raw []byte) *signature.Doc {
	txt := mailtext.Extract(bytes.NewReader(raw), mailtext.DefaultLimits)
	s := signature.Source{Subject: txt.Subject, Domains: txt.Domains}
	for _, p := range txt.Parts {
		s.Parts = append(s.Parts, p.Text)
	}
	return signature.Canonicalize(s)
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it into place, so a reader never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
