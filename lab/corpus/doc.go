// Package corpus reads the labelled research corpora of the lab (lexicon build,
// evaluation, benchmarks). It is package mailbox (mbox, maildir, directories, tar
// archives, compression, names, size limits) extended through mailbox.Hooks with what
// only research corpora have: a ham/spam label per message and two formats that are not
// mail.
//
// Labels come from the layout: the deepest directory component of a message's name
// that is a spam or ham folder (spam, ham, spam_2, easy_ham, hard_ham_2, ...), and
// CSDMC2010's SPAMTrain.label ("<label> <file>", 1 = ham, 0 = spam), which overrides
// it; a label file must come before the messages it labels.
//
// Per-message conversions, so that every delivered message is a parseable RFC 822
// message:
//
//   - Enron-Spam "preprocessed" files (*.txt whose first line is "Subject:", followed
//     directly by the body) get the missing blank line after the Subject line;
//   - each <REUTERS> element of a Reuters-21578 .sgm file becomes one message named
//     "#NEWID", "Subject: TITLE", blank line, BODY, with SGML entities decoded;
//     documents without a BODY are skipped.
//
// Auxiliary files of the corpora (SpamAssassin cmds, Enron Summary.txt, SGML DTDs, TSV
// data, label files) are not messages; they are reported to Options.OnSkip with
// ErrNotMessage, like mailbox's own.
//
// It may import mailbox and the standard library. Only the lab and tests import it.
package corpus
