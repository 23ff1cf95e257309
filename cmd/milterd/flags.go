package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/bulkmilter/bulkmilter/config"
)

// configFlags are the flags that choose and override the configuration,
// shared by the daemon and the offline commands.
type configFlags struct {
	file          string
	listen        string
	metricsListen string
	redis         string
	dataDir       string
	logLevel      string
	daemon        bool // register the daemon-only flags
}

func (cf *configFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&cf.file, "config", "", "configuration `file` (YAML); default: built-in defaults")
	fs.StringVar(&cf.redis, "redis", "", "use Redis at this `URL` (redis://, rediss://, unix://; see docs) instead of the configured store")
	fs.StringVar(&cf.dataDir, "data-dir", "", "`directory` for the secret key and the embedded store")
	fs.StringVar(&cf.logLevel, "log-level", "", "log `level`: debug, info, warn, error")
	if cf.daemon {
		fs.StringVar(&cf.listen, "listen", "", "milter socket: inet:HOST:PORT or unix:PATH")
		fs.StringVar(&cf.metricsListen, "metrics-listen", "", "`HOST:PORT` for /metrics, /healthz and /readyz (\"off\" disables)")
	}
}

// load reads the configuration file, or the defaults, and applies the
// flags on top.
func (cf *configFlags) load() (*config.Config, error) {
	cfg, err := loadOrDefault(cf.file)
	if err != nil {
		return nil, err
	}
	if cf.listen != "" {
		cfg.Listen = cf.listen
	}
	switch cf.metricsListen {
	case "":
	case "off":
		cfg.MetricsListen = ""
	default:
		cfg.MetricsListen = cf.metricsListen
	}
	if cf.redis != "" {
		cfg.Store.Redis = config.Redis{URL: cf.redis}
	}
	if cf.dataDir != "" {
		cfg.DataDir = cf.dataDir
	}
	if cf.logLevel != "" {
		cfg.Log.Level = cf.logLevel
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration after flags:\n%w", err)
	}
	return cfg, nil
}

// newLogger builds the process logger from the configuration.
func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(strings.ToUpper(cfg.Log.Level)))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// checkConfig is "milterd check-config": it parses and validates a
// configuration, printing every problem with file and line, and exits
// non-zero when there is one. It also checks what the daemon would check
// at start: the secret key's permissions and the lexicon.
func checkConfig(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("check-config", stderr)
	cf := configFlags{daemon: true}
	cf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 1 && cf.file == "" {
		cf.file = fs.Arg(0)
	}
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	var problems []string
	if _, err := os.Stat(cfg.SecretKeyPath()); err == nil {
		if _, _, err := loadSecret(cfg.SecretKeyPath()); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if _, err := loadLexicon(cfg); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	fmt.Fprintf(stdout, "%s: OK\n", cfg)
	return nil
}

// printError prints a command's error. A configuration's problems come one
// per line after a count, the same for check-config and run: what
// check-config reports is what run refuses.
func printError(w io.Writer, cmd string, err error) {
	var probs config.Problems
	if errors.As(err, &probs) {
		noun := "problems"
		if len(probs) == 1 {
			noun = "problem"
		}
		fmt.Fprintf(w, "milterd %s: %d configuration %s:\n%v\n", cmd, len(probs), noun, err)
		return
	}
	fmt.Fprintf(w, "milterd %s: %v\n", cmd, err)
}

// loadOrDefault loads the configuration file, or returns the defaults when
// no file is named.
func loadOrDefault(file string) (*config.Config, error) {
	if file != "" {
		return config.Load(file)
	}
	c := config.Default()
	return &c, nil
}
