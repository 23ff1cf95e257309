package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/lab/bench"
)

// A short run of "bulklab bench" with small counts: every row measured in
// two alternating rounds, each milter in processes of its own, every
// message answered (by bulkmilter with a verdict), exactly one Redis
// round trip per message, the peer learning what it scans, ratios to the
// do-nothing milter and to the peer taken within each round.
func TestBenchSmoke(t *testing.T) {
	corpora := testenv.Corpora(t)
	testenv.Program(t, "redis-server")
	testenv.Program(t, "rspamd")
	// A short public suffix list: the packaged one takes Rspamd ~15 s to
	// compile at start.
	tlds := filepath.Join(t.TempDir(), "tlds.dat")
	if err := os.WriteFile(tlds, []byte("com\norg\nnet\nedu\ntest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Every message must get the store's verdict: a store budget no busy
	// machine reaches (the default 500 ms was missed at load 58; at most 20 s).
	cfg := filepath.Join(t.TempDir(), "bulkmilter.yml")
	if err := os.WriteFile(cfg, []byte("policy:\n  store_timeout: 15s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const n, rounds = 60, 2
	f := benchFlags{
		config:  cfg,
		corpora: corpora, every: 1, limit: 40,
		pipeline: true, minTime: 10 * time.Millisecond,
		e2e: true, sessions: 2, perSession: 1, messages: n, rcpts: 2, rounds: rounds,
		redis: "auto", memMessages: 2000, rate: 300, rspamd: true, rspamdTLDs: tlds,
	}
	rep, err := runBench(context.Background(), f, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Corpus.Messages != 40 {
		t.Errorf("corpus: %d messages, want 40", rep.Corpus.Messages)
	}
	if len(rep.Pipeline) != 6 {
		t.Fatalf("%d in-process rows, want 6", len(rep.Pipeline))
	}
	for _, p := range rep.Pipeline {
		if p.Messages < 40 || p.MsgsPerCoreSec <= 0 || p.CPUNsPerMsg <= 0 || p.KeysPerMsg <= 0 {
			t.Errorf("in process %s: %+v", p.Name, p)
		}
	}
	all := rep.Pipeline[4]
	if all.Name != "all families" || all.KeysPerMsg <= rep.Pipeline[0].KeysPerMsg {
		t.Errorf("all families: %.1f keys/msg, imatch alone %.1f", all.KeysPerMsg, rep.Pipeline[0].KeysPerMsg)
	}

	names := []string{bench.NameBaseline, bench.NameEmbedded, bench.NameRedis, bench.NamePeer}
	if len(rep.EndToEnd) != 2*rounds*len(names) {
		t.Fatalf("%d end-to-end rows, want %d (4 milters, %d rounds, as fast as they answer, then paced)",
			len(rep.EndToEnd), 2*rounds*len(names), rounds)
	}
	milterCPU := map[string]float64{}
	for i, e := range rep.EndToEnd {
		name, paced := names[i%4], i >= rounds*len(names)
		round := 1 + i/4%rounds
		if paced {
			name += " @ 300/s"
			// Never faster than offered (60 messages take at least 59/300 s).
			if e.Rate != 300 || e.MsgsPerSec > 330 {
				t.Errorf("%s: offered %v, got %.0f msgs/s", e.Name, e.Rate, e.MsgsPerSec)
			}
		}
		if e.Name != name || e.Round != round {
			t.Fatalf("row %d: %s round %d, want %s round %d", i, e.Name, e.Round, name, round)
		}
		if e.Answered != n || e.Failed != 0 || e.Sent != n {
			t.Errorf("%s: sent %d answered %d failed %d (%v), want %d answered", e.Name, e.Sent, e.Answered, e.Failed, e.Errors, n)
		}
		if e.MsgsPerSec <= 0 || e.P50 <= 0 || e.P99 < e.P50 || e.P999 < e.P99 {
			t.Errorf("%s: %.0f msgs/s, p50 %.2f p99 %.2f p99.9 %.2f", e.Name, e.MsgsPerSec, e.P50, e.P99, e.P999)
		}
		milterCPU[names[i%4]] += e.MilterCPUPerMsg
		// A message is one connection: the MTA's packets in one read or
		// more, the negotiation and the final reply in a write each (the
		// Go milters; Rspamd's processes may run as a user of their own,
		// whose /proc/PID/io only root reads).
		if i%4 != 3 && (e.MilterReadsPerMsg < 1 || e.MilterWritesPerMsg < 2) {
			t.Errorf("%s: %.1f reads and %.1f writes a message, want at least 1 and 2", e.Name, e.MilterReadsPerMsg, e.MilterWritesPerMsg)
		}
		// The Go milters report their runtime; Rspamd does not.
		if rt := e.MilterRuntime; (rt != nil) != (i%4 != 3) {
			t.Errorf("%s: runtime statistics %+v", e.Name, rt)
		} else if rt != nil && (rt.AllocsPerMsg < 10 || rt.KBPerMsg <= 0) {
			t.Errorf("%s: %.1f allocations, %.1f KB a message, want at least 10 and some", e.Name, rt.AllocsPerMsg, rt.KBPerMsg)
		}
		base := rep.EndToEnd[i-i%4]
		// The Go milters' CPU is their own getrusage, to the
		// microsecond: never 0 however short the row; the CPU ratio
		// compares it within the round.
		if i%4 != 3 && e.MilterCPUPerMsg <= 0 {
			t.Errorf("%s: %.1f µs CPU a message in the milter, want some", e.Name, e.MilterCPUPerMsg)
		}
		if want := base.MilterCPUPerMsg / (e.MilterCPUPerMsg + e.StoreCPUPerMsg); i%4 != 0 && e.CPURatio != want {
			t.Errorf("%s: CPU ratio %v, want %v (same round)", e.Name, e.CPURatio, want)
		}
		if i%4 == 0 {
			if e.Ratio != 0 || len(e.Verdicts) != 0 {
				t.Errorf("baseline: ratio %v verdicts %v", e.Ratio, e.Verdicts)
			}
		} else if want := e.MsgsPerSec / base.MsgsPerSec; e.Ratio != want || e.Ratio <= 0 {
			t.Errorf("%s: ratio %v, want %v (same round)", e.Name, e.Ratio, want)
		}
		if peer := rep.EndToEnd[i-i%4+3]; i%4 != 3 {
			if want := e.MsgsPerSec / peer.MsgsPerSec; e.PeerRatio != want {
				t.Errorf("%s: ratio to the peer %v, want %v (same round)", e.Name, e.PeerRatio, want)
			}
		}
		if i%4 != 1 && i%4 != 2 {
			continue
		}
		// Every message got a verdict from the store, none from the
		// failure policy.
		var v int64
		for _, k := range []string{"yes", "no", "no (unsigned)"} {
			v += e.Verdicts[k]
		}
		if v != n {
			t.Errorf("%s: verdicts %v, want %d without store errors", e.Name, e.Verdicts, n)
		}
		if i%4 == 1 {
			continue
		}
		r := e.Redis
		if r == nil {
			t.Fatalf("no Redis figures on %s", e.Name)
		}
		// One script call per message, exactly; round trips beyond it
		// only for connections the pool opened (on a busy machine a
		// session may find every pooled connection in use), each with
		// its handshake (HELLO, CLIENT SETINFO: at most 3 replies).
		extra := (r.RoundTrips - 1) * float64(e.Stored)
		if e.Stored == 0 || r.Scripts != 1 || r.RoundTrips < 1 || extra > 3*float64(r.Connections)+0.5 {
			t.Errorf("%s: %.3f round trips, %.3f script calls per message, %d connections opened; want 1 script call and 1 round trip per message besides connection handshakes",
				e.Name, r.RoundTrips, r.Scripts, r.Connections)
		}
		if r.Commands <= 1 || r.CPUus <= 0 {
			t.Errorf("%s: %.1f commands and %.1f µs CPU per message", e.Name, r.Commands, r.CPUus)
		}
	}
	// CPU is counted in each milter's own processes (Rspamd's in ticks
	// of 10 ms).
	for _, name := range names {
		if milterCPU[name] <= 0 {
			t.Errorf("%s: no CPU counted in its processes", name)
		}
	}
	if len(rep.Summary) != 8 || rep.Summary[2].Name != bench.NameRedis || rep.Summary[2].Rounds != rounds {
		t.Errorf("summary: %+v", rep.Summary)
	}
	// The peer learned what it scanned: short texts are not hashed, each
	// text part and attachment of the others is, and copies of one
	// message are stored once.
	if rep.PeerLearned < 10 || rep.PeerLearned > 3*40 {
		t.Errorf("the peer stored %d digests of the 40 distinct messages", rep.PeerLearned)
	}

	if len(rep.Memory) != 2 {
		t.Fatalf("%d memory rows, want embedded and Redis", len(rep.Memory))
	}
	for _, m := range rep.Memory {
		if m.Messages != 2000 || m.BytesPerMsg <= 0 || m.Keys != int(all.KeysPerMsg+0.5) {
			t.Errorf("memory %s: %+v (keys/msg in process %.1f)", m.Store, m, all.KeysPerMsg)
		}
	}
	var roundTrips, peerTarget bool
	for _, tg := range rep.Targets {
		roundTrips = roundTrips || (tg.Name == "Redis round trips" && tg.Met)
		peerTarget = peerTarget || tg.Name == bench.NameRedis+": against Rspamd"
		if strings.HasPrefix(tg.Name, bench.NameRedis+": p99") {
			t.Errorf("p99 target taken from the saturated run although a paced run was made")
		}
	}
	if !roundTrips || !peerTarget {
		t.Errorf("round-trip target not met, or no target against the peer: %+v", rep.Targets)
	}
	if err := rep.WriteText(io.Discard); err != nil {
		t.Error(err)
	}
}
