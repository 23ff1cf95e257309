// Package daemon is bulkmilter's runtime wiring: it turns a configuration
// into a running milter, for cmd/milterd and, identically, for the lab
// (cmd/bulklab), so that what is measured offline is what runs online.
//
// It owns:
//   - the Runtime built from one configuration: the secret key (created
//     on first start, refused when others can read it), the signature set,
//     the store (the embedded store's file locked against a second
//     process, or Redis), the detect.Engine, the milter.State and the
//     feedback handler;
//   - the Daemon: the milter listener, the HTTP listener (/metrics,
//     /healthz, /readyz and package admin's /admin/votes) with its client
//     timeouts, the reload that swaps runtimes on SIGHUP, and the drain;
//   - the replay of a raw message through a runtime (scan, eval, bench).
//
// It may import every product package (config, signature, bundled,
// mailtext, detect, store, milter, feedback, metrics, admin); nothing
// under lab/ and no test helper. Flags, logger construction and signals
// belong to the commands.
package daemon
