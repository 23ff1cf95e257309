package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/bundled"
)

func TestLexiconInfo(t *testing.T) {
	var stdout bytes.Buffer
	if err := lexiconInfo(nil, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	lex, _ := bundled.Lexicon()
	if !strings.Contains(stdout.String(), lex.Hash()) {
		t.Errorf("lexicon info does not show the bundled lexicon's hash:\n%s", stdout.String())
	}
}
