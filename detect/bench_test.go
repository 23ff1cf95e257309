package detect

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/sample"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/store"
)

// The pipeline in process on real mail, as "milterd bench" measures it:
//
//	go test ./detect -run '^$' -bench . -benchtime 3000x -count 5
//
// ns/op is per message; cpu-ns/msg is the process's CPU time per message
// (steadier on a shared machine).

var benchCorpus struct {
	once sync.Once
	c    *sample.Corpus
	err  error
}

func loadBenchCorpus(b *testing.B) *sample.Corpus {
	b.Helper()
	dir := testenv.Corpora(b)
	benchCorpus.once.Do(func() {
		// One in four of the SpamAssassin ham and spam, as milterd sample.
		benchCorpus.c, benchCorpus.err = sample.LoadCorpus(dir, sample.SpamAssassin, 4, 0)
	})
	if benchCorpus.err != nil {
		b.Fatal(benchCorpus.err)
	}
	return benchCorpus.c
}

func benchMessage(m *sample.Message, i int) *Message {
	return &Message{Header: m.Header, Body: bytes.NewReader(m.Body),
		Recipients: []string{fmt.Sprintf("user%d@example.test", i%200000)}}
}

func reportCPU(b *testing.B, c *sample.Corpus, cpu0 time.Duration) {
	cpu := sample.CPUTime() - cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/msg")
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "msgs/cpu-s")
	b.ReportMetric(float64(c.Bytes)/float64(len(c.Messages)), "bytes/msg")
}

// BenchmarkAnalyze: extraction, canonicalisation and every default family.
func BenchmarkAnalyze(b *testing.B) {
	c := loadBenchCorpus(b)
	f := newFixture(&testing.T{})
	b.ReportAllocs()
	cpu0 := sample.CPUTime()
	for i := 0; b.Loop(); i++ {
		f.e.Analyze(benchMessage(&c.Messages[i%len(c.Messages)], i))
	}
	reportCPU(b, c, cpu0)
}

// BenchmarkCheck: the whole pipeline with the embedded store, as the
// daemon runs it at end of message.
func BenchmarkCheck(b *testing.B) {
	c := loadBenchCorpus(b)
	st, err := store.OpenEmbedded(store.EmbeddedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	f := newFixtureWith(&testing.T{}, st)
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := sample.CPUTime()
	for i := 0; b.Loop(); i++ {
		if v := f.e.Check(ctx, benchMessage(&c.Messages[i%len(c.Messages)], i)); v.Err != nil {
			b.Fatal(v.Err)
		}
	}
	reportCPU(b, c, cpu0)
}

// BenchmarkDecide: what Check adds to Analyze (store ids, the embedded
// store, the policy), on analyses prepared beforehand.
func BenchmarkDecide(b *testing.B) {
	c := loadBenchCorpus(b)
	st, err := store.OpenEmbedded(store.EmbeddedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	f := newFixtureWith(&testing.T{}, st)
	as := make([]*Analysis, 0, len(c.Messages))
	for i := range c.Messages {
		if a := f.e.Analyze(benchMessage(&c.Messages[i], i)); len(a.Keys) > 0 {
			as = append(as, a)
		}
	}
	ctx := context.Background()
	rcpts := []string{"someone@example.test"}
	b.ReportAllocs()
	cpu0 := sample.CPUTime()
	for i := 0; b.Loop(); i++ {
		rcpts[0] = fmt.Sprintf("user%d@example.test", i%200000)
		if v := f.e.decide(ctx, as[i%len(as)], rcpts, time.Time{}); v.Err != nil {
			b.Fatal(v.Err)
		}
	}
	reportCPU(b, c, cpu0)
}
