package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/refile"
	"github.com/bulkmilter/bulkmilter/store"
)

func TestMessageID(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"<a@b>", "<a@b>"},
		{"  <a@b> (comment)", "<a@b>"},
		{"\n <long.id@example.com>", "<long.id@example.com>"},
		{"no-brackets@x", "no-brackets@x"},
		{"<unclosed@x", "<unclosed@x"},
		{"", ""},
	} {
		if got := messageID(tc.in); got != tc.want {
			t.Errorf("messageID(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMailboxUser(t *testing.T) {
	for in, want := range map[string]string{
		"ann@example.test":      "ann@example.test",
		"ann+news@example.test": "ann@example.test",
		"ann+a+b@example.test":  "ann@example.test",
		"+only@example.test":    "+only@example.test",
		"postmaster":            "postmaster",
		"ann+news":              "ann+news",
	} {
		if got := mailboxUser(in); got != want {
			t.Errorf("mailboxUser(%q) = %q, want %q", in, got, want)
		}
	}
}

// The refiler reads "not bulk" votes from the store: a recipient who
// voted on one of the crossing message's keys is never moved; a vote on
// other keys, or another voter's, does not count.
func TestVotesOf(t *testing.T) {
	st, err := store.OpenEmbedded(store.EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for _, v := range []store.Vote{
		{Keys: []string{"k1", "k2"}, Voter: "ann@example.test", Kind: store.VoteNotBulk},
		{Keys: []string{"k9"}, Voter: "bob@example.test", Kind: store.VoteNotBulk},
		{Keys: []string{"k1"}, Voter: "cid@example.test", Kind: store.VoteBulk},
	} {
		if err := st.RecordVote(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	var votes votesOf
	votes.use(st)
	for rcpt, want := range map[string]bool{"ann@example.test": true, "ANN@example.test": true, "bob@example.test": false, "cid@example.test": false, "dan@example.test": false} {
		got, err := votes.VotedNotBulk(ctx, rcpt, []string{"k2", "k3"})
		if err != nil || got != want {
			t.Errorf("VotedNotBulk(%s) = %v, %v; want %v", rcpt, got, err, want)
		}
	}
}

// Only the daemon's runtime refiles, and a reload keeps its refiler (the
// state file has one owner): the old runtime hands it over and closing
// the old runtime leaves it running.
func TestRefilerOwnership(t *testing.T) {
	c := config.Default()
	c.DataDir = t.TempDir()
	c.Refile.Enabled = true
	c.Refile.Mover = "hook"
	c.Refile.Hook.Command = []string{"true"}
	log := slog.New(slog.DiscardHandler)

	replay, err := NewRuntime(&c, log, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if replay.refiler != nil {
		t.Error("NewRuntime (scan, eval, bench) built a refiler: it would move mail")
	}
	if err := replay.Close(); err != nil {
		t.Fatal(err)
	}

	rt1, err := newRuntime(&c, log, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rt1.state.Pipeline.(*refiling); !ok || rt1.refiler == nil || !rt1.ownsRefiler {
		t.Fatalf("the daemon's runtime does not refile: pipeline %T, refiler %v", rt1.state.Pipeline, rt1.refiler)
	}
	c2 := c
	c2.Refile.Folder = "Bulk2"
	rt2, err := newRuntime(&c2, log, nil, rt1, true)
	if err != nil {
		t.Fatal(err)
	}
	if rt2.refiler != rt1.refiler || !rt2.ownsRefiler || rt1.ownsRefiler {
		t.Errorf("reload: refiler %p (owns %v), previous %p (owns %v); want the same, owned by the new runtime",
			rt2.refiler, rt2.ownsRefiler, rt1.refiler, rt1.ownsRefiler)
	}
	if err := rt1.Close(); err != nil {
		t.Fatal(err)
	}
	rt2.refiler.Remember("c", []refile.Copy{{Recipient: "a@example.test", MessageID: "<1@x>"}}, time.Time{})
	if _, rem := rt2.refiler.Pending(); rem != 1 {
		t.Errorf("after the old runtime closed the refiler remembers %d, want 1: it was closed with it", rem)
	}
	if err := rt2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.DataDir, "refile.json")); err != nil {
		t.Errorf("closing the runtime did not save the ledger: %v", err)
	}
}

// An actions.except_senders message is never routed, so its copies are
// not remembered for refiling: the same copy without the verifier's pass
// is.
func TestRefileSkipsExemptSenders(t *testing.T) {
	c := config.Default()
	c.DataDir = t.TempDir()
	c.Refile.Enabled = true
	c.Refile.Mover = "hook"
	c.Refile.Hook.Command = []string{"true"}
	c.Policy.AuthservID = "mx.example.test"
	c.Actions.ExceptSenders = []string{"partner.example"}
	rt, err := newRuntime(&c, slog.New(slog.DiscardHandler), nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	msg := "From: News <news@partner.example>\r\nTo: a@example.test\r\nSubject: November news\r\nMessage-ID: <n%d@partner.example>\r\n\r\n" +
		"This month our partners meet in Lisbon for the autumn conference on supply chains and logistics.\r\n"
	for i, tc := range []struct {
		ar        string
		remembers int
	}{
		{"Authentication-Results: mx.example.test; dkim=pass header.d=partner.example\r\n", 0},
		{"", 1},
	} {
		raw := tc.ar + fmt.Sprintf(msg, i)
		v := rt.state.Pipeline.Check(context.Background(), rt.Message([]byte(raw), []string{fmt.Sprintf("u%d@example.test", i)}, time.Time{}))
		if (v.ExemptSender != "") != (tc.remembers == 0) {
			t.Fatalf("copy %d: exempt by %q", i, v.ExemptSender)
		}
		if _, rem := rt.refiler.Pending(); rem != tc.remembers {
			t.Errorf("copy %d (exempt by %q): %d copies remembered, want %d", i, v.ExemptSender, rem, tc.remembers)
		}
	}
}
