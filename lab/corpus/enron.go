package corpus

import (
	"bytes"
	"path"
	"strings"
)

// isEnron recognises an Enron-Spam "preprocessed" file: a .txt whose first line is the
// Subject header, followed directly by the body (no blank line, no other header).
func isEnron(name string, data []byte) bool {
	return strings.EqualFold(path.Ext(name), ".txt") && bytes.HasPrefix(data, []byte("Subject:"))
}

// enronToRFC822 inserts the blank line that ends the header after the first (Subject)
// line, using that line's line ending. Body lines that start with whitespace would
// otherwise be read as folded Subject lines (17 Enron files have such a second line).
func enronToRFC822(data []byte) []byte {
	i := bytes.IndexByte(data, '\n')
	if i < 0 {
		out := make([]byte, 0, len(data)+2)
		return append(append(out, data...), "\n\n"...)
	}
	eol := "\n"
	if i > 0 && data[i-1] == '\r' {
		eol = "\r\n"
	}
	out := make([]byte, 0, len(data)+len(eol))
	out = append(out, data[:i+1]...)
	out = append(out, eol...)
	return append(out, data[i+1:]...)
}
