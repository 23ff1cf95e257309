package corpus_test

import (
	"path/filepath"
	"testing"

	"github.com/bulkmilter/bulkmilter/lab/corpus"
)

// benchmarkWalk reports messages/s and MB/s (of delivered message bytes) for one corpus
// file, decompression included.
func benchmarkWalk(b *testing.B, rel string) {
	p := filepath.Join(corporaDir(b), rel)
	var msgs, bytes int64
	for b.Loop() {
		if err := corpus.Walk(p, func(m *corpus.Message) error {
			msgs++
			bytes += int64(len(m.Data))
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(msgs)/s, "msgs/s")
	b.ReportMetric(float64(bytes)/1e6/s, "MB/s")
	b.ReportMetric(float64(msgs)/float64(b.N), "msgs/op")
}

func BenchmarkWalkSpamAssassinSpam(b *testing.B) {
	benchmarkWalk(b, "spamassassin-public-corpus/spamassassin_spam.tar.bz2")
}

func BenchmarkWalkCypherpunks2007(b *testing.B) {
	benchmarkWalk(b, "cypherpunks-list-archive/cypherpunks_maildir_2007-2008.tar.xz")
}

func BenchmarkWalkNazarioMbox(b *testing.B) {
	benchmarkWalk(b, "nazario-phishing/phishing0.mbox.xz")
}

func BenchmarkWalkReuters(b *testing.B) {
	benchmarkWalk(b, "reuters21578/reuters21578.tar.gz")
}
