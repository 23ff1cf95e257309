package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// Refiling end to end (issue 17): Postfix hands a campaign to milterd,
// Dovecot takes it over LMTP and files it by the shipped Sieve rule; once
// the campaign crosses its threshold, milterd moves the copies delivered
// before it from each INBOX to Bulk through the doveadm HTTP API. Folders
// are read from the maildirs, counted per Message-ID.

const refileCopies = 15

// refileSetup is a daemon with refiling, Postfix and Dovecot with the
// doveadm HTTP API, for refileCopies users.
type refileSetup struct {
	d  *daemonProc
	dc *testenv.Dovecot
	pf *testenv.Postfix
}

func startRefile(t *testing.T) *refileSetup {
	t.Helper()
	testenv.RequireRoot(t, "Postfix and Dovecot run their daemons as their own users")
	var users []string
	for i := 1; i <= refileCopies; i++ {
		users = append(users, recipientAddr(i))
	}
	port := testenv.FreePort(t)
	conf := readDeploy(t, "dovecot/90-bulkmilter.conf")
	// The shipped doveadm HTTP settings, on a free port.
	refileConf := readDeploy(t, "dovecot/92-bulkmilter-refile.conf")
	for _, s := range []string{"port = 8080", "</etc/dovecot/doveadm.password"} {
		if !strings.Contains(refileConf, s) {
			t.Fatalf("92-bulkmilter-refile.conf no longer holds %q; update this test", s)
		}
	}
	refileConf = strings.NewReplacer("port = 8080", fmt.Sprintf("port = %d", port),
		"</etc/dovecot/doveadm.password", "<{{files}}/doveadm.password").Replace(refileConf)
	dc := testenv.StartDovecot(t, testenv.DovecotOptions{
		Users:        users,
		DisableSieve: true, // the shipped snippet loads it
		Files: map[string]string{
			"bulk-folder.sieve": readDeploy(t, "dovecot/bulk-folder.sieve"),
			"doveadm.password":  "refile-secret",
		},
		Config: strings.ReplaceAll(conf, "/etc/dovecot/sieve/", "{{files}}/") + "\n" + refileConf,
	})
	pwFile := filepath.Join(t.TempDir(), "doveadm.password")
	writeFile(t, pwFile, "refile-secret\n")
	// Short waits between attempts: the outage below lasts a second or two.
	d := startDaemonConfig(t, fmt.Sprintf(`refile:
  enabled: true
  mover: doveadm-http
  doveadm:
    url: http://127.0.0.1:%d/doveadm/v1
    password_file: %s
  backoff: 100ms
  max_backoff: 500ms
  retries: 1000
feedback:
  trusted_networks: [127.0.0.1/32]   # the test's reports come through Postfix on loopback
`, port, pwFile))
	pf := testenv.StartPostfix(t, testenv.PostfixOptions{MilterAddr: d.milterAddr, Transport: "lmtp:inet:" + dc.LMTPAddr()})
	return &refileSetup{d: d, dc: dc, pf: pf}
}

// send sends copy i of the newsletter to user i and, unless wait is false,
// waits until Dovecot has it.
func (s *refileSetup) send(t *testing.T, i int, wait bool) {
	t.Helper()
	rcpt := recipientAddr(i)
	if err := s.pf.Send("news@garden.example", []string{rcpt}, newsletter(i, rcpt, recipientName(i))); err != nil {
		t.Fatalf("copy %d: %v", i, err)
	}
	if wait {
		folderOf(t, s.dc, rcpt, fmt.Sprintf("<news-%d@", i))
	}
}

// personal sends user i a real personal message (SpamAssassin's easy ham,
// one each) that stays in INBOX, and returns its Message-ID.
func (s *refileSetup) personal(t *testing.T, i int, ham []byte) string {
	t.Helper()
	id := fmt.Sprintf("<personal-%d@example.org>", i)
	m := append([]byte("Message-ID: "+id+"\n"), stripMessageID(ham)...)
	if err := s.pf.Send("friend@example.org", []string{recipientAddr(i)}, m); err != nil {
		t.Fatal(err)
	}
	folderOf(t, s.dc, recipientAddr(i), id)
	return id
}

