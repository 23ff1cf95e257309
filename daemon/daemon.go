package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bulkmilter/bulkmilter/admin"
	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/milter"
)

// Options are what the daemon needs besides its first configuration.
type Options struct {
	// Load reads the configuration again on reload, with the command's
	// flags applied on top as at start.
	Load func() (*config.Config, error)
	// Logger is the process logger.
	Logger *slog.Logger
	// Version is logged at start.
	Version string
	// HTTP bounds the HTTP listener's clients; zero fields take
	// DefaultHTTPTimeouts.
	HTTP HTTPTimeouts
}

// HTTPTimeouts bound how long a client of the HTTP listener (Prometheus,
// a health check, "milterd votes") may take: a slow or idle client must
// not hold a connection for ever.
type HTTPTimeouts struct {
	// ReadHeader bounds reading a request's header, Read the whole
	// request, Write the response (the votes endpoint extends its own),
	// Idle a kept-alive connection between requests.
	ReadHeader, Read, Write, Idle time.Duration
}

// DefaultHTTPTimeouts are far above what a scrape or a probe takes on
// loopback, and far below what lets a trickling client pile up
// connections.
var DefaultHTTPTimeouts = HTTPTimeouts{ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 30 * time.Second, Idle: time.Minute}

func (t HTTPTimeouts) orDefault() HTTPTimeouts {
	pick := func(v, d time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return d
	}
	d := DefaultHTTPTimeouts
	return HTTPTimeouts{pick(t.ReadHeader, d.ReadHeader), pick(t.Read, d.Read), pick(t.Write, d.Write), pick(t.Idle, d.Idle)}
}

// maxHeaderBytes bounds a request's header: scrapes, probes and the
// admin client send a few hundred bytes.
const maxHeaderBytes = 64 << 10

// Daemon is the running milter: listeners, the current runtime (replaced
// on reload) and the process-wide logger and metrics.
type Daemon struct {
	opts    Options
	log     *slog.Logger
	reg     *prometheus.Registry
	met     *metrics.Metrics
	current atomic.Pointer[Runtime]
	srv     *milter.Server
	ln      net.Listener
	httpLn  net.Listener
	reloads sync.Mutex
}

// New builds the first runtime from cfg and opens the listeners.
func New(cfg *config.Config, o Options) (*Daemon, error) {
	d := &Daemon{opts: o, log: o.Logger, reg: prometheus.NewRegistry()}
	d.opts.HTTP = o.HTTP.orDefault()
	d.met = metrics.New(d.reg)
	rt, err := newRuntime(cfg, d.log, d.met, nil, true)
	if err != nil {
		return nil, err
	}
	d.current.Store(rt)
	d.met.ConfigLoaded()
	d.met.SignatureSet(rt.set.Version())
	d.srv = milter.NewServer(milter.Options{
		State:    func() *milter.State { return d.current.Load().state },
		Logger:   d.log,
		Observer: d.met,
	})
	if d.ln, err = listen(cfg.Listen, cfg.Socket); err != nil {
		d.closeRuntime(rt)
		return nil, listenError("listen", cfg.Listen, err)
	}
	if cfg.MetricsListen != "" {
		if d.httpLn, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			d.ln.Close()
			d.closeRuntime(rt)
			return nil, listenError("metrics_listen", cfg.MetricsListen, err)
		}
	}
	return d, nil
}

func (d *Daemon) closeRuntime(rt *Runtime) {
	if err := rt.Close(); err != nil {
		d.log.Error("close runtime", "err", err)
	}
}

// Run serves until ctx ends, reloading on every value from hup, then
// drains: every message in progress gets its reply.
func (d *Daemon) Run(ctx context.Context, hup <-chan os.Signal) error {
	rt := d.current.Load()
	lexicon := rt.cfg.Signatures.Lexicon
	if lexicon == "" {
		lexicon = "bundled"
	}
	d.log.Info("milterd started", "version", d.opts.Version, "listen", rt.cfg.Listen,
		"metrics", rt.cfg.MetricsListen, "config", rt.cfg.String(), "store", rt.storeName,
		"threshold", rt.cfg.Policy.Threshold, "adaptive", rt.cfg.Policy.Adaptive.Enabled,
		"lexicon", lexicon, "signatures", rt.set.Version())
	go d.warnStoreDown(ctx, rt)

	errc := make(chan error, 2)
	go func() { errc <- d.srv.Serve(d.ln) }()
	var web *http.Server
	if d.httpLn != nil {
		web = newHTTPServer(d.Handler(), d.opts.HTTP)
		go func() {
			if err := web.Serve(d.httpLn); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("http: %w", err)
			}
		}()
	}

	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-hup:
			d.reload()
		case err := <-errc:
			runErr = err
			break loop
		}
	}

	timeout := d.current.Load().cfg.ShutdownTimeout.D()
	d.log.Info("draining", "timeout", timeout, "in_progress", d.srv.InProgress())
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := d.srv.Shutdown(sctx); err != nil {
		d.log.Error("drain incomplete", "err", err)
	}
	if web != nil {
		_ = web.Shutdown(sctx)
	}
	d.closeRuntime(d.current.Load())
	d.log.Info("milterd stopped")
	return runErr
}

