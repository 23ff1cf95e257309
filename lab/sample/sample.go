// Package sample is the sample of real mail the benchmarks run on
// ("bulklab bench" and the Go benchmarks of the pipeline): messages from
// the shared corpora, raw and split as the milter holds them at end of
// message.
//
// It may import lab/corpus and go-message's textproto.
package sample

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/lab/corpus"
)

// Message is one message of the benchmark corpus, raw for the milter
// client and split as the milter session holds it at end of message.
type Message struct {
	Raw    []byte
	Header textproto.Header
	Body   []byte
}

// Corpus is the benchmark's sample of real mail.
type Corpus struct {
	Messages []Message
	Bytes    int64 // raw bytes, all messages
	Sources  []string
}

// SpamAssassin is the default sample: the SpamAssassin public corpus, ham
// (easy and hard) and spam, the archives docs/performance.md measures.
var SpamAssassin = []string{
	"spamassassin-public-corpus/spamassassin_easy_ham.tar.bz2",
	"spamassassin-public-corpus/spamassassin_hard_ham.tar.bz2",
	"spamassassin-public-corpus/spamassassin_spam.tar.bz2",
	"spamassassin-public-corpus/spamassassin_spam_2.tar.bz2",
}

// LoadCorpus reads every every-th message of the archives under dir (at
// most limit messages in all when limit > 0).
func LoadCorpus(dir string, archives []string, every, limit int) (*Corpus, error) {
	if every <= 0 {
		every = 1
	}
	c := &Corpus{}
	perArchive := 0 // messages read from each archive, 0: all
	if limit > 0 {
		perArchive = ((limit + len(archives) - 1) / len(archives)) * every
	}
	for _, a := range archives {
		path := filepath.Join(dir, a)
		i := 0
		opt := corpus.Options{Limit: perArchive, OnSkip: func(string, error) error { return nil }}
		err := opt.Walk(path, func(m *corpus.Message) error {
			i++
			if (i-1)%every != 0 || (limit > 0 && len(c.Messages) >= limit) {
				return nil
			}
			c.add(m.Data)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read corpus %s: %w", path, err)
		}
		c.Sources = append(c.Sources, a)
	}
	if len(c.Messages) == 0 {
		return nil, fmt.Errorf("no messages in %v under %s", archives, dir)
	}
	return c, nil
}

// add splits a message as the milter session has it at end of message:
// the header fields parsed, the body with CRLF line ends as the MTA sends
// it. A message whose header does not parse is all body.
func (c *Corpus) add(raw []byte) {
	m := Message{Raw: raw, Body: raw}
	r := bytes.NewReader(raw)
	br := bufio.NewReader(r)
	if h, err := textproto.ReadHeader(br); err == nil {
		m.Header = h
		m.Body = raw[len(raw)-r.Len()-br.Buffered():]
	}
	if bytes.Contains(m.Body, []byte("\n")) && !bytes.Contains(m.Body, []byte("\r\n")) {
		m.Body = bytes.ReplaceAll(m.Body, []byte("\n"), []byte("\r\n"))
	}
	c.Messages = append(c.Messages, m)
	c.Bytes += int64(len(raw))
}

// CPUTime is the process's user and system CPU time so far: on a shared
// machine a steadier measure than wall time.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
