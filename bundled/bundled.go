// Package bundled holds the default lexicon compiled into the binary: the
// I-Match primary and secondary lexicons, the frequency dictionary for word
// shingles and the context table for context hardening, built from corpora
// whose terms allow shipping derived statistics (all of 20 Newsgroups and
// the Enron ham; see README.md for the exact command and why no other
// corpus is used).
//
// It imports signature alone, whose lexicon it loads.
package bundled

import (
	_ "embed"
	"fmt"
	"sync"

	"github.com/bulkmilter/bulkmilter/signature"
)

//go:embed lexicon.bmlx
var lexiconFile []byte

// LexiconBytes returns the encoded default lexicon. Callers must not
// modify it.
func LexiconBytes() []byte { return lexiconFile }

var load = sync.OnceValues(func() (*signature.Lexicon, error) {
	l, err := signature.LoadLexicon(lexiconFile)
	if err != nil {
		return nil, fmt.Errorf("load bundled lexicon: %w", err)
	}
	return l, nil
})

// Lexicon returns the default lexicon, decoded once.
func Lexicon() (*signature.Lexicon, error) { return load() }
