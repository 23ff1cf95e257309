package eval

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/daemon"
)

// The stream replay runs the daemon's refiler beside the verdicts and
// reports what it moved apart from what was tagged at delivery: a
// campaign's first nine copies, delivered untagged to nine users, are
// refiled once the tenth user's copy makes it bulk; a copy without a
// Message-ID cannot be found and is counted; a personal message is left
// alone, though it reuses a refiled copy's Message-ID and recipient (spam
// tools reuse Message-IDs: the replay counts each message's own copy);
// the trace's last column says which messages were refiled.
func TestReplayStreamRefiled(t *testing.T) {
	dir := t.TempDir()
	c := config.Default()
	c.DataDir, c.Store.File = dir, ""
	c.SecretKeyFile = filepath.Join(dir, "secret.key")
	if err := os.WriteFile(c.SecretKeyFile, []byte(hex.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	body := "Dear friend, our online pharmacy ships discreet packages of quality generic medication " +
		"to your door within three days. Order now at the lowest prices of the year, no prescription " +
		"needed, satisfaction guaranteed or your money back. Visit our store today and save seventy percent."
	mail := func(i int, rcpt, msgID, subject, text string) []byte {
		id := ""
		if msgID != "" {
			id = "Message-ID: <" + msgID + ">\n"
		}
		return fmt.Appendf(nil, "Received: from host%d.example.net (host%d.example.net [198.51.%d.7])\n"+
			"\tby speedy.site.example (8.12.11/8.12.11) with ESMTP id l38H%04d\n\tfor <%s>; Sun, 8 Apr 2007 13:%02d:21 -0400\n"+
			"Return-Path: <x%d@sender.example>\n%sDate: Sun, 8 Apr 2007 13:%02d:00 -0400\nFrom: <x%d@sender.example>\nTo: <%s>\n"+
			"Subject: %s\nContent-Type: text/plain; charset=us-ascii\n\n%s\n", i, i, i, i, rcpt, i, i, id, i, i, rcpt, subject, text)
	}
	var msgs []streamMsg
	for i := range 12 {
		id := fmt.Sprintf("c%d@sender.example", i)
		if i == 4 {
			id = "" // refiling finds copies by Message-ID
		}
		msgs = append(msgs, streamMsg{name: fmt.Sprintf("inmail.%d", i+1), spam: true,
			raw: mail(i, fmt.Sprintf("user%d@site.example", i), id, "Quality medication", body)})
		if i == 2 {
			msgs = append(msgs, streamMsg{name: "inmail.personal", raw: mail(40, "user1@site.example", "c1@sender.example",
				"lunch", "Shall we meet for lunch on Tuesday at the usual place? I will bring the draft of the report.")})
		}
	}
	var trace strings.Builder
	cfg := &Config{StreamTrace: &trace, NewStreamPipeline: func() (Pipeline, error) {
		return daemon.NewRuntime(&c, slog.New(slog.DiscardHandler), nil, nil)
	}}
	r, err := replayStream(context.Background(), cfg, msgs, ClockReceived)
	if err != nil {
		t.Fatal(err)
	}
	if r.Tagged != (StreamPoint{Spam: 3}) || r.Refiled != (StreamPoint{Spam: 8}) || r.NoMessageID != (StreamPoint{Spam: 1}) {
		t.Errorf("tagged %+v, refiled %+v, without Message-ID %+v; want 3 spam (the 10th to 12th copies), 8 (the first 9 but the one without a Message-ID), 1",
			r.Tagged, r.Refiled, r.NoMessageID)
	}
	if want := (StreamClasses{Early: ClassCount{Untagged: 9, Refiled: 8}}); r.Classes != want {
		t.Errorf("classes %+v, want %+v", r.Classes, want)
	}
	lines := strings.Split(strings.TrimSuffix(trace.String(), "\n"), "\n")
	if len(lines) != len(msgs) {
		t.Fatalf("%d trace lines, want %d", len(lines), len(msgs))
	}
	for i, l := range lines {
		cols := strings.Split(l, "\t")
		name, bulk, refiled := cols[1], cols[3], cols[len(cols)-1]
		want := "0"
		if name != "inmail.personal" && name != "inmail.5" && bulk == "0" {
			want = "1"
		}
		if refiled != want || len(cols) != len(strings.Split(streamTraceHeader, "\t")) {
			t.Errorf("line %d (%s, bulk %s): refiled %s, want %s; %d columns", i, name, bulk, refiled, want, len(cols))
		}
	}
}

// Untagged spam is sorted by what its campaign became, ham counting
// towards a campaign's size and messages but never sorted itself.
func TestStreamClasses(t *testing.T) {
	spam := func(camp uint32, size int64, bulk, refiled bool) classMsg {
		return classMsg{spam: true, campaign: camp, size: size, bulk: bulk, refiled: refiled}
	}
	msgs := []classMsg{
		spam(1, 1, false, true), spam(1, 9, false, true), spam(1, 10, true, false), // early, refiled twice; tagged
		spam(2, 1, false, false), spam(2, 3, false, true), // a campaign of 2–9
		spam(3, 1, false, false), spam(3, 1, false, false), // stuck
		spam(4, 1, false, false),                         // alone
		spam(5, 1, false, false), {campaign: 5, size: 2}, // ham makes it 2
		spam(6, 1, false, false), {campaign: 6, size: 1}, // and it makes it several
		{spam: true, unsigned: true}, {spam: true, unsigned: true, bulk: true},
	}
	want := StreamClasses{
		Early: ClassCount{2, 2}, Small: ClassCount{3, 1}, Stuck: ClassCount{3, 0},
		Alone: ClassCount{1, 0}, Unsigned: ClassCount{1, 0},
	}
	if got := streamClasses(msgs); got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}
