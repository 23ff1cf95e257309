package main

import (
	"bytes"
	"fmt"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// End to end with the real programs an admin runs: mail submitted over SMTP
// to Postfix (or Sendmail), judged by milterd, delivered over LMTP to
// Dovecot and filed by the shipped Sieve rule or by recipient detail.

const (
	e2eThreshold = 10 // the default policy.threshold
	e2eCopies    = 14
)

// newsletter returns copy i of a personalised newsletter: the recipient's
// name and address, a member number and an unsubscribe link differ, no
// random filler. The recipient's own words are stripped before signing
// and the number is too short a difference to matter, so copy i counts
// exactly i recipients whatever the secret key: the routing tests below
// do not depend on how salted spam fares (campaign() and
// TestCampaignTaggedFromThreshold measure that).
func newsletter(i int, rcpt, name string) []byte {
	return []byte(fmt.Sprintf(`From: "Garden Weekly" <news@garden.example>
To: "%s" <%s>
Subject: %s, your spring planting guide is here
Date: Mon, 16 Nov 2026 10:%02d:00 +0000
Message-ID: <news-%d@garden.example>
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8

Dear %s,

Spring is the season to prepare your vegetable garden. This week we explain
how to test the soil, when to sow tomatoes and peppers indoors, and how to
protect young seedlings from late frost. Our experts compare raised beds
with traditional rows and recommend compost mixtures for heavy clay.

Visit our store for discounted seed collections, organic fertilizer and
durable tools. Members receive free shipping on every order this month.

Your member number is %d. Unsubscribe: https://garden.example/u/%s

Happy gardening,
The Garden Weekly team
`, name, rcpt, name, i%60, i, name, 100000+i*7919, rcpt))
}

// startDaemonConfig starts milterd with a config file holding cfg.
func startDaemonConfig(t *testing.T, cfg string) *daemonProc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bulkmilter.yml")
	writeFile(t, path, cfg)
	return startDaemon(t, "-config", path)
}

// campaignUsers are the local users copy 1..e2eCopies goes to, one each.
func campaignUsers() []string {
	var u []string
	for i := 1; i <= e2eCopies; i++ {
		u = append(u, recipientAddr(i))
	}
	return u
}

