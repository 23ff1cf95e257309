// Package eval measures detection the way docs/evaluation.md reports it, for "bulklab
// eval": campaigns generated from real spam and ham under the attack suite (attacks.go,
// after Malkin & Venkatesan 2005 §3.4 and the spammer tricks of the Kolcz papers), ham
// false positives over dated mail streams, the real near-duplicate groups of public
// archives (real.go), one real site's stream in delivery order with the envelope its
// header names (stream.go: trec07p, the small-site view of issue 16), and the protocols
// of Kolcz et al. (kolcz.go) and Malkin & Venkatesan (malkin.go). Floors (floors.go)
// turn a report into the CI gate.
//
// The pipeline under test is passed in (Config.NewPipeline): the command builds the
// daemon's own runtime, so what is measured is what runs. It may import detect,
// mailtext, signature (the papers' protocols sign with variants of the configured
// families), refile (refiling simulated with the daemon's refiler, refile.go), lab/corpus
// and mailbox (the stream's archive and its index), and store for a constant alone
// (WeakCap, in the trace of a miss); never daemon or milter.
package eval
