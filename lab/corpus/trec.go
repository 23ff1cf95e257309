package corpus

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strings"
)

// TRECIndex reads a TREC spam track index ("spam ../data/inmail.1", one
// message a line) named name into spam: true for spam, false for ham,
// keyed by the message file's base name.
func TRECIndex(name string, r io.Reader, spam map[string]bool) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || (f[0] != "spam" && f[0] != "ham") {
			return fmt.Errorf("%s: bad line %q", name, sc.Text())
		}
		spam[path.Base(f[1])] = f[0] == "spam"
	}
	return sc.Err()
}
