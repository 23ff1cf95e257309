package mailbox

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/ulikunitz/xz"
)

const bufSize = 64 << 10

// sniffSize is how much of a file is looked at to tell a tar, an mbox or a message.
const sniffSize = 4096

// walkDir walks a directory recursively in lexical order. Names are the slash-separated
// path relative to the directory, prefixed with the directory's base name.
func (w *walker) walkDir(root string) error {
	abs, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("mailbox %s: %w", root, err)
	}
	base := filepath.Base(abs)
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("mailbox: walk %s: %w", p, err)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return fmt.Errorf("mailbox: walk %s: %w", p, err)
		}
		name := base
		if rel != "." {
			name = base + "/" + filepath.ToSlash(rel)
		}
		if d.IsDir() {
			if p != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			// Maildir: tmp/ holds messages still being delivered.
			if d.Name() == "tmp" && isMaildir(filepath.Dir(p)) {
				return filepath.SkipDir
			}
			return w.sidecarDir(p, name)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			fi, err := os.Stat(p)
			if err != nil {
				return fmt.Errorf("mailbox: walk %s: %w", p, err)
			}
			if !fi.Mode().IsRegular() {
				return nil // symlinked directories are not followed: no loops
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		return w.walkFile(p, name, false)
	})
}

// maildirSuccessor finds the file a message of a maildir's new/ or cur/,
// listed at p (named name) but gone when opened, was renamed to: the file
// in the maildir's cur/ with the same unique name (the part of a maildir
// file name before ':'), or "" when there is none (expunged). inMaildir
// says whether p was in a maildir's new/ or cur/ at all. Found in cur/
// after the walk passed it (cur/ sorts before new/), it is read once,
// under its new name.
func maildirSuccessor(p, name string) (np, nname string, inMaildir bool) {
	dir, md := filepath.Dir(p), filepath.Dir(filepath.Dir(p))
	if sub := filepath.Base(dir); (sub != "cur" && sub != "new") || !isMaildir(md) {
		return "", "", false
	}
	unique, _, _ := strings.Cut(filepath.Base(p), ":")
	entries, err := os.ReadDir(filepath.Join(md, "cur"))
	if err != nil {
		return "", "", true
	}
	for _, e := range entries {
		if u, _, _ := strings.Cut(e.Name(), ":"); u == unique && e.Type().IsRegular() {
			return filepath.Join(md, "cur", e.Name()), path.Dir(path.Dir(name)) + "/cur/" + e.Name(), true
		}
	}
	return "", "", true
}

