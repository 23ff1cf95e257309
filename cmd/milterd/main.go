// Command milterd is bulkmilter's daemon and its offline tools: a milter
// for Postfix and Sendmail that detects mass mailings by near-duplicate
// signatures and counts distinct recipients per signature.
//
// Usage:
//
//	milterd [run] [-config FILE] [-listen ADDR] [-metrics-listen HOST:PORT] [-redis URL]
//	milterd check-config -config FILE
//	milterd lexicon build [-o FILE] CORPUS...
//	milterd scan [-config FILE] MAILBOX...
//	milterd eval [flags]
//	milterd bench [flags]
//	milterd soak [flags]
//	milterd votes list|remove [flags]
//	milterd version
//
// This package only wires the parts together; each part lives in its own
// package.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

// allCommands returns the commands. It is built at run time, not in an
// init function: the files that register offline commands run their init
// after main.go's when their names sort after it.
func allCommands() []command {
	return append([]command{
		{"run", "run the milter daemon (the default)", runDaemon},
		{"check-config", "check a configuration file and report every problem", checkConfig},
		{"version", "print the version", printVersion},
	}, offlineCommands...)
}

// offlineCommands are registered by the files that implement them.
var offlineCommands []command

// errUsage marks a usage error: the message has been printed already.
var errUsage = errors.New("usage")

func main() {
	os.Exit(mainExit(os.Args[1:], os.Stdout, os.Stderr))
}

func mainExit(args []string, stdout, stderr io.Writer) int {
	name, rest := "run", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, rest = args[0], args[1:]
	}
	if name == "help" {
		usage(stdout)
		return 0
	}
	for _, c := range allCommands() {
		if c.name == name {
			err := c.run(rest, stdout, stderr)
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				return 2
			default:
				printError(stderr, name, err)
				return 1
			}
		}
	}
	fmt.Fprintf(stderr, "milterd: unknown command %q\n", name)
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: milterd [command] [flags]\n\ncommands:")
	for _, c := range allCommands() {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'milterd COMMAND -h' for a command's flags.")
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func printVersion(args []string, stdout, stderr io.Writer) error {
	fmt.Fprintln(stdout, "milterd", version())
	return nil
}

// newFlagSet returns a flag set that reports errors to stderr and returns
// them instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("milterd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args, turning flag errors into errUsage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}
