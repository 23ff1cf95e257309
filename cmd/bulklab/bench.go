package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/daemon"
	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/internal/cli"
	"github.com/bulkmilter/bulkmilter/lab/bench"
	"github.com/bulkmilter/bulkmilter/lab/sample"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/milter"
)

// benchFlags are "bulklab bench"'s settings.
type benchFlags struct {
	corpora     string
	every       int
	limit       int
	pipeline    bool
	minTime     time.Duration
	e2e         bool
	sessions    int
	perSession  int
	duration    time.Duration
	messages    int64
	rcpts       int
	rate        float64
	pace        float64
	rounds      int
	rspamd      bool
	rspamdTLDs  string
	redis       string
	memMessages int
	memKeys     int
	jsonOut     bool
	cpuProfile  string
	memProfile  string
	milterProf  string
	milterMem   string
	config      string
}

// benchCommand is "bulklab bench". It wires the daemon's own runtime
// (package daemon) to the measurements in lab/bench.
func benchCommand(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bulklab bench", stderr)
	var f benchFlags
	fs.StringVar(&f.corpora, "corpora", sample.DefaultCorpora(), "shared corpora `directory`")
	fs.IntVar(&f.every, "every", 4, "take every `n`-th message of each SpamAssassin archive")
	fs.IntVar(&f.limit, "limit", 0, "at most `n` messages in the sample (0: no limit)")
	fs.BoolVar(&f.pipeline, "pipeline", true, "measure the in-process pipeline per family")
	fs.DurationVar(&f.minTime, "pipeline-time", 2*time.Second, "minimum `time` of each in-process row")
	fs.BoolVar(&f.e2e, "e2e", true, "measure end to end over the milter protocol")
	fs.IntVar(&f.sessions, "sessions", 4, "concurrent MTA sessions end to end")
	fs.IntVar(&f.perSession, "per-session", 1, "messages per MTA connection")
	fs.IntVar(&f.rounds, "rounds", 5, "end-to-end `rounds`: each runs every milter in turn, ratios are taken within a round")
	fs.DurationVar(&f.duration, "duration", 4*time.Second, "`time` of each end-to-end row")
	fs.Int64Var(&f.messages, "messages", 0, "messages per end-to-end row instead of -duration (0: use -duration)")
	fs.IntVar(&f.rcpts, "rcpts", 1, "recipients per message end to end")
	fs.Float64Var(&f.pace, "pace", 0.5, "also run paced rounds at this `fraction` of the do-nothing milter's median throughput, for latency below saturation (0: skip)")
	fs.Float64Var(&f.rate, "rate", 0, "pace the paced rounds at this many `msgs/s` in all instead of -pace")
	fs.BoolVar(&f.rspamd, "rspamd", true, "run the peer row: Rspamd as a milter, fuzzy_check only, learning every message (scripts/install-test-deps.sh installs it)")
	fs.StringVar(&f.rspamdTLDs, "rspamd-tlds", "", "public suffix `file` for Rspamd (default: the packaged list, ~15 s to compile)")
	fs.StringVar(&f.redis, "redis", "auto", "Redis for the Redis rows: auto (start a redis-server), a redis:// `URL`, or off")
	fs.IntVar(&f.memMessages, "mem-messages", 50000, "store memory: load `n` distinct messages at a million a day (0: skip; 1000000 for the full figure)")
	fs.IntVar(&f.memKeys, "mem-keys", 0, "store memory: keys per message (0: as measured in process, else 27)")
	fs.BoolVar(&f.jsonOut, "json", false, "print the report as JSON")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to `file`")
	fs.StringVar(&f.memProfile, "memprofile", "", "write an allocation profile of the whole run to `file`")
	fs.StringVar(&f.milterProf, "milter-cpuprofile", "", "write a CPU profile of each bench milter process into `directory` (noop.prof, embedded.prof, redis.prof)")
	fs.StringVar(&f.milterMem, "milter-memprofile", "", "write an allocation profile of each bench milter process into `directory` (noop.mprof, embedded.mprof, redis.mprof)")
	fs.StringVar(&f.config, "config", "", "daemon configuration `file` (default: built-in defaults)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 || f.sessions <= 0 || f.rcpts <= 0 || f.rounds <= 0 {
		fmt.Fprintln(stderr, "bulklab bench: unexpected arguments, or -sessions / -rcpts / -rounds not positive")
		return cli.ErrUsage
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := runBench(context.Background(), f, stderr)
	if err != nil {
		return err
	}
	if f.memProfile != "" {
		if err := writeAllocProfile(f.memProfile); err != nil {
			return err
		}
	}
	if f.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteText(stdout)
}

// benchEnv holds what a bench run created, to remove at the end.
type benchEnv struct {
	f        benchFlags
	log      *slog.Logger
	dirs     []string
	stores   int
	runtimes []*daemon.Runtime
	closers  []func()
}

func (e *benchEnv) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
	for _, rt := range e.runtimes {
		if err := rt.Close(); err != nil {
			e.log.Warn("close runtime", "err", err)
		}
	}
	for _, d := range e.dirs {
		os.RemoveAll(d)
	}
}

