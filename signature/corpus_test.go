package signature

// Test helpers that read the shared corpora directly (tar archives) and
// tokenise them crudely. They stand in for package corpus and for
// Canonicalize, which live elsewhere; the families under test only see
// Docs.

import (
	"archive/tar"
	"bufio"
	"compress/bzip2"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// corpusFile returns the path of a corpus archive, failing under CI=true
// and skipping loudly otherwise when it is missing.
func corpusFile(tb testing.TB, rel string) string {
	tb.Helper()
	p := filepath.Join(testenv.Corpora(tb), rel)
	if _, err := os.Stat(p); err != nil {
		if testenv.InCI() {
			tb.Fatalf("corpus %s missing under CI: %v", p, err)
		}
		tb.Skipf("SKIPPED: corpus %s not available (%v); this test needs the shared corpora", p, err)
	}
	return p
}

type corpusMsg struct {
	Name string
	Text string // subject line, blank line, body
}

// readTar calls fn for each regular file of a (compressed) tar archive
// until fn returns false.
func readTar(tb testing.TB, path string, fn func(name string, data []byte) bool) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = bufio.NewReaderSize(f, 1<<20)
	switch {
	case strings.HasSuffix(path, ".gz"):
		gz, err := gzip.NewReader(r)
		if err != nil {
			tb.Fatal(err)
		}
		r = gz
	case strings.HasSuffix(path, ".bz2"):
		r = bzip2.NewReader(r)
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			tb.Fatalf("read %s: %v", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			tb.Fatalf("read %s: %s: %v", path, h.Name, err)
		}
		if !fn(h.Name, data) {
			return
		}
	}
}

// splitRFC822 returns the Subject and the body of a header-then-body text.
func splitRFC822(data []byte) (subject, body string) {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	head, body, _ := strings.Cut(s, "\n\n")
	for _, line := range strings.Split(head, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "subject") {
			subject = strings.TrimSpace(v)
		}
	}
	return subject, body
}

var (
	ngOnce sync.Once
	ngMsgs map[string][]corpusMsg // "train", "test"
)

// newsgroups returns the 20 Newsgroups posts of one split ("train" or
// "test"), in archive order (sorted by group, then id).
func newsgroups(tb testing.TB, split string) []corpusMsg {
	tb.Helper()
	path := corpusFile(tb, "20newsgroups-bydate/20news-bydate.tar.gz")
	ngOnce.Do(func() {
		ngMsgs = map[string][]corpusMsg{}
		readTar(tb, path, func(name string, data []byte) bool {
			sp := "train"
			if strings.HasPrefix(name, "20news-bydate-test/") {
				sp = "test"
			}
			subj, body := splitRFC822(data)
			ngMsgs[sp] = append(ngMsgs[sp], corpusMsg{Name: name, Text: subj + "\n\n" + body})
			return true
		})
	})
	return ngMsgs[split]
}

// enronHam returns the ham of enron1..6 (Subject line then body).
func enronHam(tb testing.TB, limit int) []corpusMsg {
	tb.Helper()
	var out []corpusMsg
	for i := 1; i <= 6 && len(out) < limit; i++ {
		path := corpusFile(tb, "enron-spam-preprocessed/enron"+string(rune('0'+i))+".tar.gz")
		readTar(tb, path, func(name string, data []byte) bool {
			if strings.Contains(name, "/ham/") {
				s := strings.ReplaceAll(string(data), "\r\n", "\n")
				s = strings.TrimPrefix(s, "Subject:")
				out = append(out, corpusMsg{Name: name, Text: s})
			}
			return len(out) < limit
		})
	}
	return out
}

var reutersBody = regexp.MustCompile(`(?s)<BODY>(.*?)</BODY>`)

// reuters returns the <BODY> texts of Reuters-21578 articles, in file order.
func reuters(tb testing.TB, limit int) []string {
	tb.Helper()
	path := corpusFile(tb, "reuters21578/reuters21578.tar.gz")
	var out []string
	readTar(tb, path, func(name string, data []byte) bool {
		if !strings.HasSuffix(name, ".sgm") {
			return true
		}
		for _, m := range reutersBody.FindAllSubmatch(data, -1) {
			body := strings.ReplaceAll(string(m[1]), "&lt;", "<")
			body = strings.ReplaceAll(body, "&amp;", "&")
			body = strings.TrimSuffix(strings.TrimSpace(body), "Reuter")
			out = append(out, body)
			if len(out) >= limit {
				return false
			}
		}
		return true
	})
	return out
}

var htmlTag = regexp.MustCompile(`(?s)<[^>]*>`)

// spamAssassin returns messages of one SpamAssassin folder archive (e.g.
// "spamassassin_easy_ham.tar.bz2") as crude text: Subject, and the body
// with HTML tags removed. MIME is not decoded: this is a stand-in until
// package mailtext and Canonicalize are merged.
func spamAssassin(tb testing.TB, archive string, limit int) []corpusMsg {
	tb.Helper()
	path := corpusFile(tb, "spamassassin-public-corpus/"+archive)
	var out []corpusMsg
	readTar(tb, path, func(name string, data []byte) bool {
		if strings.HasSuffix(name, "/cmds") {
			return true
		}
		subj, body := splitRFC822(data)
		body = htmlTag.ReplaceAllString(body, " ")
		out = append(out, corpusMsg{Name: name, Text: subj + "\n\n" + body})
		return len(out) < limit
	})
	return out
}

// tokenize is the stand-in canonicaliser: lower-case runs of letters and
// digits.
func tokenize(text string) []string {
	var toks []string
	start := -1
	for i, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			toks = append(toks, strings.ToLower(text[start:i]))
			start = -1
		}
	}
	if start >= 0 {
		toks = append(toks, strings.ToLower(text[start:]))
	}
	return toks
}

// docOf builds a Doc from tokens the way canonicalisation would: Letters is
// the tokens run together.
func docOf(toks []string) *Doc {
	return &Doc{Tokens: toks, Letters: strings.Join(toks, ""), Stats: DocStats{Words: len(toks)}}
}

func textDoc(text string) *Doc { return docOf(tokenize(text)) }

var (
	fixtureLexOnce sync.Once
	fixtureLex     *Lexicon
	fixtureLexErr  error
)

// testLexicon returns a lexicon built from the 20 Newsgroups training
// split, with the default parameters. Tests that need real English
// statistics use it; golden tests use the small committed fixture instead.
func testLexicon(tb testing.TB) *Lexicon {
	tb.Helper()
	msgs := newsgroups(tb, "train")
	fixtureLexOnce.Do(func() {
		b := NewLexiconBuilder(BuilderOptions{})
		for _, m := range msgs {
			b.Add(textDoc(m.Text))
		}
		fixtureLex, fixtureLexErr = b.Build(DefaultLexiconParams())
	})
	if fixtureLexErr != nil {
		tb.Fatal(fixtureLexErr)
	}
	return fixtureLex
}

// sortedKeys returns the distinct strings of a set, sorted.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