// where counts, per folder, a user's messages whose Message-ID starts
// with prefix.
func (s *refileSetup) where(t *testing.T, user, prefix string) map[string]int {
	t.Helper()
	folders, err := s.dc.Folders(user)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, f := range folders {
		msgs, err := s.dc.Messages(user, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if strings.Contains(string(headerOf(m.Data)), "Message-ID: "+prefix) {
				n[f]++
			}
		}
	}
	return n
}

// headerOf returns a message's header.
func headerOf(m []byte) []byte {
	s := strings.ReplaceAll(string(m), "\r\n", "\n")
	h, _, _ := strings.Cut(s, "\n\n")
	return []byte(h)
}

// waitRefileMetric waits until a metric reaches want; a refile runs after the
// milter's reply, so the test waits for its count, not for time.
func waitRefileMetric(t *testing.T, d *daemonProc, sample string, want float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute) // a bound for a daemon that never gets there
	for {
		got := d.metric(t, sample)
		if got == want {
			return
		}
		if got > want || time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v\n--- milterd ---\n%s", sample, got, want, d.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A campaign of 15 copies to 15 users, threshold 10: after the tenth,
// copies 1–9 are in each user's Bulk, none is left in an inbox, none is
// duplicated; personal mail stays in INBOX; a copy its user had already
// moved elsewhere stays there, and so does the copy of a user who voted
// "not bulk" on the campaign.
func TestRefilePostfixDovecot(t *testing.T) {
	s := startRefile(t)
	const mover = 3 // this user files her copy herself
	const voter = 5 // this one reports hers as not bulk
	personal := map[int]string{}
	ham := corpusMessages(t, "spamassassin-public-corpus/spamassassin_easy_ham.tar.bz2", refileCopies)
	for i := 1; i <= refileCopies; i++ {
		personal[i] = s.personal(t, i, ham[i-1])
	}
	before := s.d.metric(t, "bulkmilter_refile_ledger_copies") // personal mail a signature could name
	for i := 1; i < e2eThreshold; i++ {
		s.send(t, i, true)
	}
	if _, err := s.dc.Doveadm("mailbox", "create", "-u", recipientAddr(mover), "Garden"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.dc.Doveadm("move", "-u", recipientAddr(mover), "Garden", "mailbox", "INBOX", "header", "Message-ID", fmt.Sprintf("<news-%d@garden.example>", mover)); err != nil {
		t.Fatal(err)
	}
	// The voter's report, with her copy attached as her mailbox has it.
	msgs, err := s.dc.Messages(recipientAddr(voter), "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	var copyOfVoter []byte
	for _, m := range msgs {
		if strings.Contains(string(headerOf(m.Data)), fmt.Sprintf("Message-ID: <news-%d@", voter)) {
			copyOfVoter = m.Data
		}
	}
	if copyOfVoter == nil {
		t.Fatalf("user %d has no copy in INBOX", voter)
	}
	if err := s.pf.Send(recipientAddr(voter), []string{"bulk-feedback@example.test"}, feedbackReport("not-bulk", recipientAddr(voter), copyOfVoter)); err != nil {
		t.Fatal(err)
	}
	waitRefileMetric(t, s.d, `bulkmilter_feedback_votes_total{kind="not_bulk"}`, 1)
	if got := s.d.metric(t, "bulkmilter_refile_ledger_copies") - before; got != e2eThreshold-1 {
		t.Errorf("the campaign added %v copies to the ledger before its threshold, want %d", got, e2eThreshold-1)
	}
	for i := e2eThreshold; i <= refileCopies; i++ {
		s.send(t, i, true)
	}
	waitRefileMetric(t, s.d, "bulkmilter_refiled_total", e2eThreshold-3)
	waitRefileMetric(t, s.d, `bulkmilter_refile_skipped_total{reason="not_in_inbox"}`, 1)
	waitRefileMetric(t, s.d, `bulkmilter_refile_skipped_total{reason="voted_not_bulk"}`, 1)
	waitRefileMetric(t, s.d, "bulkmilter_refile_queue_copies", 0)

	for i := 1; i <= refileCopies; i++ {
		u := recipientAddr(i)
		got := s.where(t, u, fmt.Sprintf("<news-%d@", i))
		want := map[string]int{"Bulk": 1}
		switch i {
		case mover:
			want = map[string]int{"Garden": 1}
		case voter:
			want = map[string]int{"INBOX": 1}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("copy %d: in %v, want %v", i, got, want)
		}
		if got := s.where(t, u, personal[i]); fmt.Sprint(got) != fmt.Sprint(map[string]int{"INBOX": 1}) {
			t.Errorf("user %d's personal mail: in %v, want INBOX once", i, got)
		}
	}
	// One line for the refiled campaign, naming it as the messages' lines do.
	logs := s.d.Logs()
	m := regexp.MustCompile(`msg="campaign refiled" campaign=(\S+) moved=7 skipped=2`).FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("no log line for the refiled campaign with moved=7 skipped=2:\n%s", logs)
	}
	if !strings.Contains(logs, "campaign="+m[1]+" ") || strings.Count(logs, "campaign="+m[1]) < e2eThreshold {
		t.Errorf("the refiled campaign %s is not the one the copies' log lines name:\n%s", m[1], logs)
	}
	if err := s.pf.WaitQueueEmpty(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
}

// Dovecot down while the campaign crosses its threshold, then back: the
// copies are moved once it is back, each once.
func TestRefileDovecotDown(t *testing.T) {
	s := startRefile(t)
	for i := 1; i < e2eThreshold; i++ {
		s.send(t, i, true)
	}
	// A copy is in its folder before Dovecot's LMTP answers Postfix: stopped
	// in between, Postfix would deliver it again after the restart, and the
	// move would take both. Stop only once Postfix has its answers.
	if err := s.pf.WaitQueueEmpty(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	s.dc.Stop()
	// The crossing copy: milterd judges it while Postfix cannot deliver it.
	s.send(t, e2eThreshold, false)
	waitRefileMetric(t, s.d, `bulkmilter_messages_total{verdict="bulk"}`, 1)
	waitRefileMetric(t, s.d, "bulkmilter_refile_queue_copies", e2eThreshold-1)
	// At least one attempt failed against the stopped Dovecot.
	deadline := time.Now().Add(5 * time.Minute)
	for !strings.Contains(s.d.Logs(), "will retry") {
		if time.Now().After(deadline) {
			t.Fatalf("no failed attempt while Dovecot was down:\n%s", s.d.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := s.d.metric(t, "bulkmilter_refiled_total"); got != 0 {
		t.Fatalf("refiled %v copies while Dovecot was down", got)
	}
	if err := s.dc.Restart(); err != nil {
		t.Fatal(err)
	}
	waitRefileMetric(t, s.d, "bulkmilter_refiled_total", e2eThreshold-1)
	waitRefileMetric(t, s.d, "bulkmilter_refile_queue_copies", 0)
	if err := s.pf.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= e2eThreshold; i++ {
		folderOf(t, s.dc, recipientAddr(i), fmt.Sprintf("<news-%d@", i))
		if got := s.where(t, recipientAddr(i), fmt.Sprintf("<news-%d@", i)); fmt.Sprint(got) != fmt.Sprint(map[string]int{"Bulk": 1}) {
			t.Errorf("copy %d: in %v, want Bulk once", i, got)
		}
	}
	if t.Failed() {
		t.Logf("--- milterd log ---\n%s\n--- dovecot log ---\n%s", s.d.Logs(), s.dc.LogTail(20000))
	}
	if got := s.d.metric(t, "bulkmilter_refile_failed_total"); got != 0 {
		t.Errorf("failed_total = %v, want 0", got)
	}
}
