package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/bulkmilter/bulkmilter/daemon"
	"github.com/bulkmilter/bulkmilter/internal/cli"
	"github.com/bulkmilter/bulkmilter/store"
)

// runDaemon is "milterd run", the default command.
func runDaemon(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("milterd run", stderr)
	cf := cli.ConfigFlags{Daemon: true}
	cf.Register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: milterd [run] [flags]

Runs the milter daemon: the configuration file (or the built-in defaults)
with the flags on top. SIGHUP reloads the configuration, SIGTERM drains.
A configuration with problems is refused with the lines check-config prints.`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "milterd run: unexpected arguments %q\n", fs.Args())
		return cli.ErrUsage
	}
	cfg, err := cf.Load()
	if err != nil {
		return err
	}
	log := cli.NewLogger(cfg, stderr)
	slog.SetDefault(log)
	// go-redis logs every failed dial; during an outage that belongs in
	// debug, the store error metric and one warning per message count it.
	store.RedisLogTo(log)
	d, err := daemon.New(cfg, daemon.Options{Load: cf.Load, Logger: log, Version: cli.Version()})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return d.Run(ctx, hup)
}
