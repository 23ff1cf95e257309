package main

import (
	"bytes"
	"fmt"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// The feedback loop as users drive it: mail filed into Bulk by the shipped
// Sieve rule, and the shipped imapsieve scripts (deploy/dovecot) reporting
// what users move out of Bulk ("not bulk") or into it ("bulk"), with the
// moved message attached, over SMTP from the Dovecot host, which the milter
// trusts. Real Postfix, real Dovecot, the real daemon.

// startFeedbackDovecot starts Dovecot with the shipped delivery settings
// and Sieve rule and the shipped feedback settings, scripts and sender,
// paths adjusted to the test's. Reports go by SMTP to the address set by
// setFeedbackSMTP.
func startFeedbackDovecot(t *testing.T, users []string) *testenv.Dovecot {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		if testenv.InCI() {
			t.Fatal("curl is needed by deploy/dovecot/bulk-feedback.sh's SMTP submission")
		}
		t.Skip("SKIPPED: curl not installed; bulk-feedback.sh submits over SMTP with it")
	}
	delivery := readDeploy(t, "dovecot/90-bulkmilter.conf")
	fb := readDeploy(t, "dovecot/91-bulkmilter-feedback.conf")
	for _, want := range []string{"/etc/dovecot/sieve/report-bulk.sieve", "/etc/dovecot/sieve/report-not-bulk.sieve", "sieve_pipe_bin_dir = /usr/lib/dovecot/sieve-pipe"} {
		if !strings.Contains(fb, want) {
			t.Fatalf("91-bulkmilter-feedback.conf no longer names %s; update this test", want)
		}
	}
	paths := strings.NewReplacer("/etc/dovecot/sieve/", "{{files}}/", "/usr/lib/dovecot/sieve-pipe", "{{files}}")
	return testenv.StartDovecot(t, testenv.DovecotOptions{
		Users:        users,
		DisableSieve: true, // the shipped snippets load it
		Files: map[string]string{
			"bulk-folder.sieve":     readDeploy(t, "dovecot/bulk-folder.sieve"),
			"report-bulk.sieve":     readDeploy(t, "dovecot/report-bulk.sieve"),
			"report-not-bulk.sieve": readDeploy(t, "dovecot/report-not-bulk.sieve"),
			"bulk-feedback.sh":      readDeploy(t, "dovecot/bulk-feedback.sh"),
			"bulk-feedback.conf":    readDeploy(t, "dovecot/bulk-feedback.conf"),
		},
		Config: paths.Replace(delivery) + "\n" + paths.Replace(fb),
	})
}

