package detect

// Decide exposes decide to the benchmarks, which are an external test
// package (they read the benchmark sample, which imports detect).
var Decide = (*Engine).decide
