package testenv

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

const bulkSieve = `require ["fileinto", "mailbox"];
if header :matches "X-Bulk" "yes*" {
  fileinto :create "Bulk";
  stop;
}
`

func verdictMessage(verdict, id string) []byte {
	return []byte("From: news@shop.example\r\nTo: someone@example.test\r\nSubject: " + id +
		"\r\nMessage-ID: <" + id + "@shop.example>\r\nX-Bulk: " + verdict + "\r\n\r\nHello.\r\n")
}

// Sieve files by the verdict header, the detail mailbox files by the
// recipient's +detail, unknown users are refused, and a user's own script
// runs after sieve_before.
func TestDovecotSieveAndDetail(t *testing.T) {
	d := StartDovecot(t, DovecotOptions{
		SieveBefore:         bulkSieve,
		SaveToDetailMailbox: true,
		UserSieve: map[string]string{"carol@example.test": `require ["fileinto", "mailbox"];
if header :contains "Subject" "invoice" { fileinto :create "Invoices"; }
`},
	})
	if err := d.Deliver("news@shop.example", []string{"alice@example.test", "bob@example.test"}, verdictMessage("yes; family=imatch; volume=12", "bulk1")); err != nil {
		t.Fatal(err)
	}
	if err := d.Deliver("friend@example.org", []string{"alice@example.test"}, verdictMessage("no; family=imatch; volume=1", "ham1")); err != nil {
		t.Fatal(err)
	}
	if err := d.Deliver("news@shop.example", []string{"bob+Bulk@example.test"}, verdictMessage("no; unsigned", "detail1")); err != nil {
		t.Fatal(err)
	}
	if err := d.Deliver("billing@power.example", []string{"carol@example.test"}, verdictMessage("no", "invoice-1")); err != nil {
		t.Fatal(err)
	}
	err := d.Deliver("x@example.org", []string{"nobody@example.test"}, verdictMessage("no", "nobody"))
	if err == nil || !strings.Contains(err.Error(), "550") {
		t.Errorf("delivery to an unknown user: err = %v, want a 550 refusal", err)
	}

	want := map[string]map[string][]string{
		"alice@example.test": {"INBOX": {"ham1"}, "Bulk": {"bulk1"}},
		"bob@example.test":   {"INBOX": nil, "Bulk": {"bulk1", "detail1"}},
		"carol@example.test": {"INBOX": nil, "Invoices": {"invoice-1"}},
	}
	for u, folders := range want {
		for f, subjects := range folders {
			msgs, err := d.Messages(u, f)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range msgs {
				got = append(got, subjectOf(m.Data))
			}
			if strings.Join(got, ",") != strings.Join(subjects, ",") {
				t.Errorf("%s/%s holds %q, want %q\n%s", u, f, got, subjects, d.Log())
			}
		}
	}
	folders, err := d.Folders("alice@example.test")
	if err != nil || strings.Join(folders, ",") != "INBOX,Bulk" {
		t.Errorf("Folders(alice) = %q, %v; want [INBOX Bulk]", folders, err)
	}
}

