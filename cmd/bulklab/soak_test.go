package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

var soakCountsRE = regexp.MustCompile(`daemon counted (\d+) messages, (\d+) store observes \(\+(\d+) unsigned\) for (\d+) sent`)

// The CI version of "bulklab soak": 200 concurrent MTA sessions carry a
// fixed number of messages to a milterd the command spawns, with the
// embedded store and, in the full run, with Redis. The command fails when a
// message got no verdict, the daemon's counts differ from what was sent, a
// store call failed, or goroutines or memory did not come back after the
// load; the test also checks that exactly the messages asked for were sent.
//
// Nothing here depends on how busy the machine is: the run is a count of
// messages, not a time, and the embedded store is never timed out (it
// answers in process; a deadline there only measured the host). Redis is
// given the largest budget the configuration allows (20 s): the soak looks
// for lost messages and leaks, and a reply delayed by a busy host is
// neither (the fault tests in cmd/milterd check the store budget).
func TestSoakShort(t *testing.T) {
	stores := []string{"embedded"}
	if !testing.Short() {
		stores = append(stores, "redis")
	}
	cfg := filepath.Join(t.TempDir(), "soak.yml")
	if err := os.WriteFile(cfg, []byte("policy:\n  store_timeout: 20s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, st := range stores {
		t.Run(st, func(t *testing.T) {
			// Paced below capacity (about 2,500/s unpaced, 1,100/s with
			// the race detector), so that the daemon, not a queue, is
			// measured; about 10 s on a quiet machine, longer on a busy
			// one, with the same counts.
			messages, rate := 15000, "1500"
			if testenv.RaceEnabled {
				messages, rate = 6000, "600"
			}
			args := []string{"soak", "-sessions", "200", "-settle", "30s", "-every", "5s"}
			if st == "redis" {
				r := testenv.StartRedis(t, testenv.RedisOptions{})
				// 200 sessions unpaced saturate Redis on two shared cores
				// (about 900 msgs/s).
				messages, rate = 4000, "400"
				args = append(args, "-config", cfg, "-redis", "redis://"+r.Addr()+"/0")
			}
			args = append(args, "-messages", strconv.Itoa(messages), "-rate", rate)
			code, stdout, stderr := runBulklab(t, args...)
			t.Logf("bulklab %s\n%s%s", strings.Join(args, " "), stdout, stderr)
			if code != 0 {
				t.Fatalf("soak exited %d", code)
			}
			m := soakCountsRE.FindStringSubmatch(stdout)
			if m == nil {
				t.Fatalf("no counts line in the soak report")
			}
			counted, _ := strconv.Atoi(m[1])
			observed, _ := strconv.Atoi(m[2])
			unsigned, _ := strconv.Atoi(m[3])
			sent, _ := strconv.Atoi(m[4])
			if sent != messages || counted != sent || observed+unsigned != sent {
				t.Errorf("asked %d, sent %d, counted %d, observed %d+%d", messages, sent, counted, observed, unsigned)
			}
			if !strings.Contains(stdout, "soak held") {
				t.Errorf("exit 0 without \"soak held\"")
			}
		})
	}
}

// Usage errors exit 2.
func TestSoakUsage(t *testing.T) {
	for _, args := range [][]string{
		{"soak", "-addr", "inet:127.0.0.1:1"},                                     // without -metrics
		{"soak", "-addr", "127.0.0.1:1", "-metrics", "127.0.0.1:2"},               // not inet:
		{"soak", "-addr", "inet:127.0.0.1:1", "-metrics", "x", "-redis", "r://"},  // spawn flag with -addr
		{"soak", "-addr", "inet:127.0.0.1:1", "-metrics", "x", "-milterd", "bin"}, // spawn flag with -addr
		{"soak", "extra"},
	} {
		if code, _, stderr := runBulklab(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2; stderr %q", args, code, stderr)
		}
	}
}
