package eval

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/bulkmilter/bulkmilter/lab/corpus"
	"github.com/bulkmilter/bulkmilter/mailtext"
)

// Item is one message of a corpus.
type Item struct {
	Name string
	Raw  []byte
}

// The corpora the evaluation reads, relative to the corpora directory.
const (
	saDir      = "spamassassin-public-corpus"
	csdmcPath  = "csdmc2010/CSDMC2010_SPAM_TRAINING.tar.bz2"
	enronDir   = "enron-spam-preprocessed"
	newsPath   = "20newsgroups-bydate/20news-bydate.tar.gz"
	reuterPath = "reuters21578/reuters21578.tar.gz"
	potPath    = "phishing-pot/phishing_pot_email_le50KiB.tar.xz"
	potSilver  = "phishing-pot/silver_exact_prefix_clusters.tsv.gz"
	cpunkDir   = "cypherpunks-list-archive"
	cpunkSilv  = "cypherpunks-list-archive/silver_exact_prefix_clusters_2007-2013.tsv.gz"
)

var cpunkArchives = []string{"cypherpunks_maildir_2007-2008.tar.xz", "cypherpunks_maildir_2009-2013.tar.xz"}

// walk reads every message with the given label of the corpus paths, in
// their order.
func walk(dir string, rels []string, want corpus.Label, filter func(string) bool) ([]Item, error) {
	var out []Item
	opts := corpus.Options{Filter: filter, OnSkip: func(string, error) error { return nil }}
	for _, rel := range rels {
		err := opts.Walk(filepath.Join(dir, rel), func(m *corpus.Message) error {
			if want == corpus.Unknown || m.Label == want {
				out = append(out, Item{Name: m.Name, Raw: m.Data})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", rel, err)
		}
	}
	return out, nil
}

// under names files of a corpus directory.
func under(dir string, names ...string) []string {
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(dir, n)
	}
	return paths
}

// messageID returns the normalised Message-ID, or "".
func messageID(raw []byte) string {
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return ""
	}
	return strings.ToLower(strings.Trim(strings.TrimSpace(m.Header.Get("Message-Id")), "<>"))
}

// bodyHash identifies a message by its visible text, to drop copies of one
// message kept in two corpora.
func bodyHash(raw []byte) [32]byte {
	t := mailtext.Extract(bytes.NewReader(raw), mailtext.DefaultLimits)
	h := sha256.New()
	h.Write([]byte(t.Subject))
	for _, p := range t.Parts {
		h.Write([]byte{0})
		h.Write([]byte(p.Text))
	}
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

// dedupe drops messages whose Message-ID or visible text was seen before.
func dedupe(items []Item) []Item {
	ids := map[string]bool{}
	bodies := map[[32]byte]bool{}
	out := items[:0:0]
	for _, it := range items {
		id := messageID(it.Raw)
		bh := bodyHash(it.Raw)
		if (id != "" && ids[id]) || bodies[bh] {
			continue
		}
		if id != "" {
			ids[id] = true
		}
		bodies[bh] = true
		out = append(out, it)
	}
	return out
}

// HamStream returns the legitimate mail streamed among the campaigns:
// SpamAssassin easy, easy 2, hard and hard 2 ham and CSDMC2010 ham, without
// duplicates. Not 20 Newsgroups nor Enron: the bundled lexicon is built
// from them.
func HamStream(dir string) ([]Item, error) {
	sa := under(saDir, "spamassassin_easy_ham.tar.bz2", "spamassassin_easy_ham_2.tar.bz2", "spamassassin_hard_ham.tar.bz2", "spamassassin_hard_ham_2.tar.bz2")
	all, err := walk(dir, append(sa, csdmcPath), corpus.Ham, nil)
	if err != nil {
		return nil, err
	}
	return dedupe(all), nil
}

// SpamBases returns the candidate spam messages campaigns are made from:
// SpamAssassin spam and spam 2 (without the message the maintainers
// declared misclassified).
func SpamBases(dir string) ([]Item, error) {
	all, err := walk(dir, under(saDir, "spamassassin_spam.tar.bz2", "spamassassin_spam_2.tar.bz2"), corpus.Spam, func(n string) bool {
		return !strings.HasPrefix(n, "spam_2/00529.")
	})
	if err != nil {
		return nil, err
	}
	return dedupe(all), nil
}

// HamBases returns legitimate messages made into campaigns (legitimate bulk
// with the same tricks): Enron ham of the mailboxes 4–6, plain text. They
// are in the bundled lexicon's training set, which is said in the report.
func HamBases(dir string) ([]Item, error) {
	all, err := walk(dir, under(enronDir, "enron4.tar.gz", "enron5.tar.gz", "enron6.tar.gz"), corpus.Ham, nil)
	if err != nil {
		return nil, err
	}
	return dedupe(all), nil
}

// EnronBGSpam returns Bruce Guenter's spam-trap spam (Enron 3 and 6), the
// closest we have to Kolcz's Honeypot-spam collection.
func EnronBGSpam(dir string) ([]Item, error) {
	return walk(dir, under(enronDir, "enron3.tar.gz", "enron6.tar.gz"), corpus.Spam, nil)
}

// words splits text into lower-case words of letters.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) })
}

