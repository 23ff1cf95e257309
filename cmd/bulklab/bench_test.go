package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// A short run of "bulklab bench" with small counts: every row measured,
// every message answered with a verdict, exactly one Redis round trip per
// message, ratios to the do-nothing milter computed.
func TestBenchSmoke(t *testing.T) {
	corpora := testenv.Corpora(t)
	testenv.Program(t, "redis-server")
	f := benchFlags{
		corpora: corpora, every: 1, limit: 40,
		pipeline: true, minTime: 10 * time.Millisecond,
		e2e: true, sessions: 2, perSession: 5, messages: 60, rcpts: 2,
		redis: "auto", memMessages: 2000, rate: 300,
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

	if len(rep.EndToEnd) != 6 {
		t.Fatalf("%d end-to-end rows, want 6 (baseline, embedded, Redis; as fast as they answer, then paced)", len(rep.EndToEnd))
	}
	for i, e := range rep.EndToEnd {
		if i >= 3 {
			// Paced: never faster than offered (60 messages take at least
			// 59/300 s).
			if e.Rate != 300 || e.MsgsPerSec > 330 {
				t.Errorf("%s: offered %v, got %.0f msgs/s", e.Name, e.Rate, e.MsgsPerSec)
			}
			i -= 3
		}
		if e.Answered != 60 || e.Failed != 0 || e.Sent != 60 {
			t.Errorf("%s: sent %d answered %d failed %d (%v), want 60 answered", e.Name, e.Sent, e.Answered, e.Failed, e.Errors)
		}
		if e.MsgsPerSec <= 0 || e.P50 <= 0 || e.P99 < e.P50 || e.P999 < e.P99 {
			t.Errorf("%s: %.0f msgs/s, p50 %.2f p99 %.2f p99.9 %.2f", e.Name, e.MsgsPerSec, e.P50, e.P99, e.P999)
		}
		if i == 0 {
			if e.Ratio != 0 || len(e.Verdicts) != 0 {
				t.Errorf("baseline: ratio %v verdicts %v", e.Ratio, e.Verdicts)
			}
			continue
		}
		base := rep.EndToEnd[0]
		if e.Rate > 0 {
			base = rep.EndToEnd[3]
		}
		if want := e.MsgsPerSec / base.MsgsPerSec; e.Ratio != want || e.Ratio <= 0 {
			t.Errorf("%s: ratio %v, want %v", e.Name, e.Ratio, want)
		}
		// Every message got a verdict from the store, none from the
		// failure policy.
		var n int64
		for _, k := range []string{"yes", "no", "no (unsigned)"} {
			n += e.Verdicts[k]
		}
		if n != 60 {
			t.Errorf("%s: verdicts %v, want 60 without store errors", e.Name, e.Verdicts)
		}
	}
	for _, i := range []int{2, 5} {
		r := rep.EndToEnd[i].Redis
		if r == nil {
			t.Fatalf("no Redis figures on %s", rep.EndToEnd[i].Name)
		}
		if r.RoundTrips != 1 || r.Scripts != 1 || r.Connections != 0 {
			t.Errorf("%s: %.3f round trips, %.3f script calls per message, %d connections opened; want 1, 1, 0",
				rep.EndToEnd[i].Name, r.RoundTrips, r.Scripts, r.Connections)
		}
		if r.Commands <= 1 || r.CPUus <= 0 {
			t.Errorf("%s: %.1f commands and %.1f µs CPU per message", rep.EndToEnd[i].Name, r.Commands, r.CPUus)
		}
	}

	if len(rep.Memory) != 2 {
		t.Fatalf("%d memory rows, want embedded and Redis", len(rep.Memory))
	}
	for _, m := range rep.Memory {
		if m.Messages != 2000 || m.BytesPerMsg <= 0 || m.Keys != int(all.KeysPerMsg+0.5) {
			t.Errorf("memory %s: %+v (keys/msg in process %.1f)", m.Store, m, all.KeysPerMsg)
		}
	}
	var redisTarget bool
	for _, tg := range rep.Targets {
		if tg.Name == "bulkmilter, Redis: Redis round trips" {
			redisTarget = tg.Met
		}
		if tg.Name == "bulkmilter, Redis: p99 latency" {
			t.Errorf("p99 target taken from the saturated run although a paced run was made")
		}
	}
	if !redisTarget {
		t.Errorf("round-trip target not met in the report: %+v", rep.Targets)
	}
	if err := rep.WriteText(io.Discard); err != nil {
		t.Error(err)
	}
}
