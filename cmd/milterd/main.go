// Command milterd is bulkmilter's daemon: a milter for Postfix and
// Sendmail that detects mass mailings: it joins each message to the
// campaign its near-duplicate signatures point to and counts the
// campaign's distinct recipients, with the admin tools that go with it.
//
// Usage:
//
//	milterd [run] [-config FILE] [-listen ADDR] [-metrics-listen HOST:PORT] [-redis URL]
//	milterd check-config -config FILE
//	milterd scan [-config FILE] MAILBOX...
//	milterd explain [-json] [-config FILE] FILE...
//	milterd votes list|remove [flags]
//	milterd lexicon info [FILE]
//	milterd version
//
// The lab (evaluation, benchmarks, soak, lexicon build) is cmd/bulklab.
// This package only wires the parts together: flags → configuration →
// logger → package daemon.
package main

import (
	"io"
	"os"

	"github.com/bulkmilter/bulkmilter/internal/cli"
)

// program is milterd's command table.
var program = cli.Program{
	Name:    "milterd",
	Default: "run",
	Commands: []cli.Command{
		{Name: "run", Summary: "run the milter daemon (the default)", Run: runDaemon},
		{Name: "check-config", Summary: "check a configuration file and report every problem", Run: checkConfig},
		{Name: "scan", Summary: "replay mailboxes through the pipeline and print each verdict (dry run)", Run: scanCommand},
		{Name: "explain", Summary: "say why messages are tagged or not: text, normalisation, keys, volumes, level (read only)", Run: explainCommand},
		{Name: "votes", Summary: "list or remove users' feedback votes (list|remove)", Run: votesCommand},
		{Name: "lexicon", Summary: "describe a lexicon: lexicon info [FILE]", Run: lexiconCommand},
		{Name: "version", Summary: "print the version", Run: printVersion},
	},
}

func main() {
	os.Exit(mainExit(os.Args[1:], os.Stdout, os.Stderr))
}

func mainExit(args []string, stdout, stderr io.Writer) int {
	return program.Main(args, stdout, stderr)
}

func printVersion(args []string, stdout, stderr io.Writer) error {
	_, err := io.WriteString(stdout, "milterd "+cli.Version()+"\n")
	return err
}