func isMaildir(dir string) bool {
	for _, sub := range []string{"cur", "new"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// sidecarDir hands directory p's sidecar file, if any, to the hook before any message
// under p.
func (w *walker) sidecarDir(p, name string) error {
	if w.hooks.Sidecar == "" || w.hooks.ReadSidecar == nil {
		return nil
	}
	f, err := os.Open(filepath.Join(p, w.hooks.Sidecar))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mailbox: open %s: %w", w.hooks.Sidecar, err)
	}
	defer f.Close()
	return w.sidecar(name+"/"+w.hooks.Sidecar, f)
}

// walkFile reads one file: a tar archive, an mbox, a file a Splitter reads, or a message.
// top is true for the path given to Walk, whose tar members are named without prefix.
func (w *walker) walkFile(p, name string, top bool) error {
	base := path.Base(name)
	if why := w.auxiliary(base); why != "" {
		return w.skipNotMessage(name, why)
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) && !top {
		// A live maildir's server renames a message as the walk runs
		// (new/ to cur/, or a flag change): read it under its new name,
		// or skip it if it was expunged.
		if np, nname, inMaildir := maildirSuccessor(p, name); np != "" {
			p, name, base = np, nname, path.Base(nname)
			f, err = os.Open(p)
		} else if inMaildir {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("mailbox: %w", err)
	}
	defer f.Close()

	inner, r, err := decompress(base, bufio.NewReaderSize(f, bufSize))
	if err != nil {
		return fmt.Errorf("mailbox %s: %w", p, err)
	}
	br := bufio.NewReaderSize(r, bufSize)
	head, err := br.Peek(sniffSize)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return fmt.Errorf("mailbox: read %s: %w", p, err)
	}
	ext := strings.ToLower(path.Ext(inner))
	switch {
	case isTarName(inner) || isTarHeader(head):
		prefix := ""
		if !top {
			prefix = name + "/"
		}
		return w.walkTar(br, p, prefix)
	case w.hooks.Split[ext] != nil:
		return w.walkSplit(br, p, name, w.hooks.Split[ext])
	case ext == ".mbox" || ext == ".mbx" ||
		(top && !isMessageExt(ext) && bytes.HasPrefix(head, []byte("From "))):
		return w.walkMbox(br, p, name)
	}
	if !w.want(name) {
		return nil
	}
	if !looksLikeMessage(stripFromLine(head)) {
		return w.skipNotMessage(name, "no header field at the start")
	}
	data, size, err := readMax(br, w.max)
	if err != nil {
		return fmt.Errorf("mailbox: read %s: %w", p, err)
	}
	if data == nil {
		return w.skipTooLarge(name, size)
	}
	return w.message(name, data)
}

// message converts the content of one message file and delivers it.
func (w *walker) message(name string, data []byte) error {
	if w.hooks.Convert != nil {
		data = w.hooks.Convert(name, data)
	}
	data = stripFromLine(data)
	if !looksLikeMessage(data) {
		return w.skipNotMessage(name, "no header field at the start")
	}
	return w.deliver(name, data)
}

// walkSplit delivers the documents of a file a Splitter reads, named name#ID.
func (w *walker) walkSplit(r io.Reader, p, name string, split Splitter) error {
	err := split(r, w.max, func(id string, msg []byte, skip error) error {
		mname := name + "#" + id
		switch {
		case !w.want(mname):
			return nil
		case skip != nil:
			return w.skip(mname, skip)
		case msg == nil:
			return w.skipNotMessage(mname, "empty document")
		}
		return w.deliver(mname, msg)
	})
	if err != nil && !errors.Is(err, errStop) {
		return fmt.Errorf("mailbox: read %s: %w", p, err)
	}
	return err
}

// readMax reads r to the end, or returns nil data and a size above max once it is
// clear the content is larger than max (max < 0: no limit).
func readMax(r io.Reader, max int64) ([]byte, int64, error) {
	if max < 0 {
		b, err := io.ReadAll(r)
		return b, int64(len(b)), err
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, 0, err
	}
	if int64(len(b)) > max {
		return nil, int64(len(b)), nil
	}
	return b, int64(len(b)), nil
}

// decompress picks a decompressor by extension and returns the name without it.
func decompress(name string, r io.Reader) (string, io.Reader, error) {
	lower := strings.ToLower(name)
	stem := name[:len(name)-len(path.Ext(name))]
	switch path.Ext(lower) {
	case ".gz":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return "", nil, fmt.Errorf("gzip: %w", err)
		}
		return stem, zr, nil
	case ".tgz":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return "", nil, fmt.Errorf("gzip: %w", err)
		}
		return stem + ".tar", zr, nil
	case ".bz2":
		return stem, bzip2.NewReader(r), nil
	case ".tbz", ".tbz2":
		return stem + ".tar", bzip2.NewReader(r), nil
	case ".xz", ".txz":
		zr, err := xz.NewReader(r)
		if err != nil {
			return "", nil, fmt.Errorf("xz: %w", err)
		}
		if path.Ext(lower) == ".txz" {
			stem += ".tar"
		}
		return stem, zr, nil
	}
	return name, r, nil
}

func isTarName(name string) bool {
	return strings.EqualFold(path.Ext(name), ".tar")
}

// isTarHeader reports a POSIX/GNU tar magic in the first header block.
func isTarHeader(head []byte) bool {
	return len(head) >= 263 && bytes.Equal(head[257:262], []byte("ustar"))
}

// isMessageExt: a top-level file with these extensions is one message even when it
// starts with a "From " line.
func isMessageExt(ext string) bool {
	switch ext {
	case ".eml", ".msg", ".txt":
		return true
	}
	return false
}

// auxiliary returns why a file is known not to be a message, or "".
func (w *walker) auxiliary(base string) string {
	lower := strings.ToLower(base)
	switch {
	case strings.HasPrefix(base, "."):
		return "hidden file"
	case strings.HasPrefix(lower, "readme"), strings.HasPrefix(lower, "license"),
		strings.HasPrefix(lower, "copying"), path.Ext(lower) == ".md":
		return "documentation"
	}
	switch lower {
	case "maildirfolder", "subscriptions", "dovecot-uidlist", "dovecot-keywords", "dovecot.index",
		"dovecot.index.log", "dovecot.index.cache", "courierimapuiddb", "courierimapkeywords":
		return "maildir metadata"
	}
	if w.hooks.Skip != nil {
		return w.hooks.Skip(base)
	}
	return ""
}

// stripFromLine removes a leading mbox "From " line.
func stripFromLine(b []byte) []byte {
	if !bytes.HasPrefix(b, []byte("From ")) {
		return b
	}
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b[len(b):]
	}
	return b[i+1:]
}

// looksLikeMessage reports whether b starts with a header field. A first line folded
// onto a removed header (whitespace first, as in 22 posts of 20 Newsgroups) is accepted
// when a header field follows it. b may be a prefix of the message.
func looksLikeMessage(b []byte) bool {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return false
		}
		b = b[i+1:]
	}
	i := 0
	for i < len(b) && b[i] > ' ' && b[i] < 0x7f && b[i] != ':' {
		i++
	}
	if i == 0 {
		return false
	}
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	return i < len(b) && b[i] == ':'
}
