package corpus

import (
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/bulkmilter/bulkmilter/mailbox"
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

// Reasons given to Options.OnSkip (mailbox's).
var (
	ErrTooLarge   = mailbox.ErrTooLarge
	ErrNotMessage = mailbox.ErrNotMessage
)

// DefaultMaxSize bounds memory per message when Options.MaxSize is zero.
const DefaultMaxSize = mailbox.DefaultMaxSize

// Options tune Walk, as mailbox.Options do. The zero value reads everything up to
// DefaultMaxSize per message.
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
	// a reason wrapping ErrTooLarge or ErrNotMessage; see mailbox.Options.
	OnSkip func(name string, reason error) error
}

// Walk calls fn for every message under path with the zero Options.
func Walk(path string, fn func(*Message) error) error {
	return Options{}.Walk(path, fn)
}

// Walk calls fn for every message under path, one at a time, in mailbox.Walk's order,
// with its label. An error returned by fn stops the walk and is returned unchanged,
// except fs.SkipAll, which stops the walk with a nil error.
func (o Options) Walk(path string, fn func(*Message) error) error {
	l := &labeller{}
	mo := mailbox.Options{
		Filter:  o.Filter,
		MaxSize: o.MaxSize,
		Limit:   o.Limit,
		OnSkip:  o.OnSkip,
		Hooks: mailbox.Hooks{
			Skip:        auxiliary,
			Sidecar:     labelFileName,
			ReadSidecar: l.loadLabels,
			Convert:     convert,
			Split:       map[string]mailbox.Splitter{".sgm": splitReuters},
		},
	}
	return mo.Walk(path, func(m *mailbox.Message) error {
		return fn(&Message{Name: m.Name, Data: m.Data, Label: l.label(m.Name)})
	})
}

// auxiliary returns why a file of a research corpus is known not to be a message, or
// "" (mailbox knows hidden files, documentation and maildir metadata).
func auxiliary(base string) string {
	lower := strings.ToLower(base)
	switch {
	case lower == "cmds":
		return "SpamAssassin cmds file"
	case lower == "summary.txt":
		return "Enron summary"
	case lower == strings.ToLower(labelFileName):
		return "label file"
	}
	switch path.Ext(lower) {
	case ".dtd", ".tsv":
		return "documentation or data file"
	}
	return ""
}

// convert makes a message of a corpus file: Enron-Spam's preprocessed files lack the
// blank line after their Subject line.
func convert(name string, data []byte) []byte {
	if isEnron(name, data) {
		return enronToRFC822(data)
	}
	return data
}

// splitReuters is the mailbox.Splitter of Reuters-21578 SGML files: each <REUTERS>
// element with a BODY becomes a message (reutersMessage).
func splitReuters(r io.Reader, limit int64, emit func(id string, msg []byte, skip error) error) error {
	return splitSGML(r, limit, func(id string, doc []byte, size int64) error {
		if doc == nil {
			return emit(id, nil, mailbox.TooLarge(size, limit))
		}
		msg, ok := reutersMessage(doc)
		if !ok {
			return emit(id, nil, fmt.Errorf("%w: Reuters document without BODY", ErrNotMessage))
		}
		return emit(id, msg, nil)
	})
}
