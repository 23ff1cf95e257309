// Command bulklab is bulkmilter's lab: the evaluation, the benchmarks, the
// soak and the lexicon builder. It builds the daemon's own runtime
// (package daemon) from a configuration, so what it measures is what
// milterd runs. Admins never need it; it is not part of the daemon binary.
//
// Usage:
//
//	bulklab eval [flags]
//	bulklab bench [flags]
//	bulklab soak [-milterd BIN] [flags]
//	bulklab lexicon build [-o FILE] CORPUS...
package main

import (
	"io"
	"os"

	"github.com/bulkmilter/bulkmilter/internal/cli"
)

// program is bulklab's command table.
var program = cli.Program{
	Name: "bulklab",
	Commands: []cli.Command{
		{Name: "eval", Summary: "measure detection on the shared corpora under the attack suite", Run: evalCommand},
		{Name: "bench", Summary: "measure throughput, latency, Redis cost and store memory on the corpora", Run: benchCommand},
		{Name: "soak", Summary: "hold a milterd under many MTA sessions and check nothing leaks or is lost", Run: soakCommand},
		{Name: "lexicon", Summary: "build a lexicon from corpora: lexicon build", Run: lexiconCommand},
	},
}

func main() {
	if os.Getenv(benchMilterEnv) != "" {
		os.Exit(benchMilterMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(mainExit(os.Args[1:], os.Stdout, os.Stderr))
}

func mainExit(args []string, stdout, stderr io.Writer) int {
	return program.Main(args, stdout, stderr)
}
