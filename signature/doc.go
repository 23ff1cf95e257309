// Package signature turns the text a reader sees into near-duplicate
// signatures: a small set of keyed 64-bit keys per message, such that copies
// of one mass mailing share at least one key while unrelated messages share
// none.
//
// It owns two steps of the pipeline:
//
//   - canonicalisation: [Canonicalize] folds the visible text of a message
//     (decoded Subject, text parts, link domains) into a [Doc] of canonical
//     tokens on which the usual spammer tricks (homoglyphs, zero-width
//     characters, spaced letters, leetspeak, case and width variants) no
//     longer change the result;
//   - signing: each [Signer] maps a [Doc] to a few [Key]s of its [Family].
//
// The families come from the literature:
//
//   - I-Match (Chowdhury, Frieder, Grossman, McCabe 2002), with the secondary
//     lexicon and lexicon randomization of Kolcz & Chowdhury ("Lexicon
//     randomization for near-duplicate detection with I-Match", 2008; KDD
//     2004) and the context hardening of Kolcz & Chowdhury ("Hardening
//     fingerprinting by context");
//   - word shingles and supershingles over dictionary words (Broder 1997;
//     the Yandex Mail mass-mailing detector, 2003) and character shingles
//     over the letters-only stream;
//   - keyed text sifting with random skipping and random partitioning
//     (Malkin & Venkatesan 2005).
//
// Every hash that selects or counts is keyed with a secret (SipHash-2-4), so
// a sender cannot predict which parts of a message matter.
//
// The package is pure and deterministic: no I/O, no logging, no metrics.
// It imports internal/gopool alone (the long-lived goroutines that sift a long message beside the other families).
package signature
