package refile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// counts is an Observer that counts.
type counts struct {
	mu       sync.Mutex
	refiled  int
	skipped  map[string]int
	failed   int
	queued   int
	remember int
	reports  int // RefileQueue calls: one at New, then one a saver tick
}

func newCounts() *counts { return &counts{skipped: map[string]int{}} }

func (c *counts) Refiled(time.Duration) { c.mu.Lock(); c.refiled++; c.mu.Unlock() }
func (c *counts) RefileSkipped(r string, n int) {
	c.mu.Lock()
	c.skipped[r] += n
	c.mu.Unlock()
}
func (c *counts) RefileFailed(n int) { c.mu.Lock(); c.failed += n; c.mu.Unlock() }
func (c *counts) RefileQueue(q, r int) {
	c.mu.Lock()
	c.queued, c.remember = q, r
	c.reports++
	c.mu.Unlock()
}

func (c *counts) reported() int { c.mu.Lock(); defer c.mu.Unlock(); return c.reports }

func (c *counts) snapshot() (refiled, failed, queued int, skipped map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := map[string]int{}
	for k, v := range c.skipped {
		s[k] = v
	}
	return c.refiled, c.failed, c.queued, s
}

// inbox is a Mover over an in-memory set of (recipient, Message-ID) in
// INBOX; it fails its first failures calls.
type inbox struct {
	mu       sync.Mutex
	in       map[Copy]bool
	moved    []Copy
	calls    int
	failures int
}

func (m *inbox) Move(_ context.Context, _ string, copies []Copy) []Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	out := make([]Result, len(copies))
	for i, c := range copies {
		switch {
		case m.calls <= m.failures:
			out[i].Err = errors.New("store down")
		case !m.in[c]:
			out[i].Outcome = NotInInbox
		default:
			delete(m.in, c)
			m.moved = append(m.moved, c)
		}
	}
	return out
}

func copiesOf(campaign string, n int) []Copy {
	var out []Copy
	for i := range n {
		out = append(out, Copy{Recipient: fmt.Sprintf("u%d@example.test", i), MessageID: "<" + campaign + fmt.Sprint(i) + "@x>"})
	}
	return out
}

