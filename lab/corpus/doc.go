// Package corpus reads message collections for the offline commands (lexicon build, scan,
// evaluation, benchmarks). It turns every supported layout into a stream of raw RFC 822
// messages with a stable name and, where the layout says so, a ham/spam label.
//
// Supported inputs (Walk takes one path):
//
//   - a directory: walked recursively in lexical order; every regular file is a message,
//     except that archives (.tar, .tar.gz, .tgz, .tar.bz2, .tbz2, .tar.xz, .txz, or any
//     file whose content is a tar), mbox files (.mbox, .mbx, possibly compressed) and
//     Reuters SGML files (.sgm) are expanded. A maildir is a directory like any other,
//     except that its tmp/ (messages still being delivered) is ignored.
//   - a tar archive, possibly compressed: members in archive order.
//   - an mbox file, possibly compressed: a .mbox or .mbx file, or a path given to Walk
//     whose first line is a "From " line (unless it is .eml, .msg or .txt). It is split on
//     postmark lines ("From sender date"), with mboxrd ">From" unescaping; the UW-IMAP
//     "FOLDER INTERNAL DATA" pseudo-message is skipped. Inside directories and archives
//     a file without an mbox extension is always one message (SpamAssassin files start
//     with a "From " line).
//   - a single message file, possibly compressed.
//
// Compression is chosen by extension (.gz, .bz2, .xz).
//
// Per-message conversions, so that every delivered message is a parseable RFC 822 message:
//
//   - a leading mbox "From " line is removed (SpamAssassin public corpus files have one);
//   - Enron-Spam "preprocessed" files (*.txt whose first line is "Subject:", followed
//     directly by the body) get the missing blank line after the Subject line;
//   - each <REUTERS> element of a Reuters-21578 .sgm file becomes one message,
//     "Subject: TITLE", blank line, BODY, with SGML entities decoded; documents without
//     a BODY are skipped.
//
// Names are stable across runs: an archive member path (prefixed with the archive's own
// name when the archive was found in a walked directory), a directory-relative path
// prefixed with the directory's base name (so an extracted SpamAssassin folder and its
// tarball give the same names), "#N" (1-based) appended for the N-th message of an mbox,
// and "#NEWID" for a Reuters document. Indices count skipped messages too, so options
// never renumber messages.
//
// Labels come from the layout: the deepest directory component named spam or ham
// (also spam_2, easy_ham, hard_ham_2, ...) inside the archive or walked directory, and
// CSDMC2010's SPAMTrain.label ("<label> <file>", 1 = ham, 0 = spam), which overrides it.
//
// Auxiliary files (SpamAssassin cmds, Enron Summary.txt, READMEs, SGML DTDs, label files,
// hidden files) and files that do not start with a header field are not messages; they
// are reported to Options.OnSkip with ErrNotMessage.
package corpus
