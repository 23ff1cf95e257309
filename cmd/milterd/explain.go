package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/bulkmilter/bulkmilter/admin"
	"github.com/bulkmilter/bulkmilter/daemon"
	"github.com/bulkmilter/bulkmilter/explain"
	"github.com/bulkmilter/bulkmilter/internal/cli"
)

// "milterd explain FILE..." says why a message was tagged, or not: the
// text a reader sees, what was removed or normalised and why, each
// family's keys and volumes, the campaign, the level and its reasons
// (package explain). It reads the configured store and never writes it:
// Redis is only read; the embedded store's file is copied and the copy
// read, or, while a running daemon holds the file, that daemon is asked
// at /admin/explain (as milterd votes does).

func explainCommand(args []string, stdout, stderr io.Writer) error {
	fset := cli.NewFlagSet("milterd explain", stderr)
	cf := cli.ConfigFlags{Daemon: true}
	cf.Register(fset)
	asJSON := fset.Bool("json", false, "print one JSON object per message")
	var rcpts stringList
	fset.Var(&rcpts, "rcpt", "envelope recipient `ADDR` (repeatable); their names and addresses are stripped as the daemon strips them")
	fset.Usage = func() {
		fmt.Fprintln(stderr, `usage: milterd explain [flags] FILE...

Explains each message (a raw RFC 5322 file; - reads standard input): the text a
reader sees after extraction, what was removed or normalised and why, each
signature family's keys with their volumes in the configured store, the
campaign, the verdict, its bulk level and the reasons. The store is read, never
written; the message's own recipients are not counted.`)
		fset.PrintDefaults()
	}
	if err := cli.ParseFlags(fset, args); err != nil {
		return err
	}
	if fset.NArg() == 0 {
		fset.Usage()
		return cli.ErrUsage
	}
	cfg, err := cf.Load()
	if err != nil {
		return err
	}
	// Never create a secret: a new one would sign nothing like the daemon.
	if _, err := os.Stat(cfg.SecretKeyPath()); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no secret key at %s: no daemon has run with this configuration (check -config and -data-dir)", cfg.SecretKeyPath())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var explainOne func(raw []byte, name string) (explain.Report, error)
	snap, cleanup, err := daemon.StoreSnapshot(cfg)
	switch {
	case errors.Is(err, daemon.ErrStoreBusy):
		if cfg.MetricsListen == "" {
			return fmt.Errorf("%w; the daemon holding it has no metrics listener to ask: set metrics_listen", err)
		}
		secret, _, err := daemon.LoadSecret(cfg.SecretKeyPath())
		if err != nil {
			return err
		}
		c := admin.NewClient(cfg.MetricsListen, admin.Token(secret))
		explainOne = func(raw []byte, name string) (r explain.Report, err error) {
			return r, c.Explain(ctx, raw, rcpts, name, &r)
		}
	case err != nil:
		return err
	default:
		defer cleanup()
		rt, err := daemon.NewRuntime(snap, slog.New(slog.DiscardHandler), nil, nil)
		if err != nil {
			return err
		}
		defer rt.Close()
		explainOne = func(raw []byte, name string) (explain.Report, error) {
			return rt.ExplainReport(ctx, raw, rcpts, name), nil
		}
	}
	enc := json.NewEncoder(stdout)
	for i, name := range fset.Args() {
		raw, err := readMessage(name)
		if err != nil {
			return err
		}
		r, err := explainOne(raw, name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if *asJSON {
			err = enc.Encode(&r)
		} else {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			err = r.WriteText(stdout)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readMessage reads a file ("-": standard input) of at most
// admin.MaxExplainBytes.
func readMessage(name string) ([]byte, error) {
	f := os.Stdin
	if name != "-" {
		var err error
		if f, err = os.Open(name); err != nil {
			return nil, err
		}
		defer f.Close()
	}
	raw, err := io.ReadAll(io.LimitReader(f, admin.MaxExplainBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(raw) > admin.MaxExplainBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, admin.MaxExplainBytes)
	}
	return raw, nil
}
