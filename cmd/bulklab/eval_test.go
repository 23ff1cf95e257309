package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/lab/eval"
)

// TestEvalCI is the short evaluation run by CI: "bulklab eval -ci -check"
// fails when a recall or false-positive figure regresses past its floor
// (eval.FloorsFor("ci"); docs/evaluation.md gives floors and measured
// values side by side). It also checks that every section reported.
func TestEvalCI(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: the short evaluation takes 1–2 minutes of CPU")
	}
	corpora := testenv.Corpora(t)
	bin := plainBinary(t)
	dir := t.TempDir()
	jsonPath, mdPath := filepath.Join(dir, "eval.json"), filepath.Join(dir, "eval.md")
	cmd := exec.Command(bin, "eval", "-ci", "-check", "-q", "-corpora", corpora, "-json", jsonPath, "-markdown", mdPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		md, _ := os.ReadFile(mdPath)
		t.Fatalf("bulklab eval -ci -check: %v\n%s\n%s", err, stderr.String(), md)
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep eval.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Attacks) != len(eval.Attacks()) {
		t.Errorf("%d attacks reported, want %d", len(rep.Attacks), len(eval.Attacks()))
	}
	if rep.HamOneWindow == nil || rep.HamOneWindow.Messages < 5000 {
		t.Errorf("ham stream: %+v", rep.HamOneWindow)
	}
	if len(rep.Real) != 2 || len(rep.Kolcz) != 1 || len(rep.Kolcz[0].Rows) != 8 || rep.Malkin == nil || len(rep.Malkin.Rows) != 8 {
		t.Errorf("sections missing: %d real, %d kolcz, malkin %v", len(rep.Real), len(rep.Kolcz), rep.Malkin != nil)
	}
	md, _ := os.ReadFile(mdPath)
	for _, want := range []string{"### Generated campaigns", "### Real campaigns", "### Kolcz protocol", "### Malkin protocol"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	t.Logf("mean combined recall %.3f, lowest %.3f (%s); %.0f s", rep.Summary.MeanRecall[eval.Combined],
		rep.Summary.MinRecall, rep.Summary.MinRecallAttack, rep.Seconds)
}

func TestEvalUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := mainExit([]string{"eval", "-list"}, &stdout, &stderr); code != 0 {
		t.Fatalf("eval -list: exit %d: %s", code, stderr.String())
	}
	for _, a := range eval.Attacks() {
		if !strings.Contains(stdout.String(), a.Name) {
			t.Errorf("eval -list lacks %s", a.Name)
		}
	}
	stdout.Reset()
	stderr.Reset()
	if code := mainExit([]string{"eval", "-corpora", filepath.Join(t.TempDir(), "none")}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "not found") {
		t.Errorf("eval with a missing corpora directory: exit %d, %q", code, stderr.String())
	}
}
