// Package bench measures bulkmilter the way docs/performance.md reports
// it, for "bulklab bench": the in-process pipeline per signature family;
// end to end over the milter protocol, in alternating rounds, bulkmilter
// against a do-nothing milter and against its peer, Rspamd as a milter
// with fuzzy hashing and inline learning (rspamd.go starts it with its own
// redis-server), with the CPU of each process counted apart (proc.go);
// Redis round trips and CPU per message; and the store's memory per
// message.
//
// Throughput per core is messages per second of process CPU time
// (getrusage), steadier than wall time on a shared machine; the wall-time
// figures are reported next to it. Ratios between milters are taken
// within a round (Summarize). The command wires the parts (it builds the
// daemon's runtime); this package only measures.
//
// It may import milter, store, internal/mtaclient, internal/testenv (for
// ReservePort alone) and the other lab packages (load, sample, redisinfo);
// never daemon: the command passes the runtime in.
package bench
