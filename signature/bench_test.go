package signature

import (
	"math"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the process's user+system CPU time. On a shared machine
// it is a steadier measure than wall time (other processes' load does not
// count), reported as cpu-ns/msg next to ns/op.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Benchmarks run on SpamAssassin messages (easy ham and spam, one in four
// of each archive) turned into Docs by the stand-in tokenizer, with the
// lexicon built from the 20 Newsgroups training split:
//
//	go test ./signature -run XXX -bench . -benchmem
//
// ns/op is per message.

var (
	benchOnce sync.Once
	benchDocs []*Doc
)

func benchCorpus(b *testing.B) []*Doc {
	b.Helper()
	benchOnce.Do(func() {
		for _, a := range []string{"spamassassin_easy_ham.tar.bz2", "spamassassin_spam.tar.bz2", "spamassassin_spam_2.tar.bz2"} {
			for i, m := range spamAssassin(b, a, 1<<30) {
				if i%4 == 0 {
					benchDocs = append(benchDocs, textDoc(m.Text))
				}
			}
		}
	})
	return benchDocs
}

func reportCorpus(b *testing.B, docs []*Doc) {
	toks, letters := 0, 0
	for _, d := range docs {
		toks += len(d.Tokens)
		letters += len(d.Letters)
	}
	b.ReportMetric(float64(toks)/float64(len(docs)), "tokens/msg")
	b.ReportMetric(float64(letters)/float64(len(docs)), "letters/msg")
}

func benchSigner(b *testing.B, s Signer) {
	docs := benchCorpus(b)
	var dst []Key
	b.ReportAllocs()
	start := cpuTime()
	for i := 0; b.Loop(); i++ {
		dst, _ = s.Sign(docs[i%len(docs)], dst[:0])
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/msg")
	reportCorpus(b, docs)
}

func BenchmarkIMatch(b *testing.B) {
	m, err := NewIMatch(testSecret(b), testLexicon(b), DefaultIMatchParams())
	if err != nil {
		b.Fatal(err)
	}
	benchSigner(b, m)
}

func BenchmarkIMatchPlainK0(b *testing.B) {
	p := DefaultIMatchParams()
	p.Randomized, p.Hardening = 0, HardeningOff
	m, err := NewIMatch(testSecret(b), testLexicon(b), p)
	if err != nil {
		b.Fatal(err)
	}
	benchSigner(b, m)
}

func BenchmarkShingle(b *testing.B) {
	s, err := NewShingle(testSecret(b), testLexicon(b), DefaultShingleParams())
	if err != nil {
		b.Fatal(err)
	}
	benchSigner(b, s)
}

func BenchmarkCharShingle(b *testing.B) {
	s, err := NewCharShingle(testSecret(b), DefaultCharShingleParams())
	if err != nil {
		b.Fatal(err)
	}
	benchSigner(b, s)
}

func BenchmarkSift(b *testing.B) {
	s, err := NewSift(testSecret(b), DefaultSiftParams())
	if err != nil {
		b.Fatal(err)
	}
	benchSigner(b, s)
}

// BenchmarkSet is all four families with their defaults, tokens hashed
// once: the per-message cost of signing in the daemon.
func BenchmarkSet(b *testing.B) {
	p := DefaultSetParams()
	p.Secret, p.Lexicon = testSecret(b), testLexicon(b)
	s, err := NewSet(p)
	if err != nil {
		b.Fatal(err)
	}
	docs := benchCorpus(b)
	var keys []Key
	var exps []Explain
	b.ReportAllocs()
	start := cpuTime()
	for i := 0; b.Loop(); i++ {
		keys, exps = s.Sign(docs[i%len(docs)], keys[:0], exps[:0])
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/msg")
	reportCorpus(b, docs)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkSetLong signs long documents (the corpus's messages of 1,000
// tokens or more, the tail of a milter's latency) with sifting on a
// goroutine of its own ("parallel", what Sign does) and in line: ns/op is
// the wait, cpu-ns/msg the work.
func BenchmarkSetLong(b *testing.B) {
	p := DefaultSetParams()
	p.Secret, p.Lexicon = testSecret(b), testLexicon(b)
	s, err := NewSet(p)
	if err != nil {
		b.Fatal(err)
	}
	var docs []*Doc
	for _, d := range benchCorpus(b) {
		if len(d.Tokens) >= parallelTokens {
			docs = append(docs, d)
		}
	}
	if len(docs) == 0 {
		b.Fatal("no long document in the corpus")
	}
	defer func(n int) { parallelTokens = n }(parallelTokens)
	for _, mode := range []struct {
		name string
		from int
	}{{"parallel", parallelTokens}, {"inline", math.MaxInt}} {
		b.Run(mode.name, func(b *testing.B) {
			parallelTokens = mode.from
			var keys []Key
			var exps []Explain
			start := cpuTime()
			for i := 0; b.Loop(); i++ {
				keys, exps = s.Sign(docs[i%len(docs)], keys[:0], exps[:0])
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/msg")
			reportCorpus(b, docs)
		})
	}
}

// BenchmarkLoadLexicon decodes and validates the 20NG-train lexicon
// (the start-up cost before keyed tables).
func BenchmarkLoadLexicon(b *testing.B) {
	raw, _ := testLexicon(b).MarshalBinary()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadLexicon(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewSet builds the keyed tables of all families (the rest of
// the start-up cost) and reports the heap they take.
func BenchmarkNewSet(b *testing.B) {
	lex := testLexicon(b)
	p := DefaultSetParams()
	p.Secret, p.Lexicon = testSecret(b), lex
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewSet(p); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	raw, _ := lex.MarshalBinary()
	l2, _ := LoadLexicon(raw)
	p.Lexicon = l2
	keep, _ := NewSet(p)
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-heap(lexicon+set)")
	runtime.KeepAlive(keep)
	runtime.KeepAlive(raw)
}

// BenchmarkLexiconBuilderAdd is the per-document cost of collecting
// statistics.
func BenchmarkLexiconBuilderAdd(b *testing.B) {
	docs := benchCorpus(b)
	lb := NewLexiconBuilder(BuilderOptions{})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		lb.Add(docs[i%len(docs)])
	}
}
