package main

import (
	"strings"
	"testing"
)

func TestCommands(t *testing.T) {
	var got []string
	for _, c := range program.Commands {
		got = append(got, c.Name)
	}
	if want := "eval bench soak lexicon"; strings.Join(got, " ") != want {
		t.Errorf("bulklab commands %q, want %q", got, want)
	}
}