// newHTTPServer is the HTTP listener's server with its client bounds.
func newHTTPServer(h http.Handler, t HTTPTimeouts) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// reload builds a new runtime from the configuration file and swaps it in
// atomically; a message in progress finishes with the state it started
// with. An invalid configuration keeps the old runtime.
func (d *Daemon) reload() {
	d.reloads.Lock()
	defer d.reloads.Unlock()
	old := d.current.Load()
	cfg, err := d.opts.Load()
	if err == nil {
		err = sameListeners(old.cfg, cfg)
	}
	var rt *Runtime
	if err == nil {
		rt, err = newRuntime(cfg, d.log, d.met, old, true)
	}
	if err != nil {
		d.met.Reload(false)
		d.log.Error("reload failed; keeping the running configuration", "err", err)
		return
	}
	d.current.Store(rt)
	d.met.Reload(true)
	d.met.SignatureSet(rt.set.Version())
	if v := rt.set.Version(); v != old.set.Version() {
		// Counts start afresh under a new signature set.
		d.log.Warn("signature set changed; volumes count again from zero", "old", old.set.Version(), "new", v)
	}
	d.log.Info("reloaded", "config", cfg.String(), "store", rt.storeName, "signatures", rt.set.Version())
	// Messages that took the old state finish within the store budget.
	go func() {
		time.Sleep(old.cfg.Policy.StoreTimeout.D() + 2*time.Second)
		d.closeRuntime(old)
	}()
}

// sameListeners rejects a reload that changes what only a restart can.
func sameListeners(old, cfg *config.Config) error {
	if old.Listen != cfg.Listen || old.MetricsListen != cfg.MetricsListen || old.Socket != cfg.Socket {
		return errors.New("listen, metrics_listen and socket change only on restart")
	}
	return nil
}

// Handler serves /metrics, /healthz (the process answers), /readyz (the
// store answers too) and /admin/votes (package admin).
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{
		Registry:            d.reg,
		EnableOpenMetrics:   true,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := d.current.Load().Ping(ctx); err != nil {
			http.Error(w, "store: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	admin.Routes(mux, func() (admin.Votes, string) {
		rt := d.current.Load()
		return rt.store, rt.adminToken
	}, d.log)
	admin.ExplainRoute(mux, func() (admin.Explainer, string) {
		rt := d.current.Load()
		return rt, rt.adminToken
	})
	return mux
}

// readyTimeout bounds a store ping for /readyz and at start.
const readyTimeout = 2 * time.Second

// warnStoreDown says at start when the store does not answer: a Redis that
// is down or unreachable does not stop the daemon (mail must flow), so
// without this line an admin learnt of it only from the first message's
// verdict or /readyz.
func (d *Daemon) warnStoreDown(ctx context.Context, rt *Runtime) {
	pctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := rt.Ping(pctx); err != nil && ctx.Err() == nil {
		d.log.Warn("store not reachable: mail passes with the policy.on_store_error verdict and /readyz answers 503 until it answers",
			"store", rt.storeName, "on_store_error", rt.cfg.Policy.OnStoreError, "err", err)
	}
}

// CheckSocketDir is check-config's look at a unix socket's directory:
// run cannot create the socket where it does not exist, so check-config
// must not say OK.
func CheckSocketDir(cfg *config.Config) error {
	network, addr, err := config.ParseListen(cfg.Listen)
	if err != nil || network != "unix" {
		return nil // the configuration's own check reports a bad value
	}
	if _, err := os.Stat(filepath.Dir(addr)); err != nil {
		return listenError("listen", cfg.Listen, err)
	}
	return nil
}

// listenError names the setting whose address could not be opened and
// what an admin does about the usual causes: the bare "bind: address
// already in use" said neither which of the two addresses it was nor why.
func listenError(setting, addr string, err error) error {
	var hint string
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		hint = "another process holds it, perhaps a milterd already running (ss -ltnp names it): stop it or set " + setting + " to a free port"
	case errors.Is(err, syscall.ENOENT):
		hint = "the socket's directory does not exist: create it for the daemon's user, or use /run/bulkmilter (the unit's RuntimeDirectory); with a chrooted Postfix see docs/operations.md \"The milter socket\""
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EROFS):
		hint = "the daemon's user may not create it there: use a directory it can write (under the shipped unit, add it to ReadWritePaths)"
	default:
		return fmt.Errorf("%s %s: %w", setting, addr, err)
	}
	return fmt.Errorf("%s %s: %w (%s)", setting, addr, err, hint)
}

// listen opens the milter socket of the configuration, which Load has
// validated.
func listen(spec string, sock config.Socket) (net.Listener, error) {
	network, addr, err := config.ParseListen(spec)
	if err != nil {
		return nil, err
	}
	access := milter.SocketAccess{Group: sock.Group}
	if sock.Mode != "" {
		m, err := strconv.ParseUint(sock.Mode, 8, 32)
		if err != nil {
			return nil, fmt.Errorf("socket mode %q: %w", sock.Mode, err)
		}
		access.Mode = os.FileMode(m)
	}
	return milter.Listen(network, addr, access)
}
