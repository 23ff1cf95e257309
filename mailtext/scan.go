package mailtext

import (
	"bufio"
	"bytes"
	"io"
)

// lineBufSize bounds the bytes held for one line: a longer line is read in
// fragments, so a 1 MB header or body line costs no more memory than this.
const lineBufSize = 64 << 10

// lineReader yields lines (with their '\n', if any) and supports pushing
// lines back, which the header reader needs for its one-line lookahead.
type lineReader struct {
	br      *bufio.Reader
	midLine bool     // the previous fragment did not end in '\n'
	pushed  [][]byte // pushed-back lines, last one first out
	done    bool
	read    int64 // bytes read so far
}

// next returns the next line or line fragment. start reports whether it
// begins a line (only such fragments can be boundaries or header fields).
func (lr *lineReader) next() (line []byte, start bool, ok bool) {
	if n := len(lr.pushed); n > 0 {
		line = lr.pushed[n-1]
		lr.pushed = lr.pushed[:n-1]
		return line, true, true
	}
	if lr.done {
		return nil, false, false
	}
	start = !lr.midLine
	line, err := lr.br.ReadSlice('\n')
	lr.read += int64(len(line))
	switch err {
	case nil:
		lr.midLine = false
	case bufio.ErrBufferFull:
		lr.midLine = true
	default:
		lr.done = true
		lr.midLine = false
		if len(line) == 0 {
			return nil, false, false
		}
	}
	return line, start, true
}

// push returns a whole line to the reader; the next call to next returns it.
// The line is copied: the bufio buffer it came from is reused.
func (lr *lineReader) push(line []byte) {
	lr.pushed = append(lr.pushed, bytes.Clone(line))
}

// hit says what ended a body: a boundary of the stack, or the end of input.
type hit struct {
	level int  // index of the boundary in the stack; -1 for end of input
	close bool // a final boundary ("--b--")
}

var eofHit = hit{level: -1}

// stream is one input being split: its lines and the boundaries of the
// multiparts open on it, outermost first.
type stream struct {
	lr    lineReader
	stack [][]byte
}

func newStream(r io.Reader, br *bufio.Reader) *stream {
	if br == nil {
		br = bufio.NewReaderSize(r, lineBufSize)
	} else {
		br.Reset(r)
	}
	return &stream{lr: lineReader{br: br}}
}

// match reports whether line is a delimiter of one of the open multiparts,
// innermost first. A delimiter of an outer multipart also ends the inner
// ones, as most readers do when an inner final boundary is missing.
func (s *stream) match(line []byte) (hit, bool) {
	if len(s.stack) == 0 || len(line) < 3 || line[0] != '-' || line[1] != '-' {
		return hit{}, false
	}
	body := trimEOL(line)[2:]
	for i := len(s.stack) - 1; i >= 0; i-- {
		b := s.stack[i]
		if !bytes.HasPrefix(body, b) {
			continue
		}
		rest := body[len(b):]
		closing := false
		if len(rest) >= 2 && rest[0] == '-' && rest[1] == '-' {
			closing = true
			rest = rest[2:]
		}
		if isLWSP(rest) {
			return hit{level: i, close: closing}, true
		}
	}
	return hit{}, false
}

// trimEOL removes a trailing "\n" or "\r\n".
func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

func isLWSP(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' {
			return false
		}
	}
	return true
}

func isBlank(b []byte) bool {
	return len(trimEOL(b)) == 0
}
