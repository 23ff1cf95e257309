package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/milter"
	"github.com/bulkmilter/bulkmilter/store"
)

// runDaemon is "milterd run", the default command.
func runDaemon(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", stderr)
	cf := configFlags{daemon: true}
	cf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "milterd run: unexpected arguments %q\n", fs.Args())
		return errUsage
	}
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	d, err := newDaemon(cfg, &cf, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return d.run(ctx, hup)
}

// daemon is the running milter: listeners, the current runtime (replaced
// on reload) and the process-wide logger and metrics.
type daemon struct {
	flags   *configFlags
	log     *slog.Logger
	reg     *prometheus.Registry
	met     *metrics.Metrics
	logOut  io.Writer
	current atomic.Pointer[runtime]
	srv     *milter.Server
	ln      net.Listener
	httpLn  net.Listener
	reloads sync.Mutex
}

func newDaemon(cfg *config.Config, cf *configFlags, logOut io.Writer) (*daemon, error) {
	d := &daemon{flags: cf, log: newLogger(cfg, logOut), reg: prometheus.NewRegistry(), logOut: logOut}
	slog.SetDefault(d.log)
	// go-redis logs every failed dial; during an outage that belongs in
	// debug, the store error metric and one warning per message count it.
	store.RedisLogTo(d.log)
	d.met = metrics.New(d.reg)
	rt, err := newRuntime(cfg, d.log, d.met)
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
	if d.ln, err = milter.Listen(cfg.Listen, cfg.Socket); err != nil {
		rt.close()
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	if cfg.MetricsListen != "" {
		if d.httpLn, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			d.ln.Close()
			rt.close()
			return nil, fmt.Errorf("listen %s: %w", cfg.MetricsListen, err)
		}
	}
	return d, nil
}

// run serves until ctx ends, reloading on every value from hup, then
// drains: every message in progress gets its reply.
func (d *daemon) run(ctx context.Context, hup <-chan os.Signal) error {
	cfg := d.current.Load().cfg
	d.log.Info("milterd started", "version", version(), "listen", cfg.Listen,
		"metrics", cfg.MetricsListen, "config", cfg.String(), "store", d.current.Load().storeName,
		"signatures", d.current.Load().set.Version())

	errc := make(chan error, 2)
	go func() { errc <- d.srv.Serve(d.ln) }()
	var web *http.Server
	if d.httpLn != nil {
		web = &http.Server{Handler: d.handler(), ReadHeaderTimeout: 10 * time.Second}
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
	d.current.Load().close()
	d.log.Info("milterd stopped")
	return runErr
}

// reload builds a new runtime from the configuration file and swaps it in
// atomically; a message in progress finishes with the state it started
// with. An invalid configuration keeps the old runtime.
func (d *daemon) reload() {
	d.reloads.Lock()
	defer d.reloads.Unlock()
	old := d.current.Load()
	cfg, err := d.flags.load()
	if err == nil {
		err = sameListeners(old.cfg, cfg)
	}
	var rt *runtime
	if err == nil {
		rt, err = newRuntime(cfg, d.log, d.met, old)
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
		old.close()
	}()
}

// sameListeners rejects a reload that changes what only a restart can.
func sameListeners(old, cfg *config.Config) error {
	if old.Listen != cfg.Listen || old.MetricsListen != cfg.MetricsListen || old.Socket != cfg.Socket {
		return errors.New("listen, metrics_listen and socket change only on restart")
	}
	return nil
}

// handler serves /metrics, /healthz (the process answers), /readyz (the
// store answers too) and /admin/votes (votes.go).
func (d *daemon) handler() http.Handler {
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
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := d.current.Load().ping(ctx); err != nil {
			http.Error(w, "store: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	d.adminRoutes(mux)
	return mux
}
