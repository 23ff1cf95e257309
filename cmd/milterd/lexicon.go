package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/bulkmilter/bulkmilter/bundled"
	"github.com/bulkmilter/bulkmilter/internal/cli"
	"github.com/bulkmilter/bulkmilter/signature"
)

// lexiconCommand is "milterd lexicon info [FILE]": it describes the
// bundled lexicon or a lexicon file. Building one is "bulklab lexicon
// build".
func lexiconCommand(args []string, stdout, stderr io.Writer) error {
	const usage = "usage: milterd lexicon info [FILE]\n\nDescribes the bundled lexicon, or the lexicon FILE (signatures.lexicon):\nits hash, documents, terms and contexts. Building a lexicon is\n\"bulklab lexicon build\" (cmd/bulklab)."
	// -h anywhere asks for this text: "lexicon info -h" read a file named -h.
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprintln(stdout, usage)
			return flag.ErrHelp
		}
	}
	if len(args) == 0 || args[0] != "info" || len(args) > 2 {
		fmt.Fprintln(stderr, usage)
		return cli.ErrUsage
	}
	return lexiconInfo(args[1:], stdout, stderr)
}

func lexiconInfo(args []string, stdout, stderr io.Writer) error {
	var lex *signature.Lexicon
	var err error
	name := "bundled lexicon"
	if len(args) == 0 {
		lex, err = bundled.Lexicon()
	} else {
		name = args[0]
		var data []byte
		if data, err = os.ReadFile(args[0]); err == nil {
			lex, err = signature.LoadLexicon(data)
		}
	}
	if err != nil {
		return err
	}
	st, p := lex.Stats(), lex.Params()
	fmt.Fprintf(stdout, "%s\n  sha256     %s\n  documents  %d\n  terms      %d (%d primary, %d secondary)\n  primary df [%d, %d] (nidf [%g, %g])\n  contexts   %d\n",
		name, lex.Hash(), st.Docs, st.Terms, st.Primary, st.Secondary, st.DFLow, st.DFHigh, p.NidfMin, p.NidfMax, st.Contexts)
	return nil
}
