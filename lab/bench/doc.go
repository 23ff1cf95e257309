// Package bench measures bulkmilter the way docs/performance.md reports
// it, for "bulklab bench": the in-process pipeline per signature family,
// the daemon end to end over the milter protocol against a do-nothing
// milter under the same load, Redis round trips and CPU per message, and
// the store's memory per message.
//
// Throughput per core is messages per second of process CPU time
// (getrusage), steadier than wall time on a shared machine; the wall-time
// figures are reported next to it. The command wires the parts (it builds
// the daemon's runtime); this package only measures.
//
// It may import milter, store, internal/mtaclient and the other lab packages (load,
// sample, redisinfo); never daemon: the command passes the runtime in.
package bench
