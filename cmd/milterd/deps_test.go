package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The daemon binary holds what runs in production: no lab package
// (evaluation, corpora, benchmarks, soak, load), no test helper, and so
// not the standard testing package either (which every test helper
// imports, so a new one is caught too). The lab is cmd/bulklab.
func TestDaemonLinksNoLabOrTestCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const module = "github.com/bulkmilter/bulkmilter/"
	testOnly := map[string]bool{
		module + "internal/testenv":   true,
		module + "internal/mtaclient": true,
		module + "store/storetest":    true,
		"testing":                     true,
	}
	var ours int
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, module) {
			ours++
		}
		if strings.HasPrefix(pkg, module+"lab/") || testOnly[pkg] || strings.HasPrefix(pkg, "testing/") {
			t.Errorf("milterd links %s", pkg)
		}
	}
	// The list is real: the daemon's own packages are in it.
	if ours < 10 || !strings.Contains(string(out), module+"daemon\n") {
		t.Errorf("go list -deps names %d bulkmilter packages, without package daemon?\n%s", ours, out)
	}
}
