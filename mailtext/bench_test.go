package mailtext_test

import (
	"bytes"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/lab/corpus"
	"github.com/bulkmilter/bulkmilter/mailtext"
	"github.com/bulkmilter/bulkmilter/signature"
)

// benchSample is the SpamAssassin spam and easy_ham sets, loaded once.
var benchSample struct {
	once  sync.Once
	msgs  [][]byte
	bytes int
	srcs  []signature.Source
	err   error
}

func loadSample(b *testing.B) ([][]byte, int) {
	b.Helper()
	root := corporaDir(b)
	benchSample.once.Do(func() {
		for _, f := range []string{"spamassassin_spam.tar.bz2", "spamassassin_easy_ham.tar.bz2"} {
			err := corpus.Walk(filepath.Join(root, "spamassassin-public-corpus", f), func(m *corpus.Message) error {
				benchSample.msgs = append(benchSample.msgs, m.Data)
				benchSample.bytes += len(m.Data)
				return nil
			})
			if err != nil {
				benchSample.err = err
				return
			}
		}
		for _, m := range benchSample.msgs {
			benchSample.srcs = append(benchSample.srcs, source(mailtext.Extract(bytes.NewReader(m), mailtext.DefaultLimits)))
		}
	})
	if benchSample.err != nil {
		b.Fatal(benchSample.err)
	}
	return benchSample.msgs, benchSample.bytes
}

func source(tx *mailtext.Text) signature.Source {
	src := signature.Source{Subject: tx.Subject, Domains: tx.Domains}
	for _, p := range tx.Parts {
		src.Parts = append(src.Parts, p.Text)
	}
	return src
}

// cpuTime is the process's user+system CPU time: on a shared machine the
// wall-clock ns/op also counts the time other processes held the cores.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runSample runs f over the sample, one message per op, reporting MB/s of
// raw message, allocations, and CPU time per message.
func runSample(b *testing.B, f func(i int)) {
	msgs, total := loadSample(b)
	b.SetBytes(int64(total / len(msgs)))
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime()
	for i := 0; i < b.N; i++ {
		f(i % len(msgs))
	}
	b.StopTimer()
	cpu := cpuTime() - c0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/msg")
	b.ReportMetric(float64(total/len(msgs))*float64(b.N)/cpu.Seconds()/1e6, "cpu-MB/s")
}

// htmlSample is the first 2000 messages of the phishing-pot corpus: recent,
// HTML-heavy, multilingual mail (about 21 KB a message).
var htmlSample struct {
	once  sync.Once
	msgs  [][]byte
	bytes int
	err   error
}

// BenchmarkExtractCanonicalizeHTML: both steps over HTML-heavy mail.
func BenchmarkExtractCanonicalizeHTML(b *testing.B) {
	root := corporaDir(b)
	htmlSample.once.Do(func() {
		htmlSample.err = corpus.Options{Limit: 2000}.Walk(filepath.Join(root, "phishing-pot", "phishing_pot_email_le50KiB.tar.xz"), func(m *corpus.Message) error {
			htmlSample.msgs = append(htmlSample.msgs, m.Data)
			htmlSample.bytes += len(m.Data)
			return nil
		})
	})
	if htmlSample.err != nil {
		b.Fatal(htmlSample.err)
	}
	msgs := htmlSample.msgs
	b.SetBytes(int64(htmlSample.bytes / len(msgs)))
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime()
	for i := 0; i < b.N; i++ {
		signature.Canonicalize(source(mailtext.Extract(bytes.NewReader(msgs[i%len(msgs)]), mailtext.DefaultLimits)))
	}
	b.StopTimer()
	cpu := cpuTime() - c0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/msg")
	b.ReportMetric(float64(htmlSample.bytes/len(msgs))*float64(b.N)/cpu.Seconds()/1e6, "cpu-MB/s")
}

// BenchmarkExtract: raw message → mailtext.Text.
func BenchmarkExtract(b *testing.B) {
	runSample(b, func(i int) {
		mailtext.Extract(bytes.NewReader(benchSample.msgs[i]), mailtext.DefaultLimits)
	})
}

// BenchmarkCanonicalize: extracted text → signature.Doc (SetBytes still
// counts the raw message, so MB/s compare with Extract).
func BenchmarkCanonicalize(b *testing.B) {
	runSample(b, func(i int) {
		signature.Canonicalize(benchSample.srcs[i])
	})
}

// BenchmarkExtractCanonicalize: both steps, as the pipeline runs them.
func BenchmarkExtractCanonicalize(b *testing.B) {
	runSample(b, func(i int) {
		signature.Canonicalize(source(mailtext.Extract(bytes.NewReader(benchSample.msgs[i]), mailtext.DefaultLimits)))
	})
}