// waitFor polls cond: workers run in their own goroutines.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a bound for a refiler that never gets there
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRememberCrossMove(t *testing.T) {
	all := copiesOf("a", 5)
	mv := &inbox{in: map[Copy]bool{}}
	for _, c := range all[:4] {
		mv.in[c] = true
	}
	// all[4] is not in INBOX: its recipient filed it herself.
	obs := newCounts()
	r, err := New(Options{Mover: mv, Observer: obs, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Remember("a", all[:3], time.Time{})
	r.Remember("a", all[3:], time.Time{})
	r.Remember("b", copiesOf("b", 2), time.Time{}) // another campaign stays
	r.Remember("a", []Copy{{Recipient: "x@example.test"}}, time.Time{})
	if q, rem := r.Pending(); q != 0 || rem != 7 {
		t.Fatalf("pending = %d queued, %d remembered; want 0, 7", q, rem)
	}
	r.Crossed("a", []string{"k1"}, time.Time{})
	r.Crossed("a", []string{"k1"}, time.Time{}) // a second bulk copy: nothing left
	waitFor(t, "the job", func() bool { q, _ := r.Pending(); rf, _, _, _ := obs.snapshot(); return q == 0 && rf == 4 })
	refiled, failed, _, skipped := obs.snapshot()
	if refiled != 4 || failed != 0 || skipped[SkipNotInInbox] != 1 || skipped[SkipNoMessageID] != 1 {
		t.Errorf("got refiled %d failed %d skipped %v; want 4, 0, not_in_inbox 1, no_message_id 1", refiled, failed, skipped)
	}
	if !slices.Equal(mv.moved, all[:4]) {
		t.Errorf("moved %v, want %v", mv.moved, all[:4])
	}
	if _, rem := r.Pending(); rem != 2 {
		t.Errorf("remembered %d after the crossing, want campaign b's 2", rem)
	}
}

func TestBounds(t *testing.T) {
	obs := newCounts()
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	r, err := New(Options{Mover: &inbox{}, Observer: obs, MaxPerCampaign: 3, MaxEntries: 5, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Remember("a", copiesOf("a", 4), now) // one over the campaign's bound
	if _, rem := r.Pending(); rem != 3 {
		t.Fatalf("remembered %d, want 3 (max per campaign)", rem)
	}
	r.Remember("b", copiesOf("b", 3), now.Add(time.Minute)) // pushes a's oldest out
	if _, rem := r.Pending(); rem != 5 {
		t.Fatalf("remembered %d, want 5 (max entries)", rem)
	}
	_, _, _, skipped := obs.snapshot()
	if skipped[SkipLedgerFull] != 2 {
		t.Errorf("ledger_full %d, want 2", skipped[SkipLedgerFull])
	}
	r.mu.Lock()
	na, nb := len(r.byCamp["a"]), len(r.byCamp["b"])
	r.mu.Unlock()
	if na != 2 || nb != 3 {
		t.Errorf("a keeps %d, b %d; want 2, 3 (the oldest went)", na, nb)
	}
	// Past the window a's copies are forgotten.
	r.Remember("c", copiesOf("c", 1), now.Add(time.Hour+30*time.Second))
	if _, rem := r.Pending(); rem != 4 {
		t.Errorf("remembered %d after a's window, want 4", rem)
	}
}

func TestRetriesThenSuccess(t *testing.T) {
	all := copiesOf("a", 3)
	mv := &inbox{in: map[Copy]bool{}, failures: 2}
	for _, c := range all {
		mv.in[c] = true
	}
	obs := newCounts()
	r, err := New(Options{Mover: mv, Observer: obs, Backoff: time.Millisecond, Retries: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Remember("a", all, time.Time{})
	r.Crossed("a", nil, time.Time{})
	waitFor(t, "the job", func() bool { q, _ := r.Pending(); return q == 0 })
	refiled, failed, _, _ := obs.snapshot()
	if refiled != 3 || failed != 0 || mv.calls != 3 || len(mv.moved) != 3 {
		t.Errorf("refiled %d failed %d after %d calls, %d moved; want 3, 0, 3 calls, 3", refiled, failed, mv.calls, len(mv.moved))
	}
}

func TestRetriesGiveUp(t *testing.T) {
	mv := &inbox{in: map[Copy]bool{}, failures: 1 << 30}
	obs := newCounts()
	r, err := New(Options{Mover: mv, Observer: obs, Backoff: time.Millisecond, Retries: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Remember("a", copiesOf("a", 2), time.Time{})
	r.Crossed("a", nil, time.Time{})
	waitFor(t, "giving up", func() bool { q, _ := r.Pending(); return q == 0 })
	refiled, failed, _, _ := obs.snapshot()
	if refiled != 0 || failed != 2 || mv.calls != 3 {
		t.Errorf("refiled %d failed %d after %d calls; want 0, 2 after 3 (1 + 2 retries)", refiled, failed, mv.calls)
	}
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {4, 8 * time.Second}, {5, 10 * time.Second}, {60, 10 * time.Second}} {
		if got := backoff(time.Second, 10*time.Second, tc.n); got != tc.want {
			t.Errorf("backoff(1s, 10s, %d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

type votes map[string]bool

func (v votes) VotedNotBulk(_ context.Context, rcpt string, keys []string) (bool, error) {
	if !slices.Equal(keys, []string{"k1", "k2"}) {
		return false, fmt.Errorf("keys %v", keys)
	}
	return v[rcpt], nil
}

func TestVoteWins(t *testing.T) {
	all := copiesOf("a", 3)
	mv := &inbox{in: map[Copy]bool{}}
	for _, c := range all {
		mv.in[c] = true
	}
	obs := newCounts()
	r, err := New(Options{Mover: mv, Observer: obs, Votes: votes{all[1].Recipient: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Remember("a", all, time.Time{})
	r.Crossed("a", []string{"k1", "k2"}, time.Time{})
	waitFor(t, "the job", func() bool { q, _ := r.Pending(); return q == 0 })
	_, _, _, skipped := obs.snapshot()
	if !slices.Equal(mv.moved, []Copy{all[0], all[2]}) || skipped[SkipVoted] != 1 {
		t.Errorf("moved %v, voted_not_bulk %d; want all but %s, 1", mv.moved, skipped[SkipVoted], all[1].Recipient)
	}
}

// The ledger and the queue survive a restart; a job the mail store could
// not take is done by the next process.
func TestPersistence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "refile.json")
	all := copiesOf("a", 3)
	down := &inbox{in: map[Copy]bool{}, failures: 1 << 30}
	r, err := New(Options{Mover: down, File: file, Backoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r.Remember("a", all, time.Time{})
	r.Remember("b", copiesOf("b", 2), time.Time{})
	r.Crossed("a", []string{"k"}, time.Time{})
	waitFor(t, "the first attempt", func() bool { down.mu.Lock(); defer down.mu.Unlock(); return down.calls == 1 })
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v, %v; want mode 0600", fi, err)
	}

	up := &inbox{in: map[Copy]bool{}}
	for _, c := range all {
		up.in[c] = true
	}
	obs := newCounts()
	r2, err := New(Options{Mover: up, File: file, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	waitFor(t, "the resumed job", func() bool { q, _ := r2.Pending(); return q == 0 })
	if !slices.Equal(up.moved, all) {
		t.Errorf("moved after restart %v, want %v", up.moved, all)
	}
	if _, rem := r2.Pending(); rem != 2 {
		t.Errorf("remembered %d after restart, want campaign b's 2", rem)
	}
}

func TestUnreadableStateSetAside(t *testing.T) {
	file := filepath.Join(t.TempDir(), "refile.json")
	if err := os.WriteFile(file, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	obs := newCounts()
	r, err := New(Options{Mover: &inbox{}, File: file, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := os.Stat(file + ".bad"); err != nil {
		t.Errorf("the unreadable file was not set aside: %v", err)
	}
	if _, _, _, s := obs.snapshot(); s[SkipUnreadable] != 1 {
		t.Errorf("state_unreadable = %d, want 1", s[SkipUnreadable])
	}
}

func TestQueueFull(t *testing.T) {
	obs := newCounts()
	mv := &inbox{in: map[Copy]bool{}, failures: 1 << 30}
	r, err := New(Options{Mover: mv, Observer: obs, MaxQueue: 4, Backoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Remember("a", copiesOf("a", 3), time.Time{})
	r.Remember("b", copiesOf("b", 3), time.Time{})
	r.Crossed("a", nil, time.Time{})
	r.Crossed("b", nil, time.Time{})
	if q, _ := r.Pending(); q != 4 {
		t.Errorf("queued %d, want 4", q)
	}
	if _, _, _, s := obs.snapshot(); s[SkipQueueFull] != 2 {
		t.Errorf("queue_full = %d, want 2", s[SkipQueueFull])
	}
}

// A crash (no Close) keeps the queue, written at every change; the ledger
// written every SaveEvery may lose its latest copies.
func TestCrashKeepsQueue(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "refile.json")
	all := copiesOf("a", 3)
	down := &inbox{in: map[Copy]bool{}, failures: 1 << 30}
	r, err := New(Options{Mover: down, File: file, Backoff: time.Hour, SaveEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Remember("a", all, time.Time{})
	r.Remember("b", copiesOf("b", 2), time.Time{})
	r.Crossed("a", []string{"k"}, time.Time{})
	var data []byte
	waitFor(t, "the queue on disk", func() bool {
		data, err = os.ReadFile(file + ".queue")
		return err == nil && len(data) > 0 && strings.Contains(string(data), strings.Trim(all[2].MessageID, "<>"))
	})
	// The crashed process's files, as the next start finds them.
	dir2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir2, "refile.json.queue"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	up := &inbox{in: map[Copy]bool{}}
	for _, c := range all {
		up.in[c] = true
	}
	r2, err := New(Options{Mover: up, File: filepath.Join(dir2, "refile.json")})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	waitFor(t, "the resumed job", func() bool { q, _ := r2.Pending(); return q == 0 })
	if !slices.Equal(up.moved, all) {
		t.Errorf("moved after the crash %v, want %v", up.moved, all)
	}
	if _, rem := r2.Pending(); rem != 0 {
		t.Errorf("remembered %d after the crash, want 0: the ledger was not due to be written yet", rem)
	}
}

// Replays (the evaluation) run on their messages' times: the saver's
// expiry follows the latest message's time, not the wall clock, so copies
// from years ago stay for their window of message time.
func TestExpiryFollowsMessageTime(t *testing.T) {
	obs := newCounts()
	r, err := New(Options{Mover: &inbox{}, Window: time.Hour, SaveEvery: time.Millisecond, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	past := time.Date(2004, 3, 1, 12, 0, 0, 0, time.UTC)
	r.Remember("a", copiesOf("a", 2), past)
	// Three saver ticks after the copies were remembered, counted: a sleep
	// could see none on a busy machine and pass without testing.
	ticks := obs.reported() + 3
	waitFor(t, "three saver ticks", func() bool { return obs.reported() >= ticks })
	if _, rem := r.Pending(); rem != 2 {
		t.Fatalf("remembered %d after the saver's ticks, want 2: expired by the wall clock", rem)
	}
	r.Remember("b", copiesOf("b", 1), past.Add(2*time.Hour))
	if _, rem := r.Pending(); rem != 1 {
		t.Errorf("remembered %d two message hours later, want 1: a's copies past their window", rem)
	}
}
