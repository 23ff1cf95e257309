package mailtext_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/lab/corpus"
	"github.com/bulkmilter/bulkmilter/mailtext"
	"github.com/bulkmilter/bulkmilter/signature"
)

func corporaDir(tb testing.TB) string { return testenv.Corpora(tb) }

// msgTimeout bounds the time one message may take before the sweep calls
// it a hang. It is far above the real cost (well under a millisecond) so
// that a loaded machine does not trip it.
const msgTimeout = 30 * time.Second

// labelStats accumulate per label.
type labelStats struct {
	msgs, withHidden, alternatives, altMismatch, noTokens int
	hidden, visible                                       int
}

// TestCorpusSweep runs every message of every shared corpus through Extract
// and Canonicalize: no panic, no hang, valid output; the defects found are
// counted by kind in the test output.
func TestCorpusSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: reads every shared corpus")
	}
	root := corporaDir(t)
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		t.Run(e.Name(), func(t *testing.T) {
			kinds := map[mailtext.DefectKind]int{}
			byLabel := map[corpus.Label]*labelStats{}
			n, bytesIn := 0, 0
			var slowest time.Duration
			slowestName := ""
			err := corpus.Options{
				MaxSize: -1,
				OnSkip:  func(string, error) error { return nil },
			}.Walk(filepath.Join(root, e.Name()), func(m *corpus.Message) error {
				n++
				bytesIn += len(m.Data)
				type result struct {
					tx  *mailtext.Text
					doc *signature.Doc
					err any
				}
				done := make(chan result, 1)
				start := time.Now()
				go func() {
					var r result
					defer func() {
						r.err = recover()
						done <- r
					}()
					r.tx = mailtext.Extract(bytes.NewReader(m.Data), mailtext.DefaultLimits)
					src := signature.Source{Subject: r.tx.Subject, Domains: r.tx.Domains}
					for _, p := range r.tx.Parts {
						src.Parts = append(src.Parts, p.Text)
					}
					r.doc = signature.Canonicalize(src)
				}()
				var r result
				select {
				case r = <-done:
				case <-time.After(msgTimeout):
					return fmt.Errorf("%s: no result after %v (hang)", m.Name, msgTimeout)
				}
				if d := time.Since(start); d > slowest {
					slowest, slowestName = d, m.Name
				}
				if r.err != nil {
					return fmt.Errorf("%s: panic: %v", m.Name, r.err)
				}
				for _, d := range r.tx.Defects {
					kinds[d.Kind]++
				}
				ls := byLabel[m.Label]
				if ls == nil {
					ls = &labelStats{}
					byLabel[m.Label] = ls
				}
				ls.msgs++
				ls.hidden += r.tx.Stats.HiddenChars
				ls.visible += r.tx.Stats.VisibleChars
				if r.tx.Stats.HiddenChars > 0 {
					ls.withHidden++
				}
				ls.alternatives += r.tx.Stats.Alternatives
				ls.altMismatch += r.tx.Stats.AltMismatch
				if len(r.doc.Tokens) == 0 {
					ls.noTokens++
				}
				if r.tx.Stats.TextBytes > mailtext.DefaultLimits.MaxTextBytes {
					return fmt.Errorf("%s: %d bytes of text kept", m.Name, r.tx.Stats.TextBytes)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				t.Fatalf("no messages read under %s", e.Name())
			}
			total += n
			var ks []string
			for k, c := range kinds {
				ks = append(ks, fmt.Sprintf("%s=%d", k, c))
			}
			sort.Strings(ks)
			t.Logf("%d messages, %.1f MB; slowest %v (%s)", n, float64(bytesIn)/1e6, slowest.Round(time.Millisecond), slowestName)
			t.Logf("defects: %s", strings.Join(ks, " "))
			for _, l := range []corpus.Label{corpus.Ham, corpus.Spam, corpus.Unknown} {
				s := byLabel[l]
				if s == nil {
					continue
				}
				t.Logf("%s: %d messages, %d with hidden HTML text (%d hidden / %d visible chars), alternatives %d (mismatch %d), no tokens %d",
					l, s.msgs, s.withHidden, s.hidden, s.visible, s.alternatives, s.altMismatch, s.noTokens)
			}
		})
	}
	t.Logf("%d messages in all", total)
}