func readDeploy(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// startShippedDovecot starts Dovecot with the shipped LMTP settings
// (deploy/dovecot/90-bulkmilter.conf) and Sieve rule
// (deploy/dovecot/bulk-folder.sieve), paths adjusted to the test's.
func startShippedDovecot(t *testing.T, users []string) *testenv.Dovecot {
	t.Helper()
	conf := readDeploy(t, "dovecot/90-bulkmilter.conf")
	if !strings.Contains(conf, "/etc/dovecot/sieve/bulk-folder.sieve") {
		t.Fatal("90-bulkmilter.conf no longer names /etc/dovecot/sieve/bulk-folder.sieve; update this test")
	}
	return testenv.StartDovecot(t, testenv.DovecotOptions{
		Users:        users,
		DisableSieve: true, // the shipped snippet loads it
		Files:        map[string]string{"bulk-folder.sieve": readDeploy(t, "dovecot/bulk-folder.sieve")},
		Config:       strings.ReplaceAll(conf, "/etc/dovecot/sieve/", "{{files}}/"),
	})
}

// folderOf waits for a message with the Message-ID prefix in one of a
// user's folders and returns the folder and the message.
func folderOf(t *testing.T, d *testenv.Dovecot, user, msgID string) (string, *mail.Message) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		folders, err := d.Folders(user)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range folders {
			msgs, err := d.Messages(user, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				parsed, err := mail.ReadMessage(bytes.NewReader(m.Data))
				if err != nil {
					t.Fatalf("%s/%s: %v", user, f, err)
				}
				if strings.HasPrefix(parsed.Header.Get("Message-Id"), msgID) {
					return f, parsed
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never got %s\n--- dovecot log ---\n%s", user, msgID, d.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A campaign to local users over Postfix lands in each user's Bulk folder
// from the threshold on and in INBOX before it; other mail stays in INBOX;
// an excepted user's copy stays in INBOX; all through the shipped Sieve
// rule and Dovecot settings.
func TestPostfixDovecotSieveBulkFolder(t *testing.T) {
	testenv.RequireRoot(t, "Postfix and Dovecot run their daemons as their own users")
	const vip = "vip@example.test"
	d := startDaemonConfig(t, "actions:\n  except_recipients: ["+vip+"]\n")
	users := append(campaignUsers(), "reader@example.test", vip)
	dc := startShippedDovecot(t, users)
	pf := testenv.StartPostfix(t, testenv.PostfixOptions{MilterAddr: d.milterAddr, Transport: "lmtp:inet:" + dc.LMTPAddr()})

	for i := 1; i <= e2eCopies; i++ {
		rcpt := recipientAddr(i)
		if err := pf.Send("news@garden.example", []string{rcpt}, newsletter(i, rcpt, recipientName(i))); err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
	}
	// Past the threshold, to the excepted user.
	if err := pf.Send("news@garden.example", []string{vip}, newsletter(99, vip, "Victor")); err != nil {
		t.Fatal(err)
	}
	ham := corpusMessages(t, "spamassassin-public-corpus/spamassassin_easy_ham.tar.bz2", 5)
	for i, m := range ham {
		m = append([]byte(fmt.Sprintf("Message-ID: <ham-%d@example.org>\n", i)), stripMessageID(m)...)
		if err := pf.Send("friend@example.org", []string{"reader@example.test"}, m); err != nil {
			t.Fatalf("ham %d: %v", i, err)
		}
	}

	for i := 1; i <= e2eCopies; i++ {
		folder, msg := folderOf(t, dc, recipientAddr(i), fmt.Sprintf("<news-%d@", i))
		want := "INBOX"
		if i >= e2eThreshold {
			want = "Bulk"
		}
		if folder != want {
			t.Errorf("copy %d (X-Bulk %q) filed in %s, want %s", i, msg.Header.Get("X-Bulk"), folder, want)
		}
	}
	if folder, msg := folderOf(t, dc, vip, "<news-99@"); folder != "INBOX" || !strings.HasSuffix(msg.Header.Get("X-Bulk"), "; exempt") {
		t.Errorf("excepted user: filed in %s with X-Bulk %q, want INBOX and an exempt verdict", folder, msg.Header.Get("X-Bulk"))
	}
	for i := range ham {
		if folder, msg := folderOf(t, dc, "reader@example.test", fmt.Sprintf("<ham-%d@", i)); folder != "INBOX" {
			t.Errorf("ham %d filed in %s (X-Bulk %q)", i, folder, msg.Header.Get("X-Bulk"))
		}
	}
	if err := pf.WaitQueueEmpty(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// stripMessageID removes a message's own Message-ID header field.
func stripMessageID(m []byte) []byte {
	var out []string
	lines := strings.Split(string(m), "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			out = append(out, lines[i:]...)
			break
		}
		if strings.HasPrefix(strings.ToLower(l), "message-id:") {
			continue
		}
		out = append(out, l)
	}
	return []byte(strings.Join(out, "\n"))
}

// The recipient-detail route without Sieve: the milter rewrites bulk
// recipients to user+Bulk, Dovecot's lmtp_save_to_detail_mailbox files
// them; the Subject tag is added; a header-only domain keeps its mail in
// INBOX, and a message to it and a routed user is routed for that user
// only, untagged.
func TestPostfixDovecotRecipientDetail(t *testing.T) {
	testenv.RequireRoot(t, "Postfix and Dovecot run their daemons as their own users")
	const lists = "digest@lists.test"
	d := startDaemonConfig(t, "actions:\n  recipient_detail: Bulk\n  subject_tag: \"[BULK]\"\n  header_only_domains: [lists.test]\n")
	dc := testenv.StartDovecot(t, testenv.DovecotOptions{
		Users:               append(campaignUsers(), lists),
		SaveToDetailMailbox: true,
		DisableSieve:        true,
	})
	pf := testenv.StartPostfix(t, testenv.PostfixOptions{MilterAddr: d.milterAddr, Transport: "lmtp:inet:" + dc.LMTPAddr()})

	for i := 1; i < e2eCopies; i++ {
		rcpt := recipientAddr(i)
		if err := pf.Send("news@garden.example", []string{rcpt}, newsletter(i, rcpt, recipientName(i))); err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
	}
	last := recipientAddr(e2eCopies)
	if err := pf.Send("news@garden.example", []string{last, lists}, newsletter(e2eCopies, last, recipientName(e2eCopies))); err != nil {
		t.Fatal(err)
	}

	for i := 1; i <= e2eCopies; i++ {
		folder, msg := folderOf(t, dc, recipientAddr(i), fmt.Sprintf("<news-%d@", i))
		bulk := i >= e2eThreshold
		want := map[bool]string{true: "Bulk", false: "INBOX"}[bulk]
		if folder != want {
			t.Errorf("copy %d (X-Bulk %q) filed in %s, want %s", i, msg.Header.Get("X-Bulk"), folder, want)
		}
		tagged := strings.HasPrefix(msg.Header.Get("Subject"), "[BULK] ")
		if wantTag := bulk && i != e2eCopies; tagged != wantTag {
			t.Errorf("copy %d: Subject %q, want tagged=%v", i, msg.Header.Get("Subject"), wantTag)
		}
		if got := strings.HasPrefix(msg.Header.Get("X-Bulk"), "yes"); got != bulk {
			t.Errorf("copy %d: X-Bulk %q, want bulk=%v", i, msg.Header.Get("X-Bulk"), bulk)
		}
	}
	if folder, msg := folderOf(t, dc, lists, fmt.Sprintf("<news-%d@", e2eCopies)); folder != "INBOX" || !strings.HasPrefix(msg.Header.Get("X-Bulk"), "yes") {
		t.Errorf("header-only recipient: filed in %s with X-Bulk %q, want INBOX and a bulk verdict", folder, msg.Header.Get("X-Bulk"))
	}
	if err := pf.WaitQueueEmpty(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// Quarantine: Postfix holds bulk copies in its hold queue; the others are
// delivered.
func TestPostfixQuarantine(t *testing.T) {
	testenv.RequireRoot(t, "Postfix runs its daemons as the postfix user")
	d := startDaemonConfig(t, "actions:\n  quarantine: true\n")
	pf := testenv.StartPostfix(t, testenv.PostfixOptions{MilterAddr: d.milterAddr})
	for i := 1; i <= e2eCopies; i++ {
		rcpt := recipientAddr(i)
		if err := pf.Send("news@garden.example", []string{rcpt}, newsletter(i, rcpt, recipientName(i))); err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
	}
	msgs, err := pf.Sink().WaitFor(e2eThreshold-1, 30*time.Second)
	if err != nil {
		t.Fatalf("%v\n%s", err, pf.Log())
	}
	held := e2eCopies - e2eThreshold + 1
	deadline := time.Now().Add(20 * time.Second)
	for countFiles(t, filepath.Join(pf.QueueDir(), "hold")) < held {
		if time.Now().After(deadline) {
			t.Fatalf("hold queue holds %d messages, want %d\n%s", countFiles(t, filepath.Join(pf.QueueDir(), "hold")), held, pf.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // a held message would be delivered by now
	if got := len(pf.Sink().Messages()); got != e2eThreshold-1 {
		t.Errorf("%d messages delivered, want %d (the copies below the threshold)", got, e2eThreshold-1)
	}
	for _, m := range msgs {
		if bytes.Contains(m.Data, []byte("X-Bulk: yes")) {
			t.Errorf("a bulk copy was delivered, not held:\n%s", m.Data)
		}
	}
	if log, err := pf.WaitLog("milter triggers HOLD action", 10*time.Second); err != nil {
		t.Errorf("%v\n%s", err, log)
	}
	if got := d.metric(t, `bulkmilter_actions_total{action="quarantine"}`); got != float64(held) {
		t.Errorf("actions_total{action=quarantine} = %v, want %d", got, held)
	}
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A real Sendmail in front of milterd, configured with the shipped .mc
// lines (deploy/sendmail/bulkmilter.mc, only the address changed): the
// same verdicts as with Postfix, and the same routing (recipient detail,
// Subject tag) through Sendmail's milter implementation.
func TestSendmailEndToEnd(t *testing.T) {
	d := startDaemonConfig(t, "actions:\n  recipient_detail: Bulk\n  subject_tag: \"[BULK]\"\n")
	mc := readDeploy(t, "sendmail/bulkmilter.mc")
	host, port, _ := strings.Cut(d.milterAddr, ":")
	if !strings.Contains(mc, "S=inet:7357@127.0.0.1") {
		t.Fatal("bulkmilter.mc no longer says S=inet:7357@127.0.0.1; update this test")
	}
	mc = strings.ReplaceAll(mc, "S=inet:7357@127.0.0.1", "S=inet:"+port+"@"+host)
	sm := testenv.StartSendmail(t, testenv.SendmailOptions{MC: []string{mc}})
	cf, err := os.ReadFile(sm.CF())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"O InputMailFilters=bulkmilter", "Xbulkmilter, S=inet:" + port + "@" + host + ", T=C:10s;S:10s;R:20s;E:5m", "O Milter.macros.eom=i"} {
		if !strings.Contains(string(cf), want) {
			t.Errorf("sendmail.cf built from bulkmilter.mc lacks %q", want)
		}
	}
	for i := 1; i <= e2eCopies; i++ {
		rcpt := recipientAddr(i)
		if err := sm.Send("news@garden.example", []string{rcpt}, newsletter(i, rcpt, recipientName(i))); err != nil {
			t.Fatalf("copy %d: %v\n%s", i, err, sm.Log())
		}
	}
	msgs, err := sm.Sink().WaitFor(e2eCopies, 60*time.Second)
	if err != nil {
		t.Fatalf("%v\n%s\nmilterd:\n%s", err, sm.Log(), d.Logs())
	}
	seen := map[int]bool{}
	for _, m := range msgs {
		parsed, err := mail.ReadMessage(bytes.NewReader(m.Data))
		if err != nil {
			t.Fatal(err)
		}
		var i int
		if _, err := fmt.Sscanf(parsed.Header.Get("Message-Id"), "<news-%d@", &i); err != nil {
			t.Fatalf("unexpected message %q", parsed.Header.Get("Message-Id"))
		}
		seen[i] = true
		bulk := i >= e2eThreshold
		verdicts := parsed.Header["X-Bulk"]
		if len(verdicts) != 1 || strings.HasPrefix(verdicts[0], "yes") != bulk {
			t.Errorf("copy %d: X-Bulk %q, want one, bulk=%v", i, verdicts, bulk)
		}
		if tagged := strings.HasPrefix(parsed.Header.Get("Subject"), "[BULK] "); tagged != bulk {
			t.Errorf("copy %d: Subject %q, want tagged=%v", i, parsed.Header.Get("Subject"), bulk)
		}
		want := recipientAddr(i)
		if bulk {
			local, domain, _ := strings.Cut(want, "@")
			want = local + "+Bulk@" + domain
		}
		if len(m.To) != 1 || !strings.EqualFold(m.To[0], want) {
			t.Errorf("copy %d: envelope recipients %q, want [%s]", i, m.To, want)
		}
	}
	if len(seen) != e2eCopies {
		t.Errorf("%d distinct copies delivered, want %d", len(seen), e2eCopies)
	}
}
