package mailbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// walkMbox delivers the messages of an mbox stream, named name#1, name#2, ...
func (w *walker) walkMbox(r io.Reader, p, name string) error {
	idx := 0
	err := splitMbox(r, w.max, func(data []byte, size int64) error {
		idx++
		mname := name + "#" + strconv.Itoa(idx)
		if !w.want(mname) {
			return nil
		}
		if data == nil {
			return w.skipTooLarge(mname, size)
		}
		if isFolderData(data) {
			return w.skipNotMessage(mname, "mbox folder internal data")
		}
		if !looksLikeMessage(data) {
			return w.skipNotMessage(mname, "no header field at the start")
		}
		return w.deliver(mname, data)
	})
	if err != nil && !errors.Is(err, errStop) {
		return fmt.Errorf("mailbox: read mbox %s: %w", p, err)
	}
	return err
}

// splitMbox splits an mbox stream into messages and calls emit for each, in order, with
// the message (a fresh slice, without its "From " line) and its size. A message larger
// than limit (limit < 0: no limit) is emitted with nil data and is never held in memory
// beyond limit bytes.
//
// A message starts at every postmark line ("From sender date", see isPostmark), whether
// or not a blank line precedes it: some real mboxes (Nazario's) omit that blank line.
// Lines matching ">+From " lose one ">" (mboxrd); in mboxo files this also turns an
// original ">From " into "From ", which cannot be told apart. The blank line that
// separates messages is removed.
func splitMbox(r io.Reader, limit int64, emit func(data []byte, size int64) error) error {
	br := bufio.NewReaderSize(r, bufSize)
	var (
		msg     []byte
		size    int64
		started bool
		line    []byte
	)
	// A line is stored up to what can still fit a message, but at least enough to
	// recognise a postmark; a longer line makes its message too large anyway.
	lineCap := int64(-1)
	if limit >= 0 {
		lineCap = limit
		if lineCap < math.MaxInt64 {
			lineCap++
		}
		lineCap = max(lineCap, sniffSize)
	}
	flush := func() error {
		if !started {
			return nil
		}
		if limit >= 0 && size > limit {
			return emit(nil, size)
		}
		if msg == nil {
			msg = []byte{} // empty, not too large
		}
		return emit(trimSeparator(msg), size)
	}
	for n := 1; ; n++ {
		var total int64
		var err error
		line, total, err = ReadLine(br, line[:0], lineCap)
		if total > 0 {
			switch {
			case isPostmark(line):
				if err := flush(); err != nil {
					return err
				}
				started, msg, size = true, nil, 0
			case !started:
				if len(bytes.TrimSpace(line)) > 0 {
					return fmt.Errorf("line %d: data before the first \"From \" line", n)
				}
			default:
				l := unescapeFrom(line)
				size += total - int64(len(line)-len(l))
				if limit >= 0 && size > limit {
					msg = nil // too large: stop holding it, keep counting
				} else {
					msg = append(msg, l...)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return flush()
		}
		if err != nil {
			return err
		}
	}
}

// ReadLine appends the next line (with its "\n") to buf, storing at most lineCap bytes
// (lineCap < 0: all) and returning the line's full length, for Splitters that read
// lines as the mbox reader does.
func ReadLine(br *bufio.Reader, buf []byte, lineCap int64) ([]byte, int64, error) {
	var total int64
	for {
		frag, err := br.ReadSlice('\n')
		total += int64(len(frag))
		if lineCap < 0 || int64(len(buf)) < lineCap {
			room := len(frag)
			if lineCap >= 0 && int64(len(buf)+room) > lineCap {
				room = int(lineCap - int64(len(buf)))
			}
			buf = append(buf, frag[:room]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, total, err
	}
}

// trimSeparator removes the blank line that mbox puts between messages.
func trimSeparator(m []byte) []byte {
	switch {
	case bytes.HasSuffix(m, []byte("\n\n")):
		return m[:len(m)-1]
	case bytes.HasSuffix(m, []byte("\r\n\r\n")):
		return m[:len(m)-2]
	}
	return m
}

// unescapeFrom undoes mboxrd quoting: ">From " -> "From ", ">>From " -> ">From ".
func unescapeFrom(line []byte) []byte {
	i := 0
	for i < len(line) && line[i] == '>' {
		i++
	}
	if i > 0 && bytes.HasPrefix(line[i:], []byte("From ")) {
		return line[1:]
	}
	return line
}

// isPostmark reports an mbox separator line: "From ", a sender, then a date with a
// time (hh:mm) and a four-digit year. Requiring the date keeps unescaped body lines
// such as "From the desk of ..." inside their message.
func isPostmark(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("From ")) {
		return false
	}
	rest := bytes.TrimLeft(line[5:], " \t")
	sp := bytes.IndexAny(rest, " \t")
	if sp <= 0 {
		return false
	}
	date := rest[sp:]
	return hasTime(date) && hasYear(date)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func hasTime(b []byte) bool {
	for i := 1; i+2 < len(b); i++ {
		if b[i] == ':' && isDigit(b[i-1]) && isDigit(b[i+1]) && isDigit(b[i+2]) {
			return true
		}
	}
	return false
}

func hasYear(b []byte) bool {
	for i := 0; i+4 <= len(b); i++ {
		if (i > 0 && isDigit(b[i-1])) || (i+4 < len(b) && isDigit(b[i+4])) {
			continue
		}
		if isDigit(b[i]) && isDigit(b[i+1]) && isDigit(b[i+2]) && isDigit(b[i+3]) &&
			(b[i] == '1' && b[i+1] == '9' || b[i] == '2' && b[i+1] == '0') {
			return true
		}
	}
	return false
}

// isFolderData reports the pseudo-message UW-IMAP and Pine keep first in an mbox
// ("DON'T DELETE THIS MESSAGE -- FOLDER INTERNAL DATA", with an X-IMAP header).
func isFolderData(m []byte) bool {
	hdr := m
	if i := bytes.Index(m, []byte("\n\n")); i >= 0 {
		hdr = m[:i+1]
	} else if i := bytes.Index(m, []byte("\r\n\r\n")); i >= 0 {
		hdr = m[:i+2]
	}
	return bytes.Contains(hdr, []byte("FOLDER INTERNAL DATA")) &&
		(bytes.Contains(hdr, []byte("\nX-IMAP:")) || bytes.Contains(hdr, []byte("\nX-IMAPbase:")))
}
