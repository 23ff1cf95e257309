package corpus

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
)

// Label is the class of a message when the corpus layout tells it.
type Label int8

const (
	Unknown Label = iota
	Ham
	Spam
)

func (l Label) String() string {
	switch l {
	case Unknown:
		return "unknown"
	case Ham:
		return "ham"
	case Spam:
		return "spam"
	}
	return fmt.Sprintf("Label(%d)", int8(l))
}

// Message is one message of a corpus.
type Message struct {
	// Name identifies the message stably across runs (see the package doc).
	Name string
	// Data is the raw RFC 822 message with its line endings as stored. Walk allocates it
	// per message, so fn may keep it.
	Data []byte
	// Label is Unknown unless the layout says ham or spam.
	Label Label
}

// Reasons given to Options.OnSkip.
var (
	// ErrTooLarge: the message is larger than Options.MaxSize.
	ErrTooLarge = errors.New("message too large")
	// ErrNotMessage: the file or document is not a message (auxiliary file, no header,
	// Reuters document without BODY, mbox folder-data pseudo-message).
	ErrNotMessage = errors.New("not a message")
)

// DefaultMaxSize bounds memory per message when Options.MaxSize is zero.
const DefaultMaxSize = 32 << 20

// Options tune Walk. The zero value reads everything up to DefaultMaxSize per message.
type Options struct {
	// Filter, when set, selects messages by Name (for example a prefix such as
	// "20news-bydate-train/" or "enron1/ham/"). Rejected messages are not reported.
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
}

// Walk calls fn for every message under path with the zero Options.
func Walk(path string, fn func(*Message) error) error {
	return Options{}.Walk(path, fn)
}

// Walk calls fn for every message under path, one at a time, in a deterministic order:
// archive order for tar members, lexical path order in directories, file order in an
// mbox. An error returned by fn stops the walk and is returned unchanged, except
// fs.SkipAll, which stops the walk with a nil error.
func (o Options) Walk(path string, fn func(*Message) error) error {
	w := &walker{opts: o, fn: fn, max: o.MaxSize}
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
	fn      func(*Message) error
	max     int64 // < 0: unlimited
	n       int
	userErr error
	labels  labelScopes
	// seenDirs records the directories of delivered messages so that a label file
	// arriving after the messages it labels is an error rather than silently ignored.
	seenDirs map[string]bool
}

func (w *walker) tooLarge(size int64) bool {
	return w.max >= 0 && size > w.max
}

func (w *walker) want(name string) bool {
	return w.opts.Filter == nil || w.opts.Filter(name)
}

// deliver hands one message to fn. label is the layout label; a label file overrides it.
func (w *walker) deliver(name string, data []byte, label Label) error {
	if l, ok := w.labels.lookup(name); ok {
		label = l
	}
	if w.seenDirs == nil {
		w.seenDirs = make(map[string]bool)
	}
	w.seenDirs[path.Dir(name)] = true
	if err := w.fn(&Message{Name: name, Data: data, Label: label}); err != nil {
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
	return w.skip(name, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, size, w.max))
}

func (w *walker) skipNotMessage(name, why string) error {
	return w.skip(name, fmt.Errorf("%w: %s", ErrNotMessage, why))
}

func (w *walker) walkPath(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("corpus: %w", err)
	}
	if fi.IsDir() {
		return w.walkDir(p)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("corpus %s: not a regular file or directory", p)
	}
	return w.walkFile(p, fi.Name(), true)
}
