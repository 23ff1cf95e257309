package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/daemon"
	"github.com/bulkmilter/bulkmilter/internal/cli"
	"github.com/bulkmilter/bulkmilter/lab/corpus"
	"github.com/bulkmilter/bulkmilter/lab/eval"
	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
	"github.com/redis/go-redis/v9"
)

func evalCommand(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bulklab eval", stderr)
	cfgFile := fs.String("config", "", "configuration `file` to evaluate (default: built-in defaults)")
	corpora := fs.String("corpora", "", "shared corpora `directory` (default: $CORPORA, else ../shared/corpora beside the repository)")
	seed := fs.Uint64("seed", 1, "random seed: the same seed gives the same campaigns, secret and report")
	ci := fs.Bool("ci", false, "the short run (CI): fewer campaigns, part of the real corpora")
	spam := fs.Int("spam-bases", 0, "spam base messages (default 120, -ci 30)")
	hamBases := fs.Int("ham-bases", 0, "legitimate base messages (default 40, -ci 10)")
	copies := fs.Int("copies", 0, "copies per campaign, each to its own recipient (default 30, -ci 25)")
	attacks := fs.String("attacks", "", "comma-separated attacks to run (default all; see -list)")
	sections := fs.String("sections", "", "comma-separated sections: campaigns, real, stream, kolcz, malkin (default all)")
	streamLimit := fs.Int("stream-limit", 0, "replay only the first `N` messages of the real stream (default all, -ci 6000)")
	workers := fs.Int("workers", 0, "attack worlds evaluated in parallel (default GOMAXPROCS)")
	jsonOut := fs.String("json", "", "write the JSON report to this `file`")
	missOut := fs.String("misses", "", "write the missed messages of the real corpora's refined groups, and why each missed, to this `file` (tab-separated)")
	traceOut := fs.String("stream-trace", "", "write one tab-separated line per message of each real-stream replay (clock, name, kind, verdict, campaign, volume, families that joined) to this `file`")
	worldOut := fs.String("world-trace", "", "write one tab-separated line per ham message tagged and per counted copy missed in the generated worlds (campaign, families that joined, what it shared with whom) to this `file`")
	mdOut := fs.String("markdown", "-", "write the Markdown tables to this `file` (- for stdout)")
	check := fs.Bool("check", false, "fail when a result regresses past the floors of the run mode (eval.FloorsFor)")
	list := fs.Bool("list", false, "list the attacks and exit")
	quiet := fs.Bool("q", false, "no progress on stderr")
	redisURL := fs.String("redis", "", "replay through this Redis `URL` (redis+cluster://… for a Cluster) instead of an embedded store, flushed before each replay: for the real stream (-sections stream), one replay at a time; never a database in use")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *list {
		for _, a := range eval.Attacks() {
			fmt.Fprintf(stdout, "%-30s %-12s %s\n", a.Name, a.Class, a.Doc)
		}
		return nil
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bulklab eval: unexpected arguments %q\n", fs.Args())
		return cli.ErrUsage
	}
	cf := cli.ConfigFlags{File: *cfgFile}
	cfg, err := cf.Load()
	if err != nil {
		return err
	}
	dir, err := corporaDir(*corpora)
	if err != nil {
		return err
	}
	ec := eval.Config{
		Corpora: dir, Seed: *seed, CI: *ci,
		SpamBases: pickInt(*spam, *ci, 120, 30), HamBases: pickInt(*hamBases, *ci, 40, 10), Copies: pickInt(*copies, *ci, 30, 25),
		Attacks: splitList(*attacks), Sections: splitList(*sections), Workers: *workers,
		StreamLimit: pickInt(*streamLimit, *ci, 0, 6000),
	}
	if !*quiet {
		ec.Log = stderr
	}
	var trace *bufio.Writer
	if *traceOut != "" {
		f, err := os.Create(*traceOut)
		if err != nil {
			return err
		}
		defer f.Close()
		trace = bufio.NewWriter(f)
		ec.StreamTrace = trace
	}
	var worldTrace *bufio.Writer
	if *worldOut != "" {
		f, err := os.Create(*worldOut)
		if err != nil {
			return err
		}
		defer f.Close()
		worldTrace = bufio.NewWriter(f)
		if _, err := fmt.Fprintln(worldTrace, eval.WorldTraceHeader); err != nil {
			return err
		}
		ec.WorldTrace = worldTrace
	}
	// A secret derived from the seed: keyed hashes, and so every figure,
	// are reproducible.
	sum := sha256.Sum256([]byte("bulkmilter eval secret " + strconv.FormatUint(*seed, 10)))
	secret := sum[:]
	if ec.Secret, err = signature.NewSecret(secret); err != nil {
		return err
	}
	if ec.Lexicon, err = daemon.LoadLexicon(cfg); err != nil {
		return err
	}
	ec.Params = cfg.Signatures.SetParams()
	if *redisURL != "" {
		cfg.Store.Redis = config.Redis{URL: *redisURL}
		ec.Workers = 1 // one store: worlds one after the other
	}
	ec.NewPipeline = func() (eval.Pipeline, error) { return newEvalPipeline(cfg, secret) }
	// The stream is one site's mail: its relays apply unless -config names some.
	site := *cfg
	if len(site.Policy.Relays) == 0 {
		site.Policy.Relays = eval.StreamRelays
	}
	ec.NewStreamPipeline = func() (eval.Pipeline, error) { return newEvalPipeline(&site, secret) }
	probe, err := newEvalPipeline(cfg, secret)
	if err != nil {
		return err
	}
	ec.Thresholds = map[signature.Family]int{}
	for _, s := range probe.Set().Signers() {
		ec.Thresholds[s.Family()] = cfg.ThresholdFor(s.Family().String())
	}
	ec.Version = probe.Set().Version()
	ec.Window = cfg.Store.Window.D()
	probe.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := eval.Run(ctx, ec)
	if err != nil {
		return err
	}
	if trace != nil {
		if err := trace.Flush(); err != nil {
			return fmt.Errorf("write %s: %w", *traceOut, err)
		}
	}
	if worldTrace != nil {
		if err := worldTrace.Flush(); err != nil {
			return fmt.Errorf("write %s: %w", *worldOut, err)
		}
	}
	if *jsonOut != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := writeFileAtomic(*jsonOut, append(data, '\n')); err != nil {
			return err
		}
	}
	if *missOut != "" {
		var b strings.Builder
		if err := rep.WriteMissed(&b); err != nil {
			return err
		}
		if err := writeFileAtomic(*missOut, []byte(b.String())); err != nil {
			return err
		}
	}
	if *mdOut != "" {
		w := stdout
		if *mdOut != "-" {
			f, err := os.Create(*mdOut)
			if err != nil {
				return err
			}
			defer f.Close()
			w = f
		}
		rep.Markdown(w)
	}
	if *check {
		floors := eval.FloorsFor(rep.Mode)
		if problems := floors.Check(rep); len(problems) > 0 {
			return fmt.Errorf("evaluation regressed past its floors:\n  %s", strings.Join(problems, "\n  "))
		}
		fmt.Fprintf(stderr, "bulklab eval: every result is at or above its %s floor\n", rep.Mode)
	}
	return nil
}

