package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/soak"
)

func init() {
	offlineCommands = append(offlineCommands, command{"soak",
		"hold a daemon under many MTA sessions and check nothing leaks or is lost", soakCommand})
}

// soakCommand is "milterd soak": the logic is in internal/soak.
func soakCommand(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("soak", stderr)
	var (
		addr     = fs.String("addr", "", "milter of a running daemon, inet:HOST:PORT (default: spawn one)")
		metrics  = fs.String("metrics", "", "that daemon's metrics `HOST:PORT` (required with -addr)")
		cfgFile  = fs.String("config", "", "configuration `file` for the spawned daemon")
		redisURL = fs.String("redis", "", "Redis `URL` for the spawned daemon")
		logFile  = fs.String("daemon-log", "", "`file` for the spawned daemon's log (default: discarded)")
		o        = soak.Options{Network: "tcp", Progress: stdout}
	)
	fs.IntVar(&o.Sessions, "sessions", 200, "concurrent MTA connections")
	fs.IntVar(&o.PerSession, "per-session", 20, "messages per connection before it is reopened")
	fs.DurationVar(&o.Duration, "duration", 5*time.Minute, "how long the load runs")
	fs.DurationVar(&o.Warmup, "warmup", 10*time.Second, "load before the start sample")
	fs.DurationVar(&o.Settle, "settle", 10*time.Second, "wait after the load for goroutines and memory to come back")
	fs.DurationVar(&o.Every, "every", 10*time.Second, "progress line interval")
	fs.Float64Var(&o.Rate, "rate", 0, "messages per second in all (0: as fast as the daemon answers)")
	fs.IntVar(&o.Pool, "pool", 2000, "distinct messages the load cycles through")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 || (*addr != "") != (*metrics != "") || (*addr != "" && (*cfgFile != "" || *redisURL != "")) {
		fmt.Fprintln(stderr, "milterd soak: -addr and -metrics go together, and exclude -config and -redis")
		return errUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if *addr != "" {
		a, ok := strings.CutPrefix(*addr, "inet:")
		if !ok {
			fmt.Fprintln(stderr, "milterd soak: -addr must be inet:HOST:PORT")
			return errUsage
		}
		o.Addr, o.MetricsURL = a, "http://"+*metrics+"/metrics"
		return report(ctx, o, stdout)
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	logOut := io.Discard
	if *logFile != "" {
		f, err := os.Create(*logFile)
		if err != nil {
			return err
		}
		defer f.Close()
		logOut = f
	}
	var extra []string
	if *cfgFile != "" {
		extra = append(extra, "-config", *cfgFile)
	}
	if *redisURL != "" {
		extra = append(extra, "-redis", *redisURL)
	}
	d, err := soak.Spawn(bin, extra, logOut)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "spawned milterd pid %d on %s\n", d.Pid(), d.Addr)
	o.Addr, o.MetricsURL = d.Addr, d.MetricsURL
	err = report(ctx, o, stdout)
	if serr := d.Stop(); serr != nil {
		err = errors.Join(err, fmt.Errorf("spawned daemon: %w", serr))
	}
	return err
}

func report(ctx context.Context, o soak.Options, stdout io.Writer) error {
	rate := "unpaced"
	if o.Rate > 0 {
		rate = fmt.Sprintf("%.0f msgs/s", o.Rate)
	}
	fmt.Fprintf(stdout, "soak: %d sessions for %s, %s (warm-up %s, settle %s)\n", o.Sessions, o.Duration, rate, o.Warmup, o.Settle)
	r, err := soak.Run(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, r)
	if !r.OK() {
		return fmt.Errorf("soak failed: %d problems", len(r.Problems))
	}
	return nil
}
