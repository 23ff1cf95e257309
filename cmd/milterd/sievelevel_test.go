package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// levelTexts are four unrelated texts: campaigns that share no key.
var levelTexts = map[string]string{
	"A": `This month in the garden: how to prune roses before the first frost, which bulbs to plant
for an early spring, and why mulch keeps the soil alive through the winter. Our editors also
tested six watering cans and found one that does not leak.`,
	"B": `Our spring sale has started. Garden furniture, parasols and outdoor lighting are now at half
price for two weeks only. Order before Sunday and delivery to your home is free of charge. Visit
our shop to see every offer and the new collection of barbecue grills.`,
	"C": `Congratulations, your email address was selected in our monthly draw and you have won a brand
new smartphone. To claim your prize, confirm your delivery address and pay the small shipping fee
of four dollars before the end of the week, or the prize goes to the next winner.`,
	"D": `Hi, thanks for the photos from Saturday. The children loved the boat trip and want to go again
before the holidays. Shall we meet at the harbour next weekend? I can bring sandwiches and the
old fishing rods from the garage.`,
	"E": `Dear colleague, the budget review moved to Thursday afternoon because the auditors arrive a day
later than planned. Please send me your department's figures by Wednesday noon, including the
travel costs, so that I can merge the spreadsheets in time.`,
	"F": `Grandma called to say the apple tree finally carried fruit this year, so she is baking pies for
everyone on Sunday. She asked whether you could pick up the cousins from the station at three and
bring a folding table for the terrace.`,
}

func levelMessage(id, rcpt string, extra string) []byte {
	text := levelTexts[id[:1]]
	return []byte(fmt.Sprintf("%sFrom: sender@%s.example\nTo: %s\nSubject: message %s\nMessage-ID: <lvl-%s@example.test>\n"+
		"MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n%s\n", extra, strings.ToLower(id[:1]), rcpt, id, id, text))
}

// The shipped bulk-level.sieve and 90-bulkmilter-level.conf in a real
// Dovecot, behind a real Postfix and milterd: each user's mail is filed
// into Bulk from her own level up (strict 5, standard 6, and the site's
// default 7 for a user without a level of her own), and mail below it, or
// not bulk at all, stays in INBOX.
func TestSieveByLevel(t *testing.T) {
	testenv.RequireRoot(t, "Postfix and Dovecot run their daemons as their own users")
	// Threshold 3: one message to the three users is at the threshold.
	// No DKIM verifier runs here: campaign A's Authentication-Results at
	// the top of the message is trusted as a verifier's would be
	// (docs/levels.md says why a site without a verifier must leave
	// policy.authserv_id empty), which makes A a declared mailing.
	d := startDaemon(t, "-config", writeConfig(t, "policy:\n  threshold: 3\n  authserv_id: mx.example.test\n"))
	conf := readDeploy(t, "dovecot/90-bulkmilter-level.conf")
	if !strings.Contains(conf, "/etc/dovecot/sieve/bulk-level.sieve") {
		t.Fatal("90-bulkmilter-level.conf no longer names /etc/dovecot/sieve/bulk-level.sieve; update this test")
	}
	const strict, standard, def = "strict@example.test", "standard@example.test", "default@example.test"
	users := []string{strict, standard, def}
	var fillers []string
	for i := range 6 {
		fillers = append(fillers, fmt.Sprintf("filler%d@example.test", i))
	}
	dc := testenv.StartDovecot(t, testenv.DovecotOptions{
		Users:        append(append([]string{}, users...), fillers...),
		DisableSieve: true, // the shipped snippet loads it
		Files:        map[string]string{"bulk-level.sieve": readDeploy(t, "dovecot/bulk-level.sieve")},
		Config:       strings.ReplaceAll(conf, "/etc/dovecot/sieve/", "{{files}}/"),
		UserFields: map[string][]string{
			strict:   {"sieve_env_bulk_level=5"},
			standard: {"sieve_env_bulk_level=6"},
		},
	})
	pf := testenv.StartPostfix(t, testenv.PostfixOptions{MilterAddr: d.milterAddr, Transport: "lmtp:inet:" + dc.LMTPAddr()})

	declared := "Authentication-Results: mx.example.test; dkim=pass header.d=a.example header.s=s1 header.b=Zm9vYmFy\n" +
		"DKIM-Signature: v=1; a=rsa-sha256; d=a.example; s=s1; h=From:Subject:List-Unsubscribe:List-Unsubscribe-Post; b=Zm9vYmFyYmF6cXV4\n" +
		"List-Unsubscribe: <https://a.example/u>\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\n"
	send := func(id string, rcpts []string, extra string) {
		t.Helper()
		if err := pf.Send("sender@example.org", rcpts, levelMessage(id, rcpts[0], extra)); err != nil {
			t.Fatalf("%s: %v\n%s", id, err, pf.Log())
		}
	}
	// Every campaign here reaches the threshold within the hour: +1 (fast).
	send("A", users, declared)        // volume 3 = 1×, declared: 5-1+1 = level 5
	send("B0", fillers[:3], declared) // volume 3
	send("B", users, declared)        // volume 6 = 2×, declared: 6-1+1 = level 6
	send("C", users, "")              // volume 3 = 1×, undeclared: 5+1+1 = level 7
	personal := map[string]string{strict: "D", standard: "E", def: "F"}
	for _, u := range users { // one message each, seen once: level 0
		send(personal[u], []string{u}, "")
	}

	wantLevel := map[string]string{"A": "5", "B": "6", "C": "7"}
	filed := map[string]map[string]string{ // user → message → folder
		strict:   {"A": "Bulk", "B": "Bulk", "C": "Bulk"},
		standard: {"A": "INBOX", "B": "Bulk", "C": "Bulk"},
		def:      {"A": "INBOX", "B": "INBOX", "C": "Bulk"},
	}
	for _, u := range users {
		for _, id := range []string{"A", "B", "C", personal[u]} {
			folder, msg := folderOf(t, dc, u, "<lvl-"+id+"@")
			level := msg.Header.Get("X-Bulk-Level")
			want := filed[u][id]
			if want == "" {
				want = "INBOX"
				if level != "0" {
					t.Errorf("%s to %s: X-Bulk-Level %q, want 0", id, u, level)
				}
			} else if level != wantLevel[id] {
				t.Errorf("%s to %s: X-Bulk-Level %q, want %s (X-Bulk %q)", id, u, level, wantLevel[id], msg.Header.Get("X-Bulk"))
			}
			if folder != want {
				t.Errorf("%s to %s (X-Bulk-Level %s, X-Bulk %q) filed in %s, want %s", id, u, level, msg.Header.Get("X-Bulk"), folder, want)
			}
		}
	}
	if err := pf.WaitQueueEmpty(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}