// config returns the daemon configuration for one runtime: the -config
// file or the defaults, the run's data directory (one secret for every
// runtime of the run: a Redis database refuses a second), a store file of
// its own, and the given store.
func (e *benchEnv) config(redisURL string, families ...string) (*config.Config, error) {
	if len(e.dirs) == 0 {
		dir, err := os.MkdirTemp("", "milterd-bench-")
		if err != nil {
			return nil, err
		}
		e.dirs = append(e.dirs, dir)
	}
	e.stores++
	return benchConfig(e.f.config, e.dirs[0], e.storeFile(), redisURL, families...)
}

func (e *benchEnv) storeFile() string {
	return filepath.Join(e.dirs[0], fmt.Sprintf("store-%d.db", e.stores))
}

// benchConfig is the configuration file (or the defaults) with the data
// directory, store file, Redis and enabled families given.
func benchConfig(file, dataDir, storeFile, redisURL string, families ...string) (*config.Config, error) {
	cfg, err := cli.LoadOrDefault(file)
	if err != nil {
		return nil, err
	}
	cfg.DataDir = dataDir
	cfg.Store.File = storeFile
	cfg.Store.Redis = config.Redis{URL: redisURL}
	cfg.Listen, cfg.MetricsListen = "inet:127.0.0.1:0", ""
	if len(families) > 0 {
		s := &cfg.Signatures
		s.IMatch.Enabled, s.Shingle.Enabled, s.CharShingle.Enabled, s.Sift.Enabled = false, false, false, false
		for _, fam := range families {
			switch fam {
			case "imatch":
				s.IMatch.Enabled = true
			case "shingle":
				s.Shingle.Enabled = true
			case "charshingle":
				s.CharShingle.Enabled = true
			case "sift":
				s.Sift.Enabled = true
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bench configuration: %w", err)
	}
	return cfg, nil
}

func (e *benchEnv) runtime(redisURL string, met *metrics.Metrics, families ...string) (*daemon.Runtime, error) {
	cfg, err := e.config(redisURL, families...)
	if err != nil {
		return nil, err
	}
	rt, err := daemon.NewRuntime(cfg, e.log, met, nil)
	if err != nil {
		return nil, err
	}
	e.runtimes = append(e.runtimes, rt)
	return rt, nil
}

func runBench(ctx context.Context, f benchFlags, stderr io.Writer) (*bench.Report, error) {
	env := &benchEnv{f: f, log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	defer env.close()
	progress := func(format string, a ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", a...) }

	rep := &bench.Report{Started: time.Now(), Machine: bench.ThisMachine()}
	rep.Machine.Sessions = f.sessions
	progress("reading corpora under %s", f.corpora)
	corp, err := sample.LoadCorpus(f.corpora, sample.SpamAssassin, f.every, f.limit)
	if err != nil {
		return nil, err
	}
	rep.Corpus = bench.Info(corp)

	keysPerMsg := 0.0
	if f.pipeline {
		rows := []struct {
			name     string
			families []string
			check    bool
		}{
			{"imatch", []string{"imatch"}, false},
			{"shingle", []string{"shingle"}, false},
			{"charshingle", []string{"charshingle"}, false},
			{"sift", []string{"sift"}, false},
			{"all families", nil, false},
			{"all families + embedded store", nil, true},
		}
		for _, row := range rows {
			rt, err := env.runtime("", nil, row.families...)
			if err != nil {
				return nil, err
			}
			progress("in process: %s", row.name)
			eng := rt.Engine()
			var i int64
			fn := func(m *bench.Message) int {
				i++
				msg := &detect.Message{Header: m.Header, Body: bytes.NewReader(m.Body),
					Recipients: []string{fmt.Sprintf("user%d@example.test", i%200000)}}
				if row.check {
					v := eng.Check(ctx, msg)
					return len(v.Analysis.Keys)
				}
				return len(eng.Analyze(msg).Keys)
			}
			res := bench.Pipeline(row.name, corp, 0, f.minTime, fn)
			if row.name == "all families" {
				keysPerMsg = res.KeysPerMsg
			}
			rep.Pipeline = append(rep.Pipeline, res)
			if err := rt.Close(); err != nil {
				return nil, err
			}
		}
	}

	var (
		redisURL, redisAddr string
		redisPid            int
	)
	switch f.redis {
	case "off", "":
	case "auto":
		progress("starting redis-server")
		srv, err := bench.StartRedis(ctx)
		if err != nil {
			return nil, err
		}
		env.closers = append(env.closers, srv.Stop)
		redisAddr, redisURL, redisPid = srv.Addr, "redis://"+srv.Addr, srv.Pid()
	default:
		o, err := redisURLAddr(f.redis)
		if err != nil {
			return nil, err
		}
		redisAddr, redisURL = o, f.redis
	}

	if f.e2e {
		if err := env.endToEnd(ctx, rep, corp, redisURL, redisAddr, redisPid, progress); err != nil {
			return nil, err
		}
	}

	if f.memMessages > 0 {
		keys := f.memKeys
		if keys <= 0 {
			keys = 27
			if keysPerMsg > 0 {
				keys = int(math.Round(keysPerMsg))
			}
		}
		w := bench.DensityWorkload(f.memMessages, keys)
		progress("store memory: embedded, %d messages of %d keys", f.memMessages, keys)
		m, err := bench.EmbeddedMemory(w)
		if err != nil {
			return nil, err
		}
		rep.Memory = append(rep.Memory, m)
		if redisAddr != "" {
			if f.redis != "auto" {
				progress("store memory: skipped for Redis: it flushes the database, run it with -redis auto")
			} else {
				progress("store memory: Redis, %d messages of %d keys", f.memMessages, keys)
				m, err := bench.RedisMemory(ctx, redisAddr, w)
				if err != nil {
					return nil, err
				}
				rep.Memory = append(rep.Memory, m)
			}
		}
	}
	rep.Machine.LoadEnd = bench.LoadAvg()
	rep.Evaluate()
	return rep, nil
}

// serveRuntime serves a runtime's milter state on a loopback port, as the
// daemon does, and returns its address and a function that stops it.
func serveRuntime(rt *daemon.Runtime, met *metrics.Metrics, log *slog.Logger) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := milter.NewServer(milter.Options{
		State:    func() *milter.State { return rt.State() },
		Logger:   log,
		Observer: met, // nil-safe
	})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) {
			log.Warn("bench milter stopped", "err", err)
		}
	}, nil
}

// redisURLAddr returns the address of a single-server Redis URL.
func redisURLAddr(u string) (string, error) {
	o, err := daemon.RedisOptions(&config.Config{Store: config.Store{Redis: config.Redis{URL: u}}})
	if err != nil {
		return "", err
	}
	if len(o.Addrs) != 1 || o.Cluster || o.MasterName != "" || strings.HasPrefix(o.Addrs[0], "/") {
		return "", fmt.Errorf("-redis %s: the benchmark needs one Redis server over TCP", u)
	}
	return o.Addrs[0], nil
}

// writeAllocProfile writes the allocations since the start of the process
// (go tool pprof -sample_index=alloc_objects).
func writeAllocProfile(path string) error {
	pf, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(pf, 0); err != nil {
		pf.Close()
		return fmt.Errorf("allocation profile: %w", err)
	}
	return pf.Close()
}

// e2eMilter is one milter of the end-to-end rounds.
type e2eMilter struct {
	name   string
	addr   string
	header string // the verdict header each message must get, or ""
	redis  bool   // read the run's Redis INFO before and after
	pids   func() []int
	store  func() []int
	stats  func() (bench.RuntimeStats, error) // a Go milter's runtime statistics, or nil
}

// endToEnd measures, under the same load, the do-nothing milter, the
// daemon's runtime with the embedded store and with Redis (when redisURL
// is set), and the peer (Rspamd), each milter in processes of its own.
// Each round runs every milter in turn, in alternating order, so that a
// ratio taken within a round compares the same minutes of the machine;
// then the same paced below saturation, at a fraction of the do-nothing
// milter's median throughput.
func (e *benchEnv) endToEnd(ctx context.Context, rep *bench.Report, corp *sample.Corpus, redisURL, redisAddr string, redisPid int,
	progress func(string, ...any)) error {
	f := e.f
	pidsOf := func(pids ...int) func() []int { return func() []int { return pids } }
	var milters []e2eMilter
	start := func(name string, args ...string) (*milterProc, error) {
		p, err := startMilterProc(args...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		e.closers = append(e.closers, func() {
			if err := p.Stop(); err != nil {
				e.log.Warn("stop bench milter", "milter", name, "err", err)
			}
		})
		return p, nil
	}
	prof := func(name string) []string {
		var args []string
		if f.milterProf != "" {
			args = append(args, "-cpuprofile", filepath.Join(f.milterProf, name+".prof"))
		}
		if f.milterMem != "" {
			args = append(args, "-memprofile", filepath.Join(f.milterMem, name+".mprof"))
		}
		return args
	}
	base, err := start(bench.NameBaseline, append([]string{"-kind", "noop"}, prof("noop")...)...)
	if err != nil {
		return err
	}
	milters = append(milters, e2eMilter{name: bench.NameBaseline, addr: base.Addr, pids: pidsOf(base.Pid()), stats: base.Stats})
	stores := []struct{ name, url string }{{bench.NameEmbedded, ""}}
	if redisURL != "" {
		stores = append(stores, struct{ name, url string }{bench.NameRedis, redisURL})
	}
	for _, st := range stores {
		cfg, err := e.config(st.url)
		if err != nil {
			return err
		}
		args := []string{"-kind", "daemon", "-data", cfg.DataDir, "-store-file", e.storeFile(), "-redis", st.url}
		if f.config != "" {
			args = append(args, "-config", f.config)
		}
		if st.url == "" {
			args = append(args, prof("embedded")...)
		} else {
			args = append(args, prof("redis")...)
		}
		p, err := start(st.name, args...)
		if err != nil {
			return err
		}
		m := e2eMilter{name: st.name, addr: p.Addr, header: cfg.Actions.Header, redis: st.url != "", pids: pidsOf(p.Pid()), stats: p.Stats}
		if m.redis && redisPid != 0 {
			m.store = pidsOf(redisPid)
		}
		milters = append(milters, m)
	}
	var peer *bench.Rspamd
	if f.rspamd {
		progress("starting the peer: Rspamd as a milter with its own redis-server")
		peer, err = bench.StartRspamd(ctx, bench.RspamdOptions{Workers: runtime.NumCPU(), TLDs: f.rspamdTLDs})
		if err != nil {
			return err
		}
		e.closers = append(e.closers, peer.Stop)
		milters = append(milters, e2eMilter{name: bench.NamePeer, addr: peer.Addr, pids: peer.Pids,
			store: pidsOf(peer.Redis.Pid())})
	}

	rounds := func(rate float64) error {
		suffix := ""
		if rate > 0 {
			suffix = fmt.Sprintf(" @ %.0f/s", rate)
		}
		for round := 1; round <= f.rounds; round++ {
			order := slices.Clone(milters)
			if round%2 == 0 {
				slices.Reverse(order)
			}
			got := map[string]bench.EndToEndResult{}
			for _, m := range order {
				progress("end to end, round %d: %s%s", round, m.name, suffix)
				o := bench.EndToEndOptions{Name: m.name + suffix, Round: round, Addr: m.addr, Sessions: f.sessions,
					PerSession: f.perSession, Messages: f.messages, Corpus: corp, Recipients: f.rcpts, Header: m.header,
					Rate: rate, MilterPids: m.pids, StorePids: m.store, MilterStats: m.stats}
				if f.messages == 0 {
					o.Duration = f.duration
				}
				if m.redis {
					o.Redis = bench.NewRedisClient(redisAddr)
				}
				r, err := bench.EndToEnd(ctx, o)
				if o.Redis != nil {
					o.Redis.Close()
				}
				if err != nil {
					return fmt.Errorf("%s: %w", m.name, err)
				}
				got[m.name] = r
			}
			for _, m := range milters {
				r := got[m.name]
				if m.name != bench.NameBaseline {
					r.Compare(got[bench.NameBaseline])
				}
				if peer != nil && m.name != bench.NamePeer {
					r.ComparePeer(got[bench.NamePeer])
				}
				rep.EndToEnd = append(rep.EndToEnd, r)
			}
		}
		return nil
	}
	if err := rounds(0); err != nil {
		return err
	}
	rep.Summary = bench.Summarize(rep.EndToEnd)
	rate := f.rate
	if rate <= 0 && f.pace > 0 && len(rep.Summary) > 0 {
		rate = math.Round(f.pace * rep.Summary[0].MsgsPerS.Median)
	}
	if rate > 0 {
		if err := rounds(rate); err != nil {
			return err
		}
		rep.Summary = bench.Summarize(rep.EndToEnd)
	}
	if peer != nil {
		n, err := peer.WaitLearned(ctx)
		if err != nil {
			return fmt.Errorf("peer: %w", err)
		}
		rep.PeerLearned = n
	}
	return nil
}
