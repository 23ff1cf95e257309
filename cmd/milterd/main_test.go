package main

import (
	"bytes"
	"strings"
	"testing"
)

// The daemon's commands are the production ones; the lab's are bulklab's.
func TestCommands(t *testing.T) {
	var got []string
	for _, c := range program.Commands {
		got = append(got, c.Name)
	}
	if want := "run check-config scan explain votes lexicon version"; strings.Join(got, " ") != want {
		t.Errorf("milterd commands %q, want %q", got, want)
	}
	var stdout, stderr bytes.Buffer
	if code := mainExit([]string{"-h"}, &stdout, &stderr); code != 0 {
		t.Fatalf("milterd -h: exit %d: %s", code, stderr.String())
	}
	for _, name := range got {
		if !strings.Contains(stdout.String(), "\n  "+name+" ") {
			t.Errorf("milterd -h does not list %s:\n%s", name, stdout.String())
		}
	}
	for _, lab := range []string{"eval", "bench", "soak"} {
		stderr.Reset()
		if code := mainExit([]string{lab}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "unknown command") {
			t.Errorf("milterd %s: exit %d, %q; want an unknown command", lab, code, stderr.String())
		}
	}
	stderr.Reset()
	if code := mainExit([]string{"lexicon", "build", "-o", "x"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "bulklab lexicon build") {
		t.Errorf("milterd lexicon build: exit %d, %q; want a pointer to bulklab", code, stderr.String())
	}
}