func pickInt(v int, ci bool, full, short int) int {
	switch {
	case v > 0:
		return v
	case ci:
		return short
	}
	return full
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// corporaDir finds the shared corpora: the flag, else corpus.DefaultDir
// ($CORPORA or ../shared/corpora beside the repository).
func corporaDir(flagValue string) (string, error) {
	dir := flagValue
	if dir == "" {
		d, err := corpus.DefaultDir()
		if err != nil {
			return "", fmt.Errorf("%w (use -corpora)", err)
		}
		dir = d
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("corpora directory %s not found (use -corpora)", dir)
	}
	return dir, nil
}

// evalPipeline is a runtime built as the daemon builds it, with its own
// temporary data directory, removed on Close.
type evalPipeline struct {
	*daemon.Runtime
	dir string
}

func (p *evalPipeline) Close() error {
	return errors.Join(p.Runtime.Close(), os.RemoveAll(p.dir))
}

// newEvalPipeline builds a runtime as the daemon does, with its own
// temporary data directory: the given secret and an empty embedded store,
// or the configured Redis (bulklab eval -redis), flushed.
func newEvalPipeline(cfg *config.Config, secret []byte) (*evalPipeline, error) {
	if cfg.Store.Redis.URL != "" {
		if err := flushRedis(cfg.Store.Redis.URL); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "milterd-eval-")
	if err != nil {
		return nil, err
	}
	c := *cfg
	c.DataDir, c.Store.File = dir, ""
	// Offline, the daemon's per-message latency budget measures nothing: on
	// a loaded machine it aborted runs ("store unavailable: context
	// deadline exceeded"). The most the configuration allows.
	c.Policy.StoreTimeout = config.Duration(20 * time.Second)
	c.SecretKeyFile = filepath.Join(dir, "secret.key")
	if err := os.WriteFile(c.SecretKeyFile, []byte(hex.EncodeToString(secret)+"\n"), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	rt, err := daemon.NewRuntime(&c, discardLogger, nil, nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &evalPipeline{Runtime: rt, dir: dir}, nil
}

// flushRedis empties the Redis of url, every primary of a Cluster: each
// replay starts from an empty store, as with the embedded one.
func flushRedis(url string) error {
	o, err := store.ParseRedisURL(url)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: o.Addrs, IsClusterMode: o.Cluster, Username: o.Username, Password: o.Password, DB: o.DB})
	defer c.Close()
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.FlushAll(ctx).Err() })
	} else {
		err = c.FlushAll(ctx).Err()
	}
	if err != nil {
		return fmt.Errorf("flush %s: %w", o.Addrs, err)
	}
	return nil
}

// discardLogger drops every record (commands that build many runtimes).
var discardLogger = slog.New(slog.DiscardHandler)
