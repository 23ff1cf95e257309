// Package mailbox reads mail collections for the daemon's scan command and for the
// lab (lab/corpus builds its labelled research corpora on it). It turns every
// supported layout into a stream of raw RFC 822 messages with a stable name.
//
// Supported inputs (Walk takes one path):
//
//   - a directory: walked recursively in lexical order; every regular file is a message,
//     except that archives (.tar, .tar.gz, .tgz, .tar.bz2, .tbz2, .tar.xz, .txz, or any
//     file whose content is a tar) and mbox files (.mbox, .mbx, possibly compressed) are
//     expanded. A maildir is a directory like any other, except that its tmp/
//     (messages still being delivered) is ignored, and that a live maildir's
//     server may rename a message while the walk runs: a message gone from new/
//     or cur/ when opened is read under its name in cur/ (same unique name, the
//     part before ':'), or skipped when it was expunged, never an error. A
//     message moved from new/ to cur/ after cur/ was listed and before new/ was
//     is not seen (a scan of a live maildir reads what was there throughout).
//   - a tar archive, possibly compressed: members in archive order.
//   - an mbox file, possibly compressed: a .mbox or .mbx file, or a path given to Walk
//     whose first line is a "From " line (unless it is .eml, .msg or .txt). It is split on
//     postmark lines ("From sender date"), with mboxrd ">From" unescaping; the UW-IMAP
//     "FOLDER INTERNAL DATA" pseudo-message is skipped. Inside directories and archives
//     a file without an mbox extension is always one message (SpamAssassin files start
//     with a "From " line).
//   - a single message file, possibly compressed.
//
// Compression is chosen by extension (.gz, .bz2, .xz). A leading mbox "From " line of a
// message file is removed.
//
// Names are stable across runs: an archive member path (prefixed with the archive's own
// name when the archive was found in a walked directory), a directory-relative path
// prefixed with the directory's base name (so an extracted folder and its tarball give
// the same names), and "#N" (1-based) appended for the N-th message of an mbox. Indices
// count skipped messages too, so options never renumber messages.
//
// Hidden files, documentation (README, LICENSE, COPYING, .md), maildir metadata and
// files that do not start with a header field are not messages; they are reported to
// Options.OnSkip with ErrNotMessage. Every message is bounded by Options.MaxSize; a
// larger one is reported, never held in memory whole.
//
// Options.Hooks extend the walk for the lab's corpora (label files, converted
// formats, files of several documents) without a second reader.
//
// It may import the standard library and a decompressor (ulikunitz/xz), nothing of
// bulkmilter.
package mailbox