func TestDeliveredBefore(t *testing.T) {
	names := []string{"1795347851.M99P1.vm,S=1", "1795347851.M677677P1.vm", "1795347850.M900000P1.vm", "1795347851.M100P1.vm:2,S"}
	sort.Slice(names, func(i, j int) bool { return deliveredBefore(names[i], names[j]) })
	want := "1795347850.M900000P1.vm 1795347851.M99P1.vm,S=1 1795347851.M100P1.vm:2,S 1795347851.M677677P1.vm"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func subjectOf(msg []byte) string {
	for _, l := range strings.Split(string(msg), "\n") {
		if s, ok := strings.CutPrefix(strings.TrimRight(l, "\r"), "Subject: "); ok {
			return s
		}
	}
	return ""
}

// IMAP logins work with the test password, and MOVE changes the maildirs;
// imapsieve runs a caller's script (with a pipe program from Files) when a
// message is moved into the configured mailbox.
func TestDovecotIMAPSieveMove(t *testing.T) {
	out := filepath.Join(t.TempDir(), "piped")
	if err := os.Chmod(filepath.Dir(out), 0o777); err != nil {
		t.Fatal(err)
	}
	d := StartDovecot(t, DovecotOptions{
		SieveBefore: bulkSieve,
		IMAPSieve:   true,
		Files: map[string]string{
			"not-bulk.sieve": `require ["vnd.dovecot.pipe", "copy", "imapsieve", "environment"];
pipe :copy "record.sh";
`,
			"record.sh": "#!/bin/sh\ncat >> " + out + "\n",
		},
		Plugin: map[string]string{
			"imapsieve_mailbox1_name":   "INBOX",
			"imapsieve_mailbox1_from":   "Bulk",
			"imapsieve_mailbox1_causes": "COPY",
			"imapsieve_mailbox1_before": "file:{{files}}/not-bulk.sieve",
			"sieve_pipe_bin_dir":        "{{files}}",
			"sieve_global_extensions":   "+vnd.dovecot.pipe +vnd.dovecot.environment",
		},
	})
	if err := d.Deliver("news@shop.example", []string{"alice@example.test"}, verdictMessage("yes; family=sift; volume=40", "moved")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WaitMessages("alice@example.test", "Bulk", 1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c := d.IMAP(t, "alice@example.test")
	if n, err := c.Select("Bulk"); err != nil || n != 1 {
		t.Fatalf("SELECT Bulk = %d, %v; want 1 message", n, err)
	}
	if err := c.Move("1", "INBOX"); err != nil {
		t.Fatal(err)
	}
	inbox, err := d.WaitMessages("alice@example.test", "INBOX", 1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if subjectOf(inbox[0].Data) != "moved" {
		t.Errorf("INBOX holds %q after MOVE", subjectOf(inbox[0].Data))
	}
	if bulk, _ := d.Messages("alice@example.test", "Bulk"); len(bulk) != 0 {
		t.Errorf("Bulk still holds %d messages after MOVE", len(bulk))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		piped, _ := os.ReadFile(out)
		if bytes.Contains(piped, []byte("Subject: moved")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("imapsieve did not pipe the moved message; got %q\n%s", piped, d.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}

	bad, err := DialIMAP(d.IMAPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.Cmd("LOGIN %s %s", Quote("alice@example.test"), Quote("wrong")); err == nil {
		t.Error("IMAP login with a wrong password succeeded")
	}
}

// Postfix hands mail to Dovecot over LMTP when Transport points at it.
func TestPostfixToDovecot(t *testing.T) {
	d := StartDovecot(t, DovecotOptions{SaveToDetailMailbox: true, DisableSieve: true})
	p := StartPostfix(t, PostfixOptions{Transport: "lmtp:inet:" + d.LMTPAddr()})
	if err := p.Send("sender@example.org", []string{"alice@example.test", "bob+Bulk@example.test"}, testMessage("via-postfix")); err != nil {
		t.Fatalf("%v\n%s", err, p.Log())
	}
	for _, c := range []struct{ user, folder string }{{"alice@example.test", "INBOX"}, {"bob@example.test", "Bulk"}} {
		msgs, err := d.WaitMessages(c.user, c.folder, 1, 20*time.Second)
		if err != nil {
			t.Fatalf("%v\n--- postfix log ---\n%s", err, p.Log())
		}
		if !bytes.Contains(msgs[0].Data, []byte("Subject: via-postfix")) {
			t.Errorf("%s/%s: unexpected message\n%s", c.user, c.folder, msgs[0].Data)
		}
	}
	if err := p.WaitQueueEmpty(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// Messages lists every message once while Dovecot renames the files: from
// new/ to cur/ when a session first sees them, and within cur/ when their
// flags change. Here a goroutine does those renames as fast as it can; a
// listing that walked new/ and then cur/ counted a file moved between the
// two walks twice, and missed one renamed between a walk and its read; a
// single directory read also missed, once in CI (~10⁵ listings), a file
// renamed within cur/ while it was read.
func TestMessagesWhileRenamed(t *testing.T) {
	d := &Dovecot{dir: t.TempDir()}
	const user, n = "alice@example.test", 20
	box := d.Maildir(user)
	for _, sub := range []string{"new", "cur", "tmp"} {
		if err := os.MkdirAll(filepath.Join(box, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("1764250000.M%dP42.host,S=10,W=10", i)
		if err := os.WriteFile(filepath.Join(box, "new", names[i]), []byte("Subject: x\n\nhi\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		// Each file: new/ to cur/, then its flags change back and forth.
		flags := []string{":2,", ":2,S", ":2,ST", ":2,S"}
		var err error
		defer func() { done <- err }()
		for i := 0; ; i++ {
			name := names[i%n]
			if err = os.Rename(filepath.Join(box, "new", name), filepath.Join(box, "cur", name+flags[0])); err != nil && !os.IsNotExist(err) {
				return
			}
			from := filepath.Join(box, "cur", name+flags[(i/n)%len(flags)])
			to := filepath.Join(box, "cur", name+flags[(i/n+1)%len(flags)])
			if err = os.Rename(from, to); err != nil && !os.IsNotExist(err) {
				return
			}
			err = nil
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("renamer: %v", err)
		}
	}()
	for range 1000 {
		msgs, err := d.Messages(user, "INBOX")
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != n {
			var got []string
			for _, m := range msgs {
				got = append(got, strings.TrimPrefix(m.Path, box))
			}
			t.Fatalf("Messages listed %d files while they were renamed, want %d:\n%s", len(msgs), n, strings.Join(got, "\n"))
		}
	}
}