// LoadResources builds the attack word lists: Vocab from 20 Newsgroups
// training posts (words of 3–12 letters in at least 5 posts), Noise from
// Reuters articles (paragraphs of at least 20 words).
func LoadResources(dir string, maxNoise int) (*Resources, error) {
	df := map[string]int{}
	err := corpus.Options{Filter: func(n string) bool { return strings.HasPrefix(n, "20news-bydate-train/") }}.Walk(
		filepath.Join(dir, newsPath), func(m *corpus.Message) error {
			seen := map[string]bool{}
			_, body, _ := bytes.Cut(m.Data, []byte("\n\n"))
			for _, w := range words(string(body)) {
				if n := len(w); n >= 3 && n <= 12 && !seen[w] {
					seen[w] = true
					df[w]++
				}
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", newsPath, err)
	}
	res := &Resources{}
	for w, n := range df {
		if n >= 5 {
			res.Vocab = append(res.Vocab, w)
		}
	}
	slices.Sort(res.Vocab)
	err = corpus.Walk(filepath.Join(dir, reuterPath), func(m *corpus.Message) error {
		if len(res.Noise) >= maxNoise {
			return nil
		}
		_, body, _ := bytes.Cut(m.Data, []byte("\n\n"))
		for _, p := range splitParagraphs(strings.ReplaceAll(string(body), "\n    ", "\n\n")) {
			p = strings.Join(strings.Fields(p), " ")
			if len(strings.Fields(p)) >= 20 && !strings.Contains(p, "Reuter") {
				res.Noise = append(res.Noise, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", reuterPath, err)
	}
	if len(res.Vocab) < 1000 || len(res.Noise) < 100 {
		return nil, fmt.Errorf("attack resources too small: %d words, %d noise paragraphs", len(res.Vocab), len(res.Noise))
	}
	return res, nil
}

// RealSet is a real stream with its silver campaign groups.
type RealSet struct {
	Name   string
	Items  []Item
	Silver map[string]string // message name → exact-prefix group key
}

// readSilver reads a silver grouping file: file, prefix_key, cluster_size.
func readSilver(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for first := true; sc.Scan(); first = false {
		if first {
			continue
		}
		f := strings.Split(sc.Text(), "\t")
		if len(f) >= 2 && f[1] != "" {
			out[f[0]] = f[1]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// byDate orders messages by their Date header (stable; undated messages
// keep their place relative to each other, first).
func byDate(items []Item) {
	dates := make(map[string]time.Time, len(items))
	for _, it := range items {
		if m, err := mail.ReadMessage(bytes.NewReader(it.Raw)); err == nil {
			if d, err := mail.ParseDate(m.Header.Get("Date")); err == nil {
				dates[it.Name] = d
			}
		}
	}
	sort.SliceStable(items, func(i, j int) bool { return dates[items[i].Name].Before(dates[items[j].Name]) })
}

// PhishingPot returns the Phishing Pot stream in date order with its
// silver groups.
func PhishingPot(dir string) (*RealSet, error) {
	items, err := walk(dir, []string{potPath}, corpus.Unknown, nil)
	if err != nil {
		return nil, err
	}
	silver, err := readSilver(filepath.Join(dir, potSilver))
	if err != nil {
		return nil, err
	}
	byDate(items)
	return &RealSet{Name: "phishing-pot", Items: items, Silver: silver}, nil
}

// Cypherpunks returns the cypherpunks 2007–2013 stream in date order with
// its silver groups; years limits it to some years ("2007-2008" or all).
func Cypherpunks(dir string, archives int) (*RealSet, error) {
	items, err := walk(dir, under(cpunkDir, cpunkArchives[:min(archives, len(cpunkArchives))]...), corpus.Unknown, nil)
	if err != nil {
		return nil, err
	}
	silver, err := readSilver(filepath.Join(dir, cpunkSilv))
	if err != nil {
		return nil, err
	}
	byDate(items)
	return &RealSet{Name: "cypherpunks", Items: items, Silver: silver}, nil
}

// itoa is strconv.Itoa, short.
func itoa(n int) string { return strconv.Itoa(n) }
