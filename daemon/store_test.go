package daemon

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/store"
	"github.com/prometheus/client_golang/prometheus"
)

// The embedded store is never timed out: a deadline that passed before the
// call (a host too busy to schedule it) still gets the store's verdict and
// records the vote, where it used to be "store unavailable".
func TestEmbeddedStoreIgnoresDeadline(t *testing.T) {
	rt, _ := embeddedRuntime(t)
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	raw := []byte("Subject: the spring planting guide\r\n\r\n" +
		"apple river mountain letter window garden silver motor planet history market winter doctor village camera bridge\r\n")
	var keys []string
	for i := range 3 {
		v := rt.Check(expired, raw, []string{"r" + string(rune('a'+i)) + "@example.test"}, time.Time{})
		if v.Err != nil || v.Unsigned {
			t.Fatalf("copy %d: err %v, unsigned %v", i, v.Err, v.Unsigned)
		}
		if got := v.Volumes[v.Analysis.Keys[0].Family]; got != int64(i+1) {
			t.Errorf("copy %d: volume %d, want %d", i, got, i+1)
		}
		keys = v.IDs
	}
	if err := rt.Store().RecordVote(expired, store.Vote{Keys: keys, Voter: "ra@example.test", Kind: store.VoteNotBulk}); err != nil {
		t.Errorf("vote with an expired deadline: %v", err)
	}
}

// A vote reaches the store file within a second, not at the next periodic
// save: a daemon killed then (SIGKILL) keeps it. The file is read while the
// daemon still runs, as a restarted daemon would find it.
func TestVoteSavedSoon(t *testing.T) {
	rt, c := embeddedRuntime(t)
	raw := []byte("Subject: the spring planting guide\r\n\r\napple river mountain letter window garden silver motor planet history\r\n")
	v := rt.Check(context.Background(), raw, []string{"ann@example.test"}, time.Time{})
	if v.Err != nil || len(v.IDs) == 0 {
		t.Fatalf("check: %v, %d ids", v.Err, len(v.IDs))
	}
	ls := rt.Store().(*lockedStore)
	saved := ls.Stats().LastSave
	if err := rt.Store().RecordVote(context.Background(), store.Vote{Keys: v.IDs, Voter: "ann@example.test", Kind: store.VoteNotBulk}); err != nil {
		t.Fatal(err)
	}
	// The save is due a second after the vote; 60 s is far beyond what a
	// busy machine takes, and the test ends as soon as it happened.
	for deadline := time.Now().Add(60 * time.Second); ls.Stats().LastSave.Equal(saved); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no save within 60 s of a vote")
		}
	}
	// What a restarted daemon finds: a copy of the file, opened apart.
	c2 := c
	c2.DataDir = t.TempDir()
	data, err := os.ReadFile(c.StoreFile())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c2.StoreFile(), data, 0o600); err != nil {
		t.Fatal(err)
	}
	rt2, err := NewRuntime(&c2, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	votes, err := rt2.Store().ListVotes(context.Background(), store.VoteQuery{Voter: "ann@example.test"})
	// Her vote on each key and on the campaign the message was counted in.
	if err != nil || len(votes) != len(v.IDs)+1 || !slices.ContainsFunc(votes, func(e store.VoteEntry) bool { return e.Key == store.CampaignVoteKey(v.Campaign.ID) }) {
		t.Errorf("the saved file holds %d votes of ann (err %v), want %d with her campaign vote", len(votes), err, len(v.IDs)+1)
	}
}

// embeddedRuntime is the daemon with its defaults (embedded store, bundled
// lexicon) in a temporary data directory, closed when the test ends, and
// the configuration it runs with.
func embeddedRuntime(t testing.TB) (*Runtime, config.Config) {
	t.Helper()
	c := config.Default()
	c.DataDir = t.TempDir()
	c.SecretKeyFile = filepath.Join(c.DataDir, "secret.key")
	rt, err := NewRuntime(&c, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt, c
}

// A message dated years ahead (a replay of a forged Date) is counted at the
// store's present: the daemon counts it in bulkmilter_store_ahead_total and
// says so at debug.
func TestStoreAheadMetricAndLog(t *testing.T) {
	c := config.Default()
	c.DataDir = t.TempDir()
	c.SecretKeyFile = filepath.Join(c.DataDir, "secret.key")
	var logs bytes.Buffer
	reg := prometheus.NewPedanticRegistry()
	rt, err := NewRuntime(&c, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), metrics.New(reg), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	raw := []byte("Subject: the spring planting guide\r\n\r\n" +
		"apple river mountain letter window garden silver motor planet history market winter doctor village camera bridge\r\n")
	if v := rt.Check(context.Background(), raw, []string{"a@example.test"}, time.Date(2087, 3, 1, 0, 0, 0, 0, time.UTC)); v.Err != nil || v.Unsigned {
		t.Fatalf("err %v, unsigned %v", v.Err, v.Unsigned)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := -1.0
	for _, f := range fams {
		if f.GetName() == "bulkmilter_store_ahead_total" {
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == "observation" {
					got = m.GetCounter().GetValue()
				}
			}
		}
	}
	if got != 1 {
		t.Errorf(`bulkmilter_store_ahead_total{what="observation"} = %v, want 1`, got)
	}
	if !strings.Contains(logs.String(), "level=DEBUG msg=\"store: dated ahead of its clock\" what=observation n=1 given=2087-03-01T00:00:00Z") {
		t.Errorf("no debug line for the observation dated 2087 in:\n%s", logs.String())
	}
}
