//go:build linux

package deploy_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// The MTA and delivery snippets (Postfix main.cf lines, Sendmail .mc
// lines, Sieve), each run as the page has it in the real program in front
// of, or behind, a real milterd.

// milterd is the real daemon, started from a configuration file.
type milterd struct {
	cmd  *exec.Cmd
	out  testenv.SyncBuffer
	done chan struct{}
}

// startMilterd runs milterd listening on listen with extra configuration
// and waits until it is ready (/readyz).
func startMilterd(t *testing.T, listen, extra string) *milterd {
	t.Helper()
	dir := t.TempDir()
	metrics := testenv.FreeAddr(t)
	cfg := filepath.Join(dir, "bulkmilter.yml")
	body := fmt.Sprintf("listen: %s\nmetrics_listen: %s\ndata_dir: %s\n%s", listen, metrics, dir, extra)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &milterd{done: make(chan struct{})}
	d.cmd = exec.Command(milterdBin(t), "run", "-config", cfg)
	d.cmd.Stdout, d.cmd.Stderr = &d.out, &d.out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(d.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-d.done:
			t.Fatalf("milterd exited at start:\n%s", d.out.String())
		default:
		}
		resp, err := http.Get("http://" + metrics + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("milterd not ready after 30s: %v\n%s", err, d.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the daemon (SIGTERM, then SIGKILL) and waits for it.
func (d *milterd) stop() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// testMessage is a small newsletter with a unique Message-ID.
func testMessage(id, to string) []byte {
	return []byte(fmt.Sprintf("From: news@garden.example\r\nTo: %s\r\nSubject: Spring planting guide\r\nMessage-ID: <%s@garden.example>\r\n\r\n"+
		"Spring is the season to prepare your vegetable garden. This week we explain how to test the soil,\r\n"+
		"when to sow tomatoes and peppers indoors, and how to protect young seedlings from late frost.\r\n"+
		"Our experts compare raised beds with traditional rows and recommend compost for heavy clay.\r\n", to, id))
}

// delivered waits for the message with the Message-ID id in a sink and
// returns its X-Bulk fields.
func delivered(t *testing.T, sink *testenv.Sink, id string, log func() string) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, m := range sink.Messages() {
			parsed, err := mail.ReadMessage(bytes.NewReader(m.Data))
			if err != nil {
				t.Fatalf("delivered message does not parse: %v", err)
			}
			if parsed.Header.Get("Message-Id") == "<"+id+"@garden.example>" {
				return parsed.Header["X-Bulk"]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not delivered within 60s\n%s", id, log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mainCF parses main.cf lines as Postfix does: "name = value", a line
// starting with white space continues the previous one, a line whose first
// non-space character is "#" is a comment. There are no end-of-line
// comments: what follows a value belongs to it.
func mainCF(text string) (map[string]string, error) {
	params := map[string]string{}
	var last string
	for n, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			continue
		case line[0] == ' ' || line[0] == '\t':
			if last == "" {
				return nil, fmt.Errorf("line %d: continuation without a parameter", n+1)
			}
			params[last] += " " + trimmed
		default:
			name, value, ok := strings.Cut(line, "=")
			if !ok {
				return nil, fmt.Errorf("line %d: not name = value: %q", n+1, line)
			}
			last = strings.TrimSpace(name)
			params[last] = strings.TrimSpace(value)
		}
	}
	return params, nil
}

// The Postfix snippets of the README and the docs, and
// deploy/postfix/main.cf, each as main.cf lines of a real Postfix in front
// of a real milterd: mail through smtpd (smtpd_milters) and submitted
// locally (non_smtpd_milters) arrives tagged; with milter_default_action
// set, mail still arrives, untagged, once the daemon is stopped. The
// milter address of a snippet is the only thing replaced: the default TCP
// socket by a free port, /var/spool/postfix by the test Postfix's queue
// directory. smtpd runs chrooted in the queue directory, as on Debian, so
// a unix socket must be named by its path inside the chroot.
func TestPostfixSnippets(t *testing.T) {
	testenv.RequireRoot(t, "Postfix runs its daemons as the postfix user")
	file, err := os.ReadFile("postfix/main.cf")
	if err != nil {
		t.Fatal(err)
	}
	snips := append(snippetsOf(t, "postfix-main.cf"), snippet{doc: "deploy/postfix/main.cf", line: 1, kind: "postfix-main.cf", text: string(file)})
	for _, s := range snips {
		t.Run(s.name(), func(t *testing.T) {
			params, err := mainCF(s.text)
			if err != nil {
				t.Fatalf("%v: %v", s, err)
			}
			tcp := testenv.FreeAddr(t)
			for _, name := range []string{"smtpd_milters", "non_smtpd_milters"} {
				v, ok := params[name]
				if !ok {
					continue
				}
				v = strings.ReplaceAll(v, "inet:127.0.0.1:7357", "inet:"+tcp)
				v = strings.ReplaceAll(v, "unix:/var/spool/postfix/", "unix:$queue_directory/")
				for _, m := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
					if !strings.HasPrefix(m, "$") && m != "inet:"+tcp && m != "unix:/bulkmilter/milter.sock" && m != "unix:$queue_directory/bulkmilter/milter.sock" {
						t.Errorf("%v: %s names %q, a milter this test does not know (the daemon's default is inet:127.0.0.1:7357)", s, name, m)
					}
				}
				params[name] = v
			}
			if t.Failed() {
				return
			}
			// smtpd chrooted in the queue directory, as Debian runs it.
			pf := testenv.StartPostfix(t, testenv.PostfixOptions{Main: params, Chroot: true})
			listen := "inet:" + tcp
			extra := ""
			if strings.Contains(params["smtpd_milters"]+params["non_smtpd_milters"], "unix:") {
				dir := filepath.Join(pf.QueueDir(), "bulkmilter")
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				// The socket's group lets Postfix's processes (user postfix)
				// in, as the group bulkmilter does in production.
				listen, extra = "unix:"+filepath.Join(dir, "milter.sock"), "socket:\n  group: postfix\n"
			}
			d := startMilterd(t, listen, extra)
			logs := func() string { return "postfix log:\n" + pf.Log() + "\nmilterd log:\n" + d.out.String() }

			send := map[string]func(id string) error{
				"smtpd_milters": func(id string) error {
					return pf.Send("news@garden.example", []string{"ann@example.test"}, testMessage(id, "ann@example.test"))
				},
				"non_smtpd_milters": func(id string) error {
					return pf.Submit("news@garden.example", []string{"ann@example.test"}, testMessage(id, "ann@example.test"))
				},
			}
			var via []string
			for _, name := range []string{"smtpd_milters", "non_smtpd_milters"} {
				if _, ok := params[name]; !ok {
					continue
				}
				via = append(via, name)
				id := "up-" + name
				if err := send[name](id); err != nil {
					t.Fatalf("%v: %s: %v\n%s", s, name, err, logs())
				}
				if v := delivered(t, pf.Sink(), id, logs); len(v) != 1 || !strings.HasPrefix(v[0], "no; ") {
					t.Errorf("%v: mail through %s delivered with X-Bulk %q, want one verdict", s, name, v)
				}
			}
			if len(via) == 0 {
				t.Fatalf("%v sets neither smtpd_milters nor non_smtpd_milters", s)
			}
			if params["milter_default_action"] == "" {
				return
			}
			d.stop()
			for _, name := range via {
				id := "down-" + name
				if err := send[name](id); err != nil {
					t.Fatalf("%v: with the milter down, %s: %v\n%s", s, name, err, logs())
				}
				if v := delivered(t, pf.Sink(), id, logs); len(v) != 0 {
					t.Errorf("%v: with the milter down, mail through %s delivered with X-Bulk %q, want untagged", s, name, v)
				}
			}
		})
	}
}

// The Sendmail snippets, and deploy/sendmail/bulkmilter.mc, in a real
// Sendmail's .mc: mail arrives tagged, and untagged (not refused, not
// delayed) once the daemon is stopped.
func TestSendmailSnippets(t *testing.T) {
	file, err := os.ReadFile("sendmail/bulkmilter.mc")
	if err != nil {
		t.Fatal(err)
	}
	snips := append(snippetsOf(t, "sendmail.mc"), snippet{doc: "deploy/sendmail/bulkmilter.mc", line: 1, kind: "sendmail.mc", text: string(file)})
	for _, s := range snips {
		t.Run(s.name(), func(t *testing.T) {
			const def = "S=inet:7357@127.0.0.1"
			if !strings.Contains(s.text, def) {
				t.Fatalf("%v does not say %s, the daemon's default socket", s, def)
			}
			tcp := testenv.FreeAddr(t)
			host, port, _ := strings.Cut(tcp, ":")
			d := startMilterd(t, "inet:"+tcp, "")
			sm := testenv.StartSendmail(t, testenv.SendmailOptions{MC: []string{strings.ReplaceAll(s.text, def, "S=inet:"+port+"@"+host)}})
			logs := func() string { return "sendmail log:\n" + sm.Log() + "\nmilterd log:\n" + d.out.String() }
			if err := sm.Send("news@garden.example", []string{"ann@example.test"}, testMessage("up", "ann@example.test")); err != nil {
				t.Fatalf("%v: %v\n%s", s, err, logs())
			}
			if v := delivered(t, sm.Sink(), "up", logs); len(v) != 1 || !strings.HasPrefix(v[0], "no; ") {
				t.Errorf("%v: delivered with X-Bulk %q, want one verdict", s, v)
			}
			d.stop()
			if err := sm.Send("news@garden.example", []string{"ann@example.test"}, testMessage("down", "ann@example.test")); err != nil {
				t.Fatalf("%v: with the milter down: %v\n%s", s, err, logs())
			}
			if v := delivered(t, sm.Sink(), "down", logs); len(v) != 0 {
				t.Errorf("%v: with the milter down, delivered with X-Bulk %q, want untagged", s, v)
			}
		})
	}
}

// The Sieve snippets as Dovecot's sieve_before, on mail that came through
// Postfix and milterd (threshold 2): the first copy of a newsletter stays
// in INBOX, the second, tagged bulk, lands in Bulk.
func TestSieveSnippets(t *testing.T) {
	testenv.RequireRoot(t, "Postfix and Dovecot run their daemons as their own users")
	for _, s := range snippetsOf(t, "sieve") {
		t.Run(s.name(), func(t *testing.T) {
			tcp := testenv.FreeAddr(t)
			d := startMilterd(t, "inet:"+tcp, "policy:\n  threshold: 2\n")
			users := []string{"ann@example.test", "bob@example.test"}
			dc := testenv.StartDovecot(t, testenv.DovecotOptions{Users: users, SieveBefore: s.text})
			pf := testenv.StartPostfix(t, testenv.PostfixOptions{MilterAddr: tcp, Transport: "lmtp:inet:" + dc.LMTPAddr()})
			for i, u := range users {
				if err := pf.Send("news@garden.example", []string{u}, testMessage(fmt.Sprint("copy-", i), u)); err != nil {
					t.Fatalf("%v: %v\n%s", s, err, pf.Log())
				}
			}
			for i, want := range []string{"INBOX", "Bulk"} {
				msgs, err := dc.WaitMessages(users[i], want, 1, 60*time.Second)
				if err != nil {
					t.Fatalf("%v: %s: %v\ndovecot log:\n%s\nmilterd log:\n%s", s, users[i], err, dc.Log(), d.out.String())
				}
				if got := string(msgs[0].Data); !strings.Contains(got, fmt.Sprintf("copy-%d@", i)) || !strings.Contains(got, "X-Bulk: "+[]string{"no", "yes"}[i]) {
					t.Errorf("%v: %s's %s holds:\n%s", s, users[i], want, got)
				}
			}
		})
	}
}
