package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/bulkmilter/bulkmilter/daemon"
	"github.com/bulkmilter/bulkmilter/internal/cli"
)

// checkConfig is "milterd check-config": it parses and validates a
// configuration, printing every problem with file and line, and exits
// non-zero when there is one. It also checks what the daemon would check
// at start: the secret key's permissions and the lexicon.
func checkConfig(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("milterd check-config", stderr)
	cf := cli.ConfigFlags{Daemon: true}
	cf.Register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: milterd check-config [-config] FILE [flags]

Checks a configuration file as "milterd run" would read it, with the same
flags on top, and reports every problem at once, each with its file, line,
key path and a hint: YAML syntax, unknown keys, values of the wrong type,
invalid values, files it names that cannot be read, the secret key's mode
and the lexicon. Exits 0 and prints OK when there is none, 1 otherwise.`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() == 1 && cf.File == "":
		cf.File = fs.Arg(0)
	case fs.NArg() > 0:
		// Before, extra files were ignored and the defaults said OK.
		fmt.Fprintf(stderr, "milterd check-config: unexpected arguments %q (check one file at a time)\n", fs.Args())
		return cli.ErrUsage
	}
	cfg, err := cf.Load()
	if err != nil {
		return err // printed by cli, as run's
	}
	// Joined, not flattened to text, so that the caller still sees a
	// permission error (and says who runs).
	var problems []error
	if _, err := os.Stat(cfg.SecretKeyPath()); err == nil {
		if _, _, err := daemon.LoadSecret(cfg.SecretKeyPath()); err != nil {
			problems = append(problems, err)
		}
	}
	if _, err := daemon.LoadLexicon(cfg); err != nil {
		problems = append(problems, err)
	}
	if err := daemon.CheckSocketDir(cfg); err != nil {
		problems = append(problems, err)
	}
	if err := errors.Join(problems...); err != nil {
		return err
	}
	if cf.File == "" {
		// "milterd check-config" alone checked the defaults and said OK,
		// which an admin took for the installed file.
		fmt.Fprintf(stdout, "%s: OK (no file named: milterd check-config /etc/bulkmilter/bulkmilter.yml checks the package's)\n", cfg)
		return nil
	}
	fmt.Fprintf(stdout, "%s: OK\n", cfg)
	return nil
}
