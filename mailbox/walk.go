package mailbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Message is one message of a mailbox.
type Message struct {
	// Name identifies the message stably across runs (see the package doc).
	Name string
	// Data is the raw RFC 822 message with its line endings as stored. Walk allocates it
	// per message, so fn may keep it.
	Data []byte
}

// Reasons given to Options.OnSkip.
var (
	// ErrTooLarge: the message is larger than Options.MaxSize.
	ErrTooLarge = errors.New("message too large")
	// ErrNotMessage: the file or document is not a message (auxiliary file, no header,
	// mbox folder-data pseudo-message, or a document a Splitter refused).
	ErrNotMessage = errors.New("not a message")
)

// TooLarge is the skip reason of a message of size bytes above limit.
func TooLarge(size, limit int64) error {
	return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, size, limit)
}

// DefaultMaxSize bounds memory per message when Options.MaxSize is zero.
const DefaultMaxSize = 32 << 20

// Options tune Walk. The zero value reads everything up to DefaultMaxSize per message.
type Options struct {
	// Filter, when set, selects messages by Name (for example a prefix such as
	// "maildir/cur/"). Rejected messages are not reported.
	Filter func(name string) bool
	// MaxSize is the largest message delivered, in bytes: 0 means DefaultMaxSize, a
	// negative value means no limit.
	MaxSize int64
	// Limit stops the walk after this many delivered messages (0: no limit).
	Limit int
	// OnSkip is called for every file, member or document that is not delivered, with
	// a reason wrapping ErrTooLarge or ErrNotMessage. A non-nil return stops the walk
	// and Walk returns it. When OnSkip is nil, non-messages are skipped silently, and an
	// oversize message stops the walk with an error wrapping ErrTooLarge (never a
	// silent drop).
	OnSkip func(name string, reason error) error
	// Hooks extend the walk to layouts that are not mailboxes; zero for mailboxes.
	Hooks Hooks
}

// Hooks let a reader of research corpora (lab/corpus: label files, Enron-Spam's
// preprocessed files, Reuters SGML) extend the walk instead of keeping a second
// reader. Every field is optional.
type Hooks struct {
	// Skip returns why a file or archive member, by base name, is not a message ("" when
	// it may be one). It is asked after mailbox's own rules (hidden files,
	// documentation, maildir metadata).
	Skip func(base string) string
	// Sidecar is the base name of a file that describes the messages beside it. Walk
	// hands such a file to ReadSidecar, named like a message, before the messages of
	// its directory (on entering a directory; in archive order inside an archive),
	// then treats it as any other file (Skip should name it).
	Sidecar     string
	ReadSidecar func(name string, r io.Reader) error
	// Convert rewrites the content of a message file before a leading mbox "From "
	// line is removed (not mbox messages nor split documents).
	Convert func(name string, data []byte) []byte
	// Split reads files and archive members with these extensions (lower case, with
	// the dot) as several documents each, delivered as NAME#ID.
	Split map[string]Splitter
}

// A Splitter reads a file of several documents and calls emit for each, in order, with
// its id and either the message, or nil and why it is not delivered (wrapping
// ErrTooLarge, see TooLarge, or ErrNotMessage). A document larger than limit (limit
// < 0: no limit) must not be held in memory. An error from emit must be returned
// unchanged.
type Splitter func(r io.Reader, limit int64, emit func(id string, msg []byte, skip error) error) error

// Walk calls fn for every message under path with the zero Options.
func Walk(path string, fn func(*Message) error) error {
	return Options{}.Walk(path, fn)
}

// Walk calls fn for every message under path, one at a time, in a deterministic order:
// archive order for tar members, lexical path order in directories, file order in an
// mbox. An error returned by fn stops the walk and is returned unchanged, except
// fs.SkipAll, which stops the walk with a nil error.
func (o Options) Walk(path string, fn func(*Message) error) error {
	w := &walker{opts: o, hooks: o.Hooks, fn: fn, max: o.MaxSize}
	if w.max == 0 {
		w.max = DefaultMaxSize
	}
	err := w.walkPath(path)
	if w.userErr != nil {
		if errors.Is(w.userErr, fs.SkipAll) {
			return nil
		}
		return w.userErr
	}
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// errStop unwinds the walk after Limit messages or an error from a callback; the
// callback's own error is kept in walker.userErr so it is returned unwrapped.
var errStop = errors.New("stop walk")

type walker struct {
	opts    Options
	hooks   Hooks
	fn      func(*Message) error
	max     int64 // < 0: unlimited
	n       int
	userErr error
}

func (w *walker) tooLarge(size int64) bool {
	return w.max >= 0 && size > w.max
}

func (w *walker) want(name string) bool {
	return w.opts.Filter == nil || w.opts.Filter(name)
}

// deliver hands one message to fn.
func (w *walker) deliver(name string, data []byte) error {
	if err := w.fn(&Message{Name: name, Data: data}); err != nil {
		w.userErr = err
		return errStop
	}
	w.n++
	if w.opts.Limit > 0 && w.n >= w.opts.Limit {
		return errStop
	}
	return nil
}

// skip reports a file, member or document that is not delivered.
func (w *walker) skip(name string, reason error) error {
	if w.opts.OnSkip != nil {
		if err := w.opts.OnSkip(name, reason); err != nil {
			w.userErr = err
			return errStop
		}
		return nil
	}
	if errors.Is(reason, ErrTooLarge) {
		return fmt.Errorf("%s: %w", name, reason)
	}
	return nil
}

func (w *walker) skipTooLarge(name string, size int64) error {
	return w.skip(name, TooLarge(size, w.max))
}

func (w *walker) skipNotMessage(name, why string) error {
	return w.skip(name, fmt.Errorf("%w: %s", ErrNotMessage, why))
}

// sidecar hands a sidecar file to the hook.
func (w *walker) sidecar(name string, r io.Reader) error {
	if err := w.hooks.ReadSidecar(name, r); err != nil {
		return fmt.Errorf("mailbox: %w", err)
	}
	return nil
}

func (w *walker) walkPath(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("mailbox: %w", err)
	}
	if fi.IsDir() {
		return w.walkDir(p)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("mailbox %s: not a regular file or directory", p)
	}
	return w.walkFile(p, fi.Name(), true)
}
