package corpus

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strings"
)

// labelFileName is CSDMC2010's label file: "<label> <file>" per line, 1 = ham, 0 = spam
// (inverted from the usual convention), file names relative to the TRAINING directory
// beside it.
const labelFileName = "SPAMTrain.label"

const maxLabelFile = 16 << 20

// labelScope holds the labels of one label file, applying to messages under dir.
type labelScope struct {
	dir    string
	labels map[string]Label // by message base name
}

type labelScopes []labelScope

// lookup finds the label of a message in the deepest label file above it.
func (s labelScopes) lookup(name string) (Label, bool) {
	dir, base := path.Dir(name), path.Base(name)
	best, found := -1, Unknown
	for _, sc := range s {
		if !under(dir, sc.dir) || len(sc.dir) <= best {
			continue
		}
		if l, ok := sc.labels[base]; ok {
			best, found = len(sc.dir), l
		}
	}
	return found, best >= 0
}

// under reports whether dir is scope or below it.
func under(dir, scope string) bool {
	return scope == "." || dir == scope || strings.HasPrefix(dir, scope+"/")
}

// labeller labels the messages of one walk: by the label files read so far, else by
// the message's directories.
type labeller struct {
	labels labelScopes
	// seenDirs records the directories of delivered messages so that a label file
	// arriving after the messages it labels is an error rather than silently ignored.
	seenDirs map[string]bool
}

// label returns the label of a delivered message.
func (l *labeller) label(name string) Label {
	if l.seenDirs == nil {
		l.seenDirs = make(map[string]bool)
	}
	l.seenDirs[path.Dir(name)] = true
	if lb, ok := l.labels.lookup(name); ok {
		return lb
	}
	return inferLabel(name)
}

// loadLabels parses a label file named name and adds its scope (mailbox's
// Hooks.ReadSidecar).
func (l *labeller) loadLabels(name string, r io.Reader) error {
	r = io.LimitReader(r, maxLabelFile)
	scope := path.Dir(name)
	for d := range l.seenDirs {
		if under(d, scope) {
			return fmt.Errorf("label file %s comes after messages it may label (under %s); put it first in the archive", name, d)
		}
	}
	labels := make(map[string]Label)
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return fmt.Errorf("label file %s line %d: want \"<label> <file>\", got %q", name, n, line)
		}
		switch f[0] {
		case "1":
			labels[path.Base(f[1])] = Ham
		case "0":
			labels[path.Base(f[1])] = Spam
		default:
			return fmt.Errorf("label file %s line %d: label %q is neither 1 (ham) nor 0 (spam)", name, n, f[0])
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("label file %s: %w", name, err)
	}
	l.labels = append(l.labels, labelScope{dir: scope, labels: labels})
	return nil
}

// inferLabel takes the label from the deepest directory component of name that is a
// spam or ham folder: spam, ham, spam_2, easy_ham, hard_ham_2, enron1/ham, ... (the
// file name itself never labels).
func inferLabel(name string) Label {
	dir := path.Dir(name)
	for dir != "." && dir != "/" && dir != "" {
		if l := folderLabel(path.Base(dir)); l != Unknown {
			return l
		}
		dir = path.Dir(dir)
	}
	return Unknown
}

func folderLabel(c string) Label {
	c = strings.ToLower(c)
	// spam_2, hard_ham_2, spam2: a numbered part of the same folder.
	c = strings.TrimRight(c, "0123456789")
	c = strings.TrimRight(c, "_-")
	// easy_ham, hard_ham: one alphabetic qualifier. Names with digits or several words
	// (CSDMC2010_SPAM, enron-spam-preprocessed) name a corpus, not a class.
	if i := strings.LastIndexAny(c, "_-"); i > 0 && isAlpha(c[:i]) {
		c = c[i+1:]
	}
	switch c {
	case "spam":
		return Spam
	case "ham":
		return Ham
	}
	return Unknown
}

func isAlpha(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return s != ""
}
