package corpus_test

import (
	"bytes"
	"errors"
	"net/mail"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/lab/corpus"
)

func corporaDir(tb testing.TB) string { return testenv.Corpora(tb) }

// TestCorpora walks every shared corpus and checks the counts against its SOURCE.md, and
// that each delivered message is readable by net/mail.
func TestCorpora(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: reads every shared corpus (about a minute)")
	}
	root := corporaDir(t)
	tests := []struct {
		path                      string
		filter                    string // name prefix, if any
		total, ham, spam, unknown int
		skips                     int      // total skipped (auxiliary files, documents without BODY, ...)
		skipNames                 []string // some of them, checked by name
		// mailErrs is how many messages net/mail cannot read (their headers are as
		// stored; normalisation is left to mailtext).
		mailErrs int
	}{
		{path: "spamassassin-public-corpus/spamassassin_spam.tar.bz2", total: 500, spam: 500, skips: 1, skipNames: []string{"spam/cmds"}},
		{path: "spamassassin-public-corpus/spamassassin_spam_2.tar.bz2", total: 1397, spam: 1397, skips: 1, skipNames: []string{"spam_2/cmds"}},
		{path: "spamassassin-public-corpus/spamassassin_easy_ham.tar.bz2", total: 2500, ham: 2500, skips: 1},
		{path: "spamassassin-public-corpus/spamassassin_easy_ham_2.tar.bz2", total: 1400, ham: 1400, skips: 1},
		{path: "spamassassin-public-corpus/spamassassin_hard_ham.tar.bz2", total: 249, ham: 249, skips: 1},
		{path: "spamassassin-public-corpus/spamassassin_hard_ham_2.tar.bz2", total: 248, ham: 248},
		// 4 messages have a header line without a colon ("X-BitDefenderWKS No - 6").
		{path: "csdmc2010/CSDMC2010_SPAM_TRAINING.tar.bz2", total: 4327, ham: 2949, spam: 1378, skips: 2,
			skipNames: []string{"CSDMC2010_SPAM/SPAMTrain.label", "CSDMC2010_SPAM/readme.txt"}, mailErrs: 4},
		{path: "enron-spam-preprocessed/enron1.tar.gz", total: 5172, ham: 3672, spam: 1500, skips: 1, skipNames: []string{"enron1/Summary.txt"}},
		{path: "enron-spam-preprocessed/enron2.tar.gz", total: 5857, ham: 4361, spam: 1496, skips: 1},
		{path: "enron-spam-preprocessed/enron3.tar.gz", total: 5512, ham: 4012, spam: 1500, skips: 1},
		{path: "enron-spam-preprocessed/enron4.tar.gz", total: 6000, ham: 1500, spam: 4500, skips: 1},
		{path: "enron-spam-preprocessed/enron5.tar.gz", total: 5175, ham: 1500, spam: 3675, skips: 1},
		{path: "enron-spam-preprocessed/enron6.tar.gz", total: 6000, ham: 1500, spam: 4500, skips: 1},
		// The whole directory at once: 33,716 = 16,545 ham + 17,171 spam; SOURCE.md skipped too.
		{path: "enron-spam-preprocessed", total: 33716, ham: 16545, spam: 17171, skips: 7,
			skipNames: []string{"enron-spam-preprocessed/SOURCE.md"}},
		// 22 posts start with a folded line left from a removed header; net/mail rejects them.
		{path: "20newsgroups-bydate/20news-bydate.tar.gz", total: 18846, unknown: 18846, mailErrs: 22},
		{path: "20newsgroups-bydate/20news-bydate.tar.gz", filter: "20news-bydate-train/", total: 11314, unknown: 11314, mailErrs: 16},
		// 21,578 documents, of which 19,043 have a BODY; 2,535 without, plus 9 non-SGML files.
		{path: "reuters21578/reuters21578.tar.gz", total: 19043, unknown: 19043, skips: 2535 + 9,
			skipNames: []string{"reuters21578/README.txt", "reuters21578/lewis.dtd", "reuters21578/feldman-cia-worldfactbook-data.txt"}},
		{path: "nazario-phishing/phishing0.mbox.xz", total: 414, unknown: 414},
		// SOURCE.md counts 456 "From " lines; the first is the UW-IMAP folder-data pseudo-message.
		{path: "nazario-phishing/phishing1.mbox.xz", total: 455, unknown: 455, skips: 1, skipNames: []string{"phishing1.mbox.xz#1"}},
		{path: "nazario-phishing/20051114.mbox.xz", total: 438, unknown: 438},
		// SOURCE.md counts 6,927 files; sample-2227.eml is empty (0 bytes), so not a message.
		{path: "phishing-pot/phishing_pot_email_le50KiB.tar.xz", total: 6926, unknown: 6926, skips: 1, skipNames: []string{"email/sample-2227.eml"}},
		{path: "cypherpunks-list-archive/cypherpunks_maildir_2007-2008.tar.xz", total: 11151, unknown: 11151},
		{path: "cypherpunks-list-archive/cypherpunks_maildir_2009-2013.tar.xz", total: 24820, unknown: 24820},
	}
	for _, tt := range tests {
		t.Run(tt.path+"/"+tt.filter, func(t *testing.T) {
			var counts [3]int
			var skipped []string
			names := make(map[string]bool)
			mailErrs := 0
			var size int64
			opts := corpus.Options{
				OnSkip: func(name string, reason error) error {
					if errors.Is(reason, corpus.ErrTooLarge) {
						t.Errorf("%s: %v", name, reason)
					}
					skipped = append(skipped, name)
					return nil
				},
			}
			if tt.filter != "" {
				opts.Filter = func(n string) bool { return strings.HasPrefix(n, tt.filter) }
			}
			err := opts.Walk(filepath.Join(root, tt.path), func(m *corpus.Message) error {
				counts[m.Label]++
				size += int64(len(m.Data))
				if names[m.Name] {
					t.Errorf("duplicate name %s", m.Name)
				}
				names[m.Name] = true
				if _, err := mail.ReadMessage(bytes.NewReader(m.Data)); err != nil {
					mailErrs++
					if mailErrs <= 3 {
						t.Logf("net/mail cannot read %s: %v", m.Name, err)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Walk: %v", err)
			}
			total := counts[corpus.Unknown] + counts[corpus.Ham] + counts[corpus.Spam]
			t.Logf("%d messages (%d ham, %d spam, %d unknown), %.1f MB, %d skipped", total, counts[corpus.Ham], counts[corpus.Spam], counts[corpus.Unknown], float64(size)/1e6, len(skipped))
			if total != tt.total || counts[corpus.Ham] != tt.ham || counts[corpus.Spam] != tt.spam || counts[corpus.Unknown] != tt.unknown {
				t.Errorf("got %d messages (%d ham, %d spam, %d unknown), want %d (%d ham, %d spam, %d unknown)",
					total, counts[corpus.Ham], counts[corpus.Spam], counts[corpus.Unknown], tt.total, tt.ham, tt.spam, tt.unknown)
			}
			if len(skipped) != tt.skips {
				t.Errorf("got %d skipped, want %d; first: %q", len(skipped), tt.skips, skipped[:min(len(skipped), 10)])
			}
			for _, want := range tt.skipNames {
				found := false
				for _, s := range skipped {
					found = found || s == want
				}
				if !found {
					t.Errorf("%s not among the skipped", want)
				}
			}
			if mailErrs != tt.mailErrs {
				t.Errorf("net/mail failed on %d messages, want %d", mailErrs, tt.mailErrs)
			}
		})
	}
}
