package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkmilter/bulkmilter/daemon"
	"github.com/bulkmilter/bulkmilter/lab/bench"
	"github.com/bulkmilter/bulkmilter/metrics"
)

// benchMilterEnv marks a bulklab process started by "bulklab bench" to
// serve one milter: each milter of the end-to-end rows runs in a process
// of its own, as Rspamd's do, so that the CPU of the load client, of the
// milter and of its store is each counted apart.
const benchMilterEnv = "BULKLAB_BENCH_MILTER"

// benchMilterMain serves one milter on a loopback port, prints its address
// on stdout and serves until stdin closes; for each line "stats" on stdin
// it prints its runtime statistics (bench.RuntimeStats) as one JSON line.
// Arguments: -kind noop (the do-nothing milter) or daemon (the daemon's
// runtime), and for daemon the configuration: -config, -data, -store-file,
// -redis; -cpuprofile writes the process's CPU profile.
func benchMilterMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench milter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("kind", "noop", "noop or daemon")
	cfgFile := fs.String("config", "", "configuration file")
	dataDir := fs.String("data", "", "data directory")
	storeFile := fs.String("store-file", "", "embedded store file")
	redisURL := fs.String("redis", "", "Redis URL")
	profile := fs.String("cpuprofile", "", "write a CPU profile of this process to the file")
	memProfile := fs.String("memprofile", "", "write an allocation profile of this process to the file when it stops")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *profile != "" {
		pf, err := os.Create(*profile)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		defer func() {
			pf, err := os.Create(*memProfile)
			if err == nil {
				err = errors.Join(pprof.Lookup("allocs").WriteTo(pf, 0), pf.Close())
			}
			if err != nil {
				fmt.Fprintln(stderr, err)
			}
		}()
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var (
		addr string
		stop func()
		reg  *prometheus.Registry // the daemon's metrics
	)
	switch *kind {
	case "noop":
		b, err := bench.StartBaseline()
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		addr, stop = b.Addr(), func() { _ = b.Close() }
	case "daemon":
		cfg, err := benchConfig(*cfgFile, *dataDir, *storeFile, *redisURL)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		// One registry for the pipeline and the server, as in the daemon:
		// metrics are part of the cost.
		reg = prometheus.NewRegistry()
		met := metrics.New(reg)
		rt, err := daemon.NewRuntime(cfg, log, met, nil)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer rt.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = rt.Ping(ctx)
		cancel()
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		if addr, stop, err = serveRuntime(rt, met, log); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	default:
		fmt.Fprintf(stderr, "bench milter: unknown kind %q\n", *kind)
		return 2
	}
	fmt.Fprintln(stdout, addr)
	in := bufio.NewScanner(stdin)
	for in.Scan() {
		if in.Text() != "stats" {
			continue
		}
		st := bench.ReadRuntimeStats()
		var err error
		if reg != nil {
			st.Check, st.Store, err = bench.ReadLatencies(reg)
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		b, err := json.Marshal(st)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	stop()
	return 0
}

// milterProc is a milter served by a child process (benchMilterMain).
type milterProc struct {
	Addr   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	out    *strings.Builder
}

// startMilterProc starts this program again to serve one milter.
func startMilterProc(args ...string) (*milterProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench milter: %w", err)
	}
	p := &milterProc{cmd: exec.Command(self, args...), out: new(strings.Builder)}
	p.cmd.Env = append(os.Environ(), benchMilterEnv+"=1")
	p.cmd.Stderr = p.out
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench milter: %w", err)
	}
	p.stdout = bufio.NewReader(stdout)
	line, err := p.stdout.ReadString('\n')
	if err != nil {
		p.stdin.Close()
		werr := p.cmd.Wait()
		return nil, fmt.Errorf("bench milter %v: %w (%v): %s", args, err, werr, p.out)
	}
	p.Addr = strings.TrimSpace(line)
	return p, nil
}

// Stats asks the milter process for its runtime statistics so far.
func (p *milterProc) Stats() (bench.RuntimeStats, error) {
	var st bench.RuntimeStats
	if _, err := io.WriteString(p.stdin, "stats\n"); err != nil {
		return st, fmt.Errorf("bench milter stats: %w", err)
	}
	line, err := p.stdout.ReadString('\n')
	if err != nil {
		return st, fmt.Errorf("bench milter stats: %w: %s", err, p.out)
	}
	if err := json.Unmarshal([]byte(line), &st); err != nil {
		return st, fmt.Errorf("bench milter stats %q: %w", line, err)
	}
	return st, nil
}

// Pid is the milter process's id.
func (p *milterProc) Pid() int { return p.cmd.Process.Pid }

// Stop closes the milter's stdin and waits for it to end.
func (p *milterProc) Stop() error {
	p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("bench milter: %w: %s", err, p.out)
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
		return errors.New("bench milter did not stop within 30 s")
	}
}
