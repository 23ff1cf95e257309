package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/lab/sample"
)

// The peer answers every message over the milter protocol, learns what
// it can hash, and its CPU is counted per process.
func TestRspamdPeer(t *testing.T) {
	testenv.Program(t, "rspamd")
	testenv.Program(t, "redis-server")
	corp, err := sample.LoadCorpus(testenv.Corpora(t), sample.SpamAssassin, 1, 30)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tlds := filepath.Join(t.TempDir(), "tlds.dat")
	if err := os.WriteFile(tlds, []byte("com\norg\nnet\nedu\ntest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := StartRspamd(ctx, RspamdOptions{TLDs: tlds})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	if n := len(r.Pids()); n < 2 {
		t.Errorf("rspamd runs %d processes, want its main process and workers", n)
	}
	cpu0 := ProcessCPU(r.Pids()...)
	res, err := EndToEnd(ctx, EndToEndOptions{Name: "rspamd", Addr: r.Addr, Sessions: 2, PerSession: 1, Messages: 30, Corpus: corp})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.0f msgs/s, p99 %.1f ms", res.MsgsPerSec, res.P99)
	if res.Answered != 30 || res.Failed != 0 {
		t.Fatalf("answered %d failed %d (%v), want 30 answered", res.Answered, res.Failed, res.Errors)
	}
	if cpu := ProcessCPU(r.Pids()...) - cpu0; cpu <= 0 {
		t.Errorf("rspamd used %v CPU for 30 messages", cpu)
	}
	learned, err := r.WaitLearned(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d digests learned", learned)
	// Short texts are not hashed; the rest are, once each (the warm-up
	// messages add a few).
	if learned < 10 || learned > 60 {
		t.Errorf("%d digests learned from 30 messages and the warm-up", learned)
	}
}
