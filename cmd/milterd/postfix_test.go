package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// A real Postfix receives a campaign over SMTP, calls milterd on every
// message and delivers to a sink the test reads: the delivered copies carry
// the verdict header, "yes" from the threshold on. Postfix's
// milter_default_action is tempfail here, so a milter failure shows up as a
// refused message rather than an untagged one.
func TestPostfixEndToEnd(t *testing.T) {
	testenv.RequireRoot(t, "Postfix runs its daemons as the postfix user")
	d := startDaemon(t)
	pf := testenv.StartPostfix(t, testenv.PostfixOptions{MilterAddr: d.milterAddr})
	rng := rand.New(rand.NewPCG(3, 4))

	const threshold, copies = 10, 25
	for i := 1; i <= copies; i++ {
		rcpt := recipientAddr(i)
		if err := pf.Send("news@garden.example", []string{rcpt}, hashBusterCopy(i, rcpt, recipientName(i), rng)); err != nil {
			t.Fatalf("copy %d: %v\n%s", i, err, pf.Log())
		}
	}
	// Distinct recipients, not messages, are counted: one message to three
	// recipients counts three; the same message again to one of them
	// counts nothing; to a fourth recipient, one more.
	notice := func(n int) []byte {
		return []byte(fmt.Sprintf("From: billing@power.example\nSubject: Your electricity bill for October\nMessage-ID: <bill-%d@power.example>\n\n"+
			"Dear customer, your electricity bill for October is now available in your online account. "+
			"The amount will be collected by direct debit on the fifteenth of the month. "+
			"Please make sure your bank account holds sufficient funds before that date.\n", n))
	}
	for n, rcpts := range [][]string{
		{"ann@example.test", "bob@example.test", "cyd@example.test"},
		{"bob@example.test"},
		{"dan@example.test"},
	} {
		if err := pf.Send("billing@power.example", rcpts, notice(n)); err != nil {
			t.Fatalf("notice %d: %v", n, err)
		}
	}

	// The sink records one delivery per message, listing its recipients.
	msgs, err := pf.Sink().WaitFor(copies+3, 30*time.Second)
	if err != nil {
		t.Fatalf("%v\npostfix log:\n%s\nmilterd log:\n%s", err, pf.Log(), d.Logs())
	}
	seen := map[int]bool{}
	for _, m := range msgs {
		parsed, err := mail.ReadMessage(bytes.NewReader(m.Data))
		if err != nil {
			t.Fatalf("delivered message does not parse: %v", err)
		}
		verdicts := parsed.Header["X-Bulk"]
		if len(verdicts) != 1 {
			t.Errorf("%s delivered with %d X-Bulk headers: %q", parsed.Header.Get("Message-Id"), len(verdicts), verdicts)
			continue
		}
		var i int
		if _, err := fmt.Sscanf(parsed.Header.Get("Message-Id"), "<bill-%d@", &i); err == nil {
			if want := []string{"volume=3", "volume=3", "volume=4"}[i]; !strings.Contains(verdicts[0], want) {
				t.Errorf("notice %d to %v: X-Bulk %q, want %s", i, m.To, verdicts[0], want)
			}
			continue
		}
		if _, err := fmt.Sscanf(parsed.Header.Get("Message-Id"), "<spring-%d-", &i); err != nil {
			t.Fatalf("unexpected Message-ID %q", parsed.Header.Get("Message-Id"))
		}
		if got, want := strings.HasPrefix(verdicts[0], "yes"), i >= threshold; got != want {
			t.Errorf("copy %d delivered with X-Bulk %q, want bulk=%v", i, verdicts[0], want)
		}
		if seen[i] {
			t.Errorf("copy %d delivered twice", i)
		}
		seen[i] = true
	}
	if len(seen) != copies {
		t.Errorf("%d distinct copies delivered, want %d", len(seen), copies)
	}
}

// The feedback loop through a real Postfix: the user's report arrives as a
// submission from a trusted network (Postfix's mynetworks, 127.0.0.0/8,
// is what the daemon trusts here), attaching the very copy Postfix
// delivered to her. The report is discarded; her later copies arrive
// untagged, everybody else's tagged.
func TestPostfixFeedback(t *testing.T) {
	testenv.RequireRoot(t, "Postfix runs its daemons as the postfix user")
	d := startDaemon(t, "-config", writeConfig(t, "feedback:\n  trusted_networks: [127.0.0.1/32]\n"))
	pf := testenv.StartPostfix(t, testenv.PostfixOptions{MilterAddr: d.milterAddr})

	const copies, voter = 12, 12
	for i := 1; i <= copies; i++ {
		rcpt := recipientAddr(i)
		if err := pf.Send("news@garden.example", []string{rcpt}, campaign(i, rcpt, recipientName(i), newsletterWords())); err != nil {
			t.Fatalf("copy %d: %v\n%s", i, err, pf.Log())
		}
	}
	msgs, err := pf.Sink().WaitFor(copies, 30*time.Second)
	if err != nil {
		t.Fatalf("%v\n%s", err, pf.Log())
	}
	var theirs []byte
	for _, m := range msgs {
		if len(m.To) == 1 && m.To[0] == recipientAddr(voter) {
			theirs = m.Data
		}
	}
	if !bytes.Contains(theirs, []byte("X-Bulk: yes")) {
		t.Fatalf("the voter's copy was not tagged:\n%s", theirs)
	}

	report := feedbackReport("not-bulk", recipientAddr(voter), theirs)
	if err := pf.Send(recipientAddr(voter), []string{"bulk-feedback@example.test"}, report); err != nil {
		t.Fatalf("report: %v\n%s", err, pf.Log())
	}
	if _, err := pf.WaitLog("milter triggers DISCARD action", 30*time.Second); err != nil {
		t.Fatalf("the report was not discarded: %v\nmilterd log:\n%s", err, d.Logs())
	}
	for _, i := range []int{voter, 13} {
		rcpt := recipientAddr(i)
		if err := pf.Send("news@garden.example", []string{rcpt}, campaign(100+i, rcpt, recipientName(i), newsletterWords())); err != nil {
			t.Fatalf("later copy to %d: %v", i, err)
		}
	}
	msgs, err = pf.Sink().WaitFor(copies+2, 30*time.Second)
	if err != nil {
		t.Fatalf("%v\n%s", err, pf.Log())
	}
	if err := pf.WaitQueueEmpty(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n := len(pf.Sink().Messages()); n != copies+2 {
		t.Errorf("%d deliveries, want %d: the report must not be delivered", n, copies+2)
	}
	for _, m := range msgs[copies:] {
		parsed, err := mail.ReadMessage(bytes.NewReader(m.Data))
		if err != nil {
			t.Fatal(err)
		}
		v := parsed.Header.Get("X-Bulk")
		switch m.To[0] {
		case recipientAddr(voter):
			if !strings.HasPrefix(v, "no;") || !strings.HasSuffix(v, "feedback=user-not-bulk") {
				t.Errorf("later copy to the voter: X-Bulk %q, want no; …; feedback=user-not-bulk", v)
			}
		default:
			if !strings.HasPrefix(v, "yes;") {
				t.Errorf("later copy to %s: X-Bulk %q, want yes", m.To[0], v)
			}
		}
	}
	if got := d.metric(t, `bulkmilter_feedback_votes_total{kind="not_bulk"}`); got != 1 {
		t.Errorf("feedback_votes_total{not_bulk} = %v, want 1", got)
	}
}
