package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/cli"
	"github.com/bulkmilter/bulkmilter/lab/soak"
)

// soakCommand is "bulklab soak": the logic is in lab/soak.
func soakCommand(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bulklab soak", stderr)
	var (
		addr     = fs.String("addr", "", "milter of a running daemon, inet:HOST:PORT (default: spawn one)")
		metrics  = fs.String("metrics", "", "that daemon's metrics `HOST:PORT` (required with -addr)")
		cfgFile  = fs.String("config", "", "configuration `file` for the spawned daemon")
		redisURL = fs.String("redis", "", "Redis `URL` for the spawned daemon")
		logFile  = fs.String("daemon-log", "", "`file` for the spawned daemon's log (default: discarded)")
		bin      = fs.String("milterd", "", "milterd `binary` to spawn (default: milterd beside this program, else on $PATH)")
		o        = soak.Options{Network: "tcp", Progress: stdout}
	)
	fs.IntVar(&o.Sessions, "sessions", 200, "concurrent MTA connections")
	fs.IntVar(&o.PerSession, "per-session", 20, "messages per connection before it is reopened")
	fs.DurationVar(&o.Duration, "duration", 5*time.Minute, "how long the load runs")
	fs.Int64Var(&o.Messages, "messages", 0, "send exactly this many messages instead of running for -duration (the warm-up is then one pass over the pool)")
	fs.DurationVar(&o.Warmup, "warmup", 10*time.Second, "load before the start sample")
	fs.DurationVar(&o.Settle, "settle", 10*time.Second, "wait after the load for goroutines and memory to come back")
	fs.DurationVar(&o.Every, "every", 10*time.Second, "progress line interval")
	fs.Float64Var(&o.Rate, "rate", 0, "messages per second in all (0: as fast as the daemon answers)")
	fs.IntVar(&o.Pool, "pool", 2000, "distinct messages the load cycles through")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 || (*addr != "") != (*metrics != "") || (*addr != "" && (*cfgFile != "" || *redisURL != "" || *bin != "")) {
		fmt.Fprintln(stderr, "bulklab soak: -addr and -metrics go together, and exclude -config, -redis and -milterd")
		return cli.ErrUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if *addr != "" {
		a, ok := strings.CutPrefix(*addr, "inet:")
		if !ok {
			fmt.Fprintln(stderr, "bulklab soak: -addr must be inet:HOST:PORT")
			return cli.ErrUsage
		}
		o.Addr, o.MetricsURL = a, "http://"+*metrics+"/metrics"
		return report(ctx, o, stdout)
	}
	path, err := milterdPath(*bin)
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
	d, err := soak.Spawn(path, extra, logOut)
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
	length, warmup := o.Duration.String(), o.Warmup.String()
	if o.Messages > 0 {
		length, warmup = fmt.Sprintf("%d messages", o.Messages), fmt.Sprintf("%d messages", o.Pool)
	}
	fmt.Fprintf(stdout, "soak: %d sessions for %s, %s (warm-up %s, settle %s)\n", o.Sessions, length, rate, warmup, o.Settle)
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

// milterdPath finds the daemon binary to soak: the flag, else milterd
// beside this program (go build -o DIR/ ./cmd/...), else on $PATH.
func milterdPath(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "milterd")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	p, err := exec.LookPath("milterd")
	if err != nil {
		return "", errors.New("no milterd binary beside bulklab nor on $PATH: build both (go build -o bin/ ./cmd/milterd ./cmd/bulklab) or name one with -milterd")
	}
	return p, nil
}