// setFeedbackSMTP rewrites the shipped bulk-feedback.conf beside the
// script to submit reports to smtpAddr; the script reads it on every run.
func setFeedbackSMTP(t *testing.T, dc *testenv.Dovecot, smtpAddr string) {
	t.Helper()
	path := filepath.Join(dc.FilesDir(), "bulk-feedback.conf")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	settings := strings.Replace(string(b), `SMTP_URL=""`, `SMTP_URL="smtp://`+smtpAddr+`"`, 1)
	settings = strings.Replace(settings, `FEEDBACK_TO="bulk-feedback@localhost"`, `FEEDBACK_TO="bulk-feedback@example.test"`, 1)
	if !strings.Contains(settings, smtpAddr) || !strings.Contains(settings, "bulk-feedback@example.test") {
		t.Fatal("bulk-feedback.conf no longer has SMTP_URL=\"\" and FEEDBACK_TO=\"bulk-feedback@localhost\"; update this test")
	}
	if err := os.WriteFile(path, []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitMetric polls a daemon metric until it reaches want.
func waitMetric(t *testing.T, d *daemonProc, sample string, want float64, extra func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := d.metric(t, sample)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v\nmilterd log:\n%s\n%s", sample, got, want, d.Logs(), extra())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// moveFirst moves the first message of a user's folder with IMAP MOVE.
func moveFirst(t *testing.T, dc *testenv.Dovecot, user, from, to string) {
	t.Helper()
	c := dc.IMAP(t, user)
	_, _ = c.Cmd("CREATE %s", testenv.Quote(to)) // fails harmlessly when it exists
	if n, err := c.Select(from); err != nil || n < 1 {
		t.Fatalf("%s: SELECT %s = %d, %v", user, from, n, err)
	}
	if err := c.Move("1", to); err != nil {
		t.Fatalf("%s: MOVE %s -> %s: %v\n%s", user, from, to, err, dc.Log())
	}
	c.Close()
}

func TestDovecotIMAPSieveFeedback(t *testing.T) {
	testenv.RequireRoot(t, "Postfix and Dovecot run their daemons as their own users")
	d := startDaemonConfig(t, "feedback:\n  trusted_networks: [127.0.0.1/32]\nactions:\n  subject_tag: \"[BULK]\"\n")
	users := campaignUsers()
	dc := startFeedbackDovecot(t, users)
	pf := testenv.StartPostfix(t, testenv.PostfixOptions{MilterAddr: d.milterAddr, Transport: "lmtp:inet:" + dc.LMTPAddr()})
	setFeedbackSMTP(t, dc, pf.SMTPAddr())

	for i := 1; i <= 12; i++ {
		rcpt := recipientAddr(i)
		if err := pf.Send("news@garden.example", []string{rcpt}, campaign(i, rcpt, recipientName(i), newsletterWords())); err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
	}
	voter := recipientAddr(12)
	if f, m := folderOf(t, dc, voter, fmt.Sprintf("<spring-%d-", 12)); f != "Bulk" || !strings.HasPrefix(m.Header.Get("Subject"), "[BULK]") {
		t.Fatalf("copy 12 filed in %s with subject %q, want Bulk and a tag", f, m.Header.Get("Subject"))
	}
	for i := 1; i <= 11; i++ {
		folderOf(t, dc, recipientAddr(i), fmt.Sprintf("<spring-%d-", i)) // all delivered
	}

	// Out of Bulk: "not bulk", recorded for her; the report is discarded.
	moveFirst(t, dc, voter, "Bulk", "INBOX")
	waitMetric(t, d, `bulkmilter_feedback_votes_total{kind="not_bulk"}`, 1, func() string { return dc.Log() + pf.Log() })
	if _, err := pf.WaitLog("milter triggers DISCARD action", 20*time.Second); err != nil {
		t.Fatalf("report not discarded: %v", err)
	}
	for n, i := range []int{12, 11} {
		rcpt := recipientAddr(i)
		if err := pf.Send("news@garden.example", []string{rcpt}, campaign(200+n, rcpt, recipientName(i), newsletterWords())); err != nil {
			t.Fatal(err)
		}
	}
	if f, m := folderOf(t, dc, voter, "<spring-200-"); f != "INBOX" || !strings.HasSuffix(m.Header.Get("X-Bulk"), "feedback=user-not-bulk") {
		t.Errorf("the voter's later copy: folder %s, X-Bulk %q; want INBOX, feedback=user-not-bulk", f, m.Header.Get("X-Bulk"))
	}
	if f, _ := folderOf(t, dc, recipientAddr(11), "<spring-201-"); f != "Bulk" {
		t.Errorf("someone else's later copy filed in %s, want Bulk", f)
	}

	// Bulk to Trash teaches nothing.
	moveFirst(t, dc, recipientAddr(11), "Bulk", "Trash")

	// Into Bulk: "bulk". A small mailing, below the threshold, in INBOX;
	// user 1 moves hers to Bulk, and her next copy goes to Bulk, nobody
	// else's.
	for i := 1; i <= 3; i++ {
		if err := pf.Send("club@chess.example", []string{recipientAddr(i)}, clubNotice(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 3; i++ {
		if f, _ := folderOf(t, dc, recipientAddr(i), fmt.Sprintf("<club-%d@", i)); f != "INBOX" {
			t.Fatalf("club notice %d filed in %s, want INBOX", i, f)
		}
	}
	c := dc.IMAP(t, recipientAddr(1))
	_, _ = c.Cmd("CREATE Bulk") // user 1 got no bulk mail yet
	if _, err := c.Select("INBOX"); err != nil {
		t.Fatal(err)
	}
	lines, err := c.Cmd("SEARCH HEADER Message-ID %s", testenv.Quote("<club-1@"))
	if err != nil || len(lines) == 0 || len(strings.Fields(lines[0])) < 3 {
		t.Fatalf("SEARCH for the club notice: %v %v", lines, err)
	}
	if err := c.Move(strings.Fields(lines[0])[2], "Bulk"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitMetric(t, d, `bulkmilter_feedback_votes_total{kind="bulk"}`, 1, func() string { return dc.Log() + pf.Log() })
	for _, i := range []int{1, 4} {
		if err := pf.Send("club@chess.example", []string{recipientAddr(i)}, clubNotice(100+i)); err != nil {
			t.Fatal(err)
		}
	}
	if f, m := folderOf(t, dc, recipientAddr(1), "<club-101@"); f != "Bulk" || !strings.HasSuffix(m.Header.Get("X-Bulk"), "feedback=user-bulk") {
		t.Errorf("the bulk voter's next club notice: folder %s, X-Bulk %q; want Bulk, feedback=user-bulk", f, m.Header.Get("X-Bulk"))
	}
	if f, _ := folderOf(t, dc, recipientAddr(4), "<club-104@"); f != "INBOX" {
		t.Errorf("someone else's club notice filed in %s, want INBOX", f)
	}
	// Two votes in all: the move to Trash reported nothing.
	if got := d.metric(t, `bulkmilter_feedback_votes_total{kind="not_bulk"}`); got != 1 {
		t.Errorf("feedback_votes_total{not_bulk} = %v, want 1 (a move to Trash is no vote)", got)
	}
	if err := pf.WaitQueueEmpty(30 * time.Second); err != nil {
		t.Error(err)
	}
	if msgs, _ := dc.Messages(recipientAddr(12), "INBOX"); countSubject(msgs, "bulk feedback") > 0 {
		t.Error("a feedback report was delivered to a mailbox")
	}
}

// clubNotice is a small mailing from a chess club, far below the threshold.
func clubNotice(n int) []byte {
	return []byte(fmt.Sprintf("From: Chess Club <club@chess.example>\nSubject: Tournament schedule for the spring season\n"+
		"Message-ID: <club-%d@chess.example>\n\nDear members,\n\nthe spring tournament starts on the first Saturday of April. "+
		"Games begin at ten in the morning in the library hall; please register at the front desk before the end of March. "+
		"Beginners are welcome in the open section, and the junior section meets on Sunday afternoons.\n\nThe board\n", n))
}

func countSubject(msgs []testenv.MaildirMessage, prefix string) int {
	n := 0
	for _, m := range msgs {
		if parsed, err := mail.ReadMessage(bytes.NewReader(m.Data)); err == nil && strings.HasPrefix(parsed.Header.Get("Subject"), prefix) {
			n++
		}
	}
	return n
}

// The shipped sender's default route: the local sendmail command, through
// Postfix's pickup and non_smtpd_milters, where the milter sees the client
// 127.0.0.1. The script runs as root here, since only root may point
// Postfix's sendmail at a test configuration (-C); under Dovecot it runs
// as the mail user with the system's Postfix.
func TestFeedbackScriptSendmail(t *testing.T) {
	testenv.RequireRoot(t, "Postfix runs its daemons as the postfix user")
	sendmail, err := exec.LookPath("sendmail")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("sendmail (Postfix's) not installed")
		}
		t.Skip("SKIPPED: no sendmail command")
	}
	d := startDaemon(t, "-config", writeConfig(t, "feedback:\n  trusted_networks: [127.0.0.1/32]\n"))
	pf := testenv.StartPostfix(t, testenv.PostfixOptions{MilterAddr: d.milterAddr,
		Main: map[string]string{"non_smtpd_milters": "inet:" + d.milterAddr}})
	for i := 1; i <= 12; i++ {
		rcpt := recipientAddr(i)
		if err := pf.Send("news@garden.example", []string{rcpt}, campaign(i, rcpt, recipientName(i), newsletterWords())); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := pf.Sink().WaitFor(12, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	voter := recipientAddr(12)
	var stored []byte
	for _, m := range msgs {
		if m.To[0] == voter {
			// As Dovecot stores and pipes it: LF line ends.
			stored = bytes.ReplaceAll(m.Data, []byte("\r\n"), []byte("\n"))
		}
	}

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "bulk-feedback.sh"), readDeploy(t, "dovecot/bulk-feedback.sh"))
	conf := strings.Replace(readDeploy(t, "dovecot/bulk-feedback.conf"), `SENDMAIL="/usr/sbin/sendmail"`,
		`SENDMAIL="`+sendmail+` -C `+pf.ConfigDir()+`"`, 1)
	if !strings.Contains(conf, pf.ConfigDir()) {
		t.Fatal(`bulk-feedback.conf no longer has SENDMAIL="/usr/sbin/sendmail"; update this test`)
	}
	writeFile(t, filepath.Join(dir, "bulk-feedback.conf"), conf)
	cmd := exec.Command("/bin/sh", filepath.Join(dir, "bulk-feedback.sh"), "not-bulk", voter)
	cmd.Stdin = bytes.NewReader(stored)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bulk-feedback.sh: %v\n%s", err, out)
	}
	waitMetric(t, d, `bulkmilter_feedback_votes_total{kind="not_bulk"}`, 1, pf.Log)
	if !strings.Contains(d.Logs(), "trusted_by=network") {
		t.Errorf("the vote was not trusted by network:\n%s", d.Logs())
	}
	if err := pf.Send("news@garden.example", []string{voter}, campaign(300, voter, recipientName(12), newsletterWords())); err != nil {
		t.Fatal(err)
	}
	msgs, err = pf.Sink().WaitFor(13, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := pf.WaitQueueEmpty(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n := len(pf.Sink().Messages()); n != 13 {
		t.Errorf("%d deliveries, want 13: the report must be discarded", n)
	}
	parsed, err := mail.ReadMessage(bytes.NewReader(msgs[12].Data))
	if err != nil {
		t.Fatal(err)
	}
	if v := parsed.Header.Get("X-Bulk"); !strings.HasPrefix(v, "no;") || !strings.HasSuffix(v, "feedback=user-not-bulk") {
		t.Errorf("the voter's later copy: X-Bulk %q, want no; …; feedback=user-not-bulk", v)
	}
	// Bad arguments are refused before anything is sent.
	for _, args := range [][]string{{"spam", voter}, {"not-bulk", ""}, {"bulk", "ann;rm -rf /"}, {"bulk", "ann"}} {
		cmd := exec.Command("/bin/sh", append([]string{filepath.Join(dir, "bulk-feedback.sh")}, args...)...)
		cmd.Stdin = strings.NewReader("Subject: x\n\nx\n")
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("bulk-feedback.sh %q succeeded: %s", args, out)
		}
	}
}
