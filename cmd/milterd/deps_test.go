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

// TestPackageImports holds every package to the imports its doc comment
// allows (bulkmilter packages only; the commands wire everything and are
// left out). A new package, or a new import, needs its doc and this table
// changed together.
func TestPackageImports(t *testing.T) {
	product := "admin bundled config declared detect explain feedback internal/gopool internal/ratelog mailbox mailtext metrics milter refile signature store"
	allowed := map[string]string{
		"admin":                      "store",
		"bundled":                    "signature",
		"config":                     "signature store",
		"daemon":                     product,
		"declared":                   "",
		"deploy":                     "",
		"detect":                     "declared internal/gopool mailtext signature store",
		"explain":                    "declared detect signature store",
		"feedback":                   "detect internal/ratelog mailtext signature store",
		"internal/cli":               "config",
		"internal/gopool":            "",
		"internal/mtaclient":         "detect",
		"internal/ratelog":           "",
		"internal/testenv":           "lab/corpus",
		"lab/bench":                  "internal/mtaclient internal/testenv lab/load lab/redisinfo lab/sample milter store",
		"lab/corpus":                 "mailbox",
		"lab/eval":                   "detect lab/corpus mailbox mailtext refile signature store",
		"lab/load":                   "internal/mtaclient",
		"lab/redisinfo":              "",
		"lab/sample":                 "detect lab/corpus",
		"lab/soak":                   "internal/mtaclient lab/load",
		"mailbox":                    "",
		"mailtext":                   "",
		"metrics":                    "internal/gopool",
		"milter":                     "detect feedback internal/gopool internal/ratelog",
		"refile":                     "detect signature",
		"signature":                  "internal/gopool",
		"signature/internal/confgen": "",
		"store":                      "",
		"store/storetest":            "store",
	}
	const module = "github.com/bulkmilter/bulkmilter/"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		if strings.HasPrefix(pkg, "cmd/") {
			continue
		}
		allow, ok := allowed[pkg]
		if !ok {
			t.Errorf("package %s is not in the table: add it with the imports its doc comment allows", pkg)
			continue
		}
		seen++
		for _, imp := range f[1:] {
			if dep, ours := strings.CutPrefix(imp, module); ours && !strings.Contains(" "+allow+" ", " "+dep+" ") {
				t.Errorf("%s imports %s, which its doc comment does not allow", pkg, dep)
			}
		}
	}
	if seen != len(allowed) {
		t.Errorf("go list named %d of the table's %d packages", seen, len(allowed))
	}
}
