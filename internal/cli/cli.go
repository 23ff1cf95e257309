// Package cli is the command-line plumbing shared by the daemon (cmd/milterd)
// and the lab (cmd/bulklab): an explicit table of commands, flag sets that
// return errors instead of exiting, the flags that choose and override the
// configuration, and the process logger built from it.
//
// It may import config and the standard library, nothing else: what a
// command does lives in the command or in the packages it wires.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/bulkmilter/bulkmilter/config"
)

// Command is one subcommand of a program.
type Command struct {
	Name    string
	Summary string
	Run     func(args []string, stdout, stderr io.Writer) error
}

// ErrUsage marks a usage error whose message has been printed already.
var ErrUsage = errors.New("usage")

// Program is a command-line program: its name, its commands in the order
// help lists them, and the command run when the first argument is a flag
// or missing ("" for none).
type Program struct {
	Name     string
	Commands []Command
	Default  string
}

// Main runs the command named by args[0] and returns the exit code: 0, 1
// for a failure, 2 for a usage error.
func (p Program) Main(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
		p.usage(stdout)
		return 0
	}
	name, rest := p.Default, args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, rest = args[0], args[1:]
	}
	if name == "" {
		p.usage(stderr)
		return 2
	}
	for _, c := range p.Commands {
		if c.Name != name {
			continue
		}
		err := c.Run(rest, stdout, stderr)
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, ErrUsage):
			return 2
		}
		printError(stderr, p.Name+" "+name, err)
		return 1
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n", p.Name, name)
	p.usage(stderr)
	return 2
}

// printError prints a command's error. A configuration's problems come one
// per line after a count, the same for every command: what check-config
// reports is what run refuses.
func printError(w io.Writer, cmd string, err error) {
	var probs config.Problems
	if errors.As(err, &probs) {
		noun := "problems"
		if len(probs) == 1 {
			noun = "problem"
		}
		fmt.Fprintf(w, "%s: %d configuration %s:\n%v\n", cmd, len(probs), noun, err)
		return
	}
	fmt.Fprintf(w, "%s: %v\n", cmd, err)
	if errors.Is(err, fs.ErrPermission) {
		fmt.Fprintf(w, "%s: %s\n", cmd, permissionHint())
	}
}

// permissionHint says who the command runs as: "permission denied" on the
// state directory is most often the wrong user (the package's state belongs
// to bulkmilter, and the defaults pick /var/lib/bulkmilter when it exists).
func permissionHint() string {
	name := strconv.Itoa(os.Geteuid())
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return "this runs as " + name + ", who may not use that file: run it as the file's owner " +
		"(the package's state belongs to bulkmilter: sudo -u bulkmilter milterd …), or give " + name + " the data directory (chown -R " + name + " DIR)"
}

func (p Program) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s [command] [flags]\n\ncommands:\n", p.Name)
	for _, c := range p.Commands {
		fmt.Fprintf(w, "  %-13s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintf(w, "\nRun '%s COMMAND -h' for a command's flags.\n", p.Name)
}

// version is set by scripts/build-deb.sh (-ldflags -X): a package built
// from a commit that is not a tag, or with -buildvcs=false, would
// otherwise report "(devel)" in "milterd version" and bulkmilter_build_info.
var version string

// Version is the packaged version, else the module version the binary was
// built from.
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// NewFlagSet returns a flag set named "prog name" that reports errors to
// stderr and returns them instead of exiting.
func NewFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// ParseFlags parses args, turning flag errors into ErrUsage.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return ErrUsage
	}
	return nil
}

// ConfigFlags are the flags that choose and override the configuration.
type ConfigFlags struct {
	File          string
	Listen        string
	MetricsListen string
	Redis         string
	DataDir       string
	LogLevel      string
	// Daemon registers the listener flags too.
	Daemon bool
}

// Register adds the flags to fs.
func (cf *ConfigFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&cf.File, "config", "", "configuration `file` (YAML); default: built-in defaults")
	fs.StringVar(&cf.Redis, "redis", "", "use Redis at this `URL` (redis://, rediss://, unix://; see docs) instead of the configured store")
	fs.StringVar(&cf.DataDir, "data-dir", "", "`directory` for the secret key and the embedded store")
	fs.StringVar(&cf.LogLevel, "log-level", "", "log `level`: debug, info, warn, error")
	if cf.Daemon {
		fs.StringVar(&cf.Listen, "listen", "", "milter `socket`: inet:HOST:PORT or unix:PATH")
		fs.StringVar(&cf.MetricsListen, "metrics-listen", "", "`HOST:PORT` for /metrics, /healthz and /readyz (\"off\" disables)")
	}
}

// Load reads the configuration file, or the defaults, and applies the
// flags on top.
func (cf *ConfigFlags) Load() (*config.Config, error) {
	cfg, err := LoadOrDefault(cf.File)
	if err != nil {
		return nil, err
	}
	if cf.Listen != "" {
		cfg.Listen = cf.Listen
	}
	switch cf.MetricsListen {
	case "":
	case "off":
		cfg.MetricsListen = ""
	default:
		cfg.MetricsListen = cf.MetricsListen
	}
	if cf.Redis != "" {
		cfg.Store.Redis = config.Redis{URL: cf.Redis}
	}
	if cf.DataDir != "" {
		cfg.DataDir = cf.DataDir
	}
	if cf.LogLevel != "" {
		cfg.Log.Level = cf.LogLevel
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration after flags:\n%w", err)
	}
	return cfg, nil
}

// LoadOrDefault loads the configuration file, or returns the defaults when
// no file is named.
func LoadOrDefault(file string) (*config.Config, error) {
	if file != "" {
		return config.Load(file)
	}
	c := config.Default()
	return &c, nil
}

// NewLogger builds the process logger from the configuration.
func NewLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(strings.ToUpper(cfg.Log.Level)))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
