package daemon

import (
	"context"
	"testing"

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
