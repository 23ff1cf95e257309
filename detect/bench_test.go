package detect_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/bundled"
	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/lab/sample"
	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// benchEngine is the daemon's pipeline with the bundled lexicon and the
// default families over st (a fresh in-memory embedded store when nil).
func benchEngine(b testing.TB, st detect.Store) *detect.Engine {
	b.Helper()
	return benchEngineLimits(b, st, detect.Limits{})
}

// benchEngineLimits is benchEngine within limits (zero fields: the defaults).
func benchEngineLimits(b testing.TB, st detect.Store, limits detect.Limits) *detect.Engine {
	b.Helper()
	if st == nil {
		e, err := store.OpenEmbedded(store.EmbeddedOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		st = e
	}
	lex, err := bundled.Lexicon()
	if err != nil {
		b.Fatal(err)
	}
	p := signature.DefaultSetParams()
	p.Lexicon = lex
	if p.Secret, err = signature.NewSecret([]byte("detect test secret, not for production")); err != nil {
		b.Fatal(err)
	}
	set, err := signature.NewSet(p)
	if err != nil {
		b.Fatal(err)
	}
	th := map[signature.Family]int{}
	for _, s := range set.Signers() {
		th[s.Family()] = 10
	}
	e, err := detect.New(detect.Options{Set: set, Store: st, Thresholds: th, StripRecipient: true, GlobalVoters: 3, Limits: limits})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

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

func loadBenchCorpus(b testing.TB) *sample.Corpus {
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

func benchMessage(m *sample.Message, i int) *detect.Message {
	return &detect.Message{Header: m.Header, Body: bytes.NewReader(m.Body),
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
	e := benchEngine(b, nil)
	b.ReportAllocs()
	cpu0 := sample.CPUTime()
	for i := 0; b.Loop(); i++ {
		e.Analyze(benchMessage(&c.Messages[i%len(c.Messages)], i))
	}
	reportCPU(b, c, cpu0)
}

// benchEmbedded is the bench corpus and the pipeline over a fresh
// embedded store, closed when b ends: BenchmarkCheck's and
// BenchmarkCheckGoroutine's setup.
func benchEmbedded(b *testing.B) (*sample.Corpus, *detect.Engine) {
	b.Helper()
	c := loadBenchCorpus(b)
	st, err := store.OpenEmbedded(store.EmbeddedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return c, benchEngine(b, st)
}

// BenchmarkCheck: the whole pipeline with the embedded store, as the
// daemon runs it at end of message.
func BenchmarkCheck(b *testing.B) {
	c, e := benchEmbedded(b)
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := sample.CPUTime()
	for i := 0; b.Loop(); i++ {
		if v := e.Check(ctx, benchMessage(&c.Messages[i%len(c.Messages)], i)); v.Err != nil {
			b.Fatal(v.Err)
		}
	}
	reportCPU(b, c, cpu0)
}

// BenchmarkCheckGoroutine is BenchmarkCheck with each message on a
// goroutine of its own, as the milter runs it (go-milter starts one a
// connection, and an MTA opens a connection a message or a few): what it
// adds to BenchmarkCheck is the goroutine's start and its stack's growth.
func BenchmarkCheckGoroutine(b *testing.B) {
	c, e := benchEmbedded(b)
	ctx := context.Background()
	done := make(chan error)
	b.ReportAllocs()
	cpu0 := sample.CPUTime()
	for i := 0; b.Loop(); i++ {
		go func() {
			done <- e.Check(ctx, benchMessage(&c.Messages[i%len(c.Messages)], i)).Err
		}()
		if err := <-done; err != nil {
			b.Fatal(err)
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
	e := benchEngine(b, st)
	as := make([]*detect.Analysis, 0, len(c.Messages))
	for i := range c.Messages {
		if a := e.Analyze(benchMessage(&c.Messages[i], i)); len(a.Keys) > 0 {
			as = append(as, a)
		}
	}
	ctx := context.Background()
	rcpts := []string{"someone@example.test"}
	b.ReportAllocs()
	cpu0 := sample.CPUTime()
	for i := 0; b.Loop(); i++ {
		rcpts[0] = fmt.Sprintf("user%d@example.test", i%200000)
		if v := detect.Decide(e, ctx, as[i%len(as)], rcpts, time.Time{}); v.Err != nil {
			b.Fatal(v.Err)
		}
	}
	reportCPU(b, c, cpu0)
}

// BenchmarkAnalyzeHuge: the worst messages the daemon accepts for
// analysis, at its default limits (the session keeps 4 MiB of body; 1 MiB
// of decoded text is analysed): plain text, HTML that is mostly markup,
// and base64 text. The time per message is the bound on a message's work.
func BenchmarkAnalyzeHuge(b *testing.B) {
	const bodyLimit = 4 << 20
	words := strings.Fields("the quick brown fox jumps over the lazy dog while our weekly offers " +
		"include garden tools kitchen knives and discounted travel insurance for families")
	plain := func() []byte {
		var buf bytes.Buffer
		for i := 0; buf.Len() < bodyLimit; i++ {
			buf.WriteString(words[i%len(words)])
			if i%12 == 11 {
				buf.WriteString("\r\n")
			} else {
				buf.WriteByte(' ')
			}
		}
		return buf.Bytes()[:bodyLimit]
	}
	html := func() []byte {
		var buf bytes.Buffer
		buf.WriteString("<html><body>")
		for i := 0; buf.Len() < bodyLimit; i++ {
			fmt.Fprintf(&buf, "<div class=\"c%d\" style=\"color:#%06x;font-size:%dpx\"><span>%s</span></div>\r\n",
				i%50, i*2654435761%(1<<24), 10+i%8, words[i%len(words)])
		}
		return buf.Bytes()[:bodyLimit]
	}
	b64 := func() []byte {
		raw := plain()[:bodyLimit*3/4-100]
		enc := base64.StdEncoding.EncodeToString(raw)
		var buf bytes.Buffer
		for len(enc) > 76 {
			buf.WriteString(enc[:76])
			buf.WriteString("\r\n")
			enc = enc[76:]
		}
		buf.WriteString(enc)
		return buf.Bytes()[:min(buf.Len(), bodyLimit)]
	}
	// images: 4 MiB of distinct base64 parts just under the largest
	// digested (mailtext.DefaultLimits.MaxAttachBytes), no text: every
	// part is decoded and digested, and the attach family signs.
	images := func() []byte {
		var buf bytes.Buffer
		raw := plain()[:512<<10-100]
		for i := 0; buf.Len() < bodyLimit; i++ {
			raw[0] = byte(i)
			fmt.Fprintf(&buf, "--b\r\nContent-Type: image/png\r\nContent-Transfer-Encoding: base64\r\n\r\n")
			enc := base64.StdEncoding.EncodeToString(raw)
			for len(enc) > 76 {
				buf.WriteString(enc[:76])
				buf.WriteString("\r\n")
				enc = enc[76:]
			}
			buf.WriteString(enc + "\r\n")
		}
		return buf.Bytes()[:bodyLimit]
	}
	cases := []struct {
		name, ctype, cte string
		body             []byte
	}{
		{"plain-4MiB", "text/plain; charset=utf-8", "", plain()},
		{"html-4MiB", "text/html; charset=utf-8", "", html()},
		{"base64-4MiB", "text/plain; charset=utf-8", "base64", b64()},
		{"images-4MiB", `multipart/mixed; boundary="b"`, "", images()},
	}
	e := benchEngine(b, nil)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var h textproto.Header
			h.Set("Subject", "A very long message")
			h.Set("Content-Type", c.ctype)
			if c.cte != "" {
				h.Set("Content-Transfer-Encoding", c.cte)
			}
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			cpu0 := sample.CPUTime()
			for b.Loop() {
				a := e.Analyze(&detect.Message{Header: h, Body: bytes.NewReader(c.body), Recipients: []string{"a@example.test"}, Truncated: true})
				if len(a.Keys) == 0 {
					b.Fatal("not signed")
				}
			}
			b.ReportMetric(float64((sample.CPUTime()-cpu0).Microseconds())/1e3/float64(b.N), "cpu-ms/msg")
		})
	}
}
