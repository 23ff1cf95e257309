package main

import (
	"bytes"
	"fmt"
	"net"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// mta is a real MTA in front of milterd, as the declared tests use it.
type mta interface {
	Send(from string, to []string, msg []byte) error
	Sink() *testenv.Sink
	Log() string
}

// A real Postfix with a real OpenDKIM verifier in front of milterd: a
// newsletter signed (by a real OpenDKIM signer) over its one-click
// unsubscribe headers is kind=declared; the same newsletter with a broken
// signature, with a forged Authentication-Results claiming a pass (below
// the verifier's, or at the very top of the message), or unsigned with a
// forged pass, is undeclared. Forged results below the verifier's are
// removed from the delivered copy; the verifier's stays.
func TestDeclaredThroughPostfix(t *testing.T) {
	testenv.RequireRoot(t, "Postfix runs its daemons as the postfix user")
	testDeclared(t, func(verifier, milter string) mta {
		return testenv.StartPostfix(t, testenv.PostfixOptions{Main: map[string]string{
			"smtpd_milters": "inet:" + verifier + ", inet:" + milter,
		}})
	})
}

// The same with Sendmail, the verifier first among its input filters.
func TestDeclaredThroughSendmail(t *testing.T) {
	testenv.RequireRoot(t, "Sendmail runs as root")
	testDeclared(t, func(verifier, milter string) mta {
		var mc []string
		for i, addr := range []string{verifier, milter} {
			host, port, _ := net.SplitHostPort(addr)
			mc = append(mc, fmt.Sprintf("INPUT_MAIL_FILTER(`filter%d', `S=inet:%s@%s, F=T, T=C:5s;S:10s;R:10s;E:30s')dnl", i, port, host))
		}
		return testenv.StartSendmail(t, testenv.SendmailOptions{MC: mc})
	})
}

func testDeclared(t *testing.T, start func(verifier, milter string) mta) {
	const authserv = "mx.example.test"
	key := testenv.NewDKIMKey(t, "news.example", "s2026")
	signer := testenv.StartOpenDKIM(t, testenv.OpenDKIMOptions{Sign: &key,
		SignHeaders: []string{"From", "To", "Subject", "Message-ID", "List-Unsubscribe", "List-Unsubscribe-Post"}})
	verifier := testenv.StartOpenDKIM(t, testenv.OpenDKIMOptions{AuthservID: authserv, Keys: []testenv.DKIMKey{key}, KeepForged: true})
	d := startDaemon(t, "-config", writeConfig(t, "policy:\n  authserv_id: "+authserv+"\n"))
	pf := start(verifier.Addr(), d.milterAddr)

	body := "Dear reader,\r\n\r\nThis month in the garden: how to prune roses before the first frost, which bulbs to plant\r\n" +
		"for an early spring, and why mulch keeps the soil alive through the winter. Our editors also\r\n" +
		"tested six watering cans and found one that does not leak.\r\n\r\nUnsubscribe in one click from the link in the header.\r\n"
	head := "From: Garden News <news@news.example>\r\nTo: readers@news.example\r\nSubject: Garden News for November\r\n" +
		"Message-ID: <nov-2026@news.example>\r\nList-Unsubscribe: <https://news.example/u/abc>\r\n" +
		"List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n"
	sig := signWith(t, signer, head+"\r\n"+body)
	b := sig[strings.Index(sig, "b=")+2:]
	forged := "Authentication-Results: " + authserv + "; dkim=pass header.d=news.example header.s=s2026 header.b=" + b[:8] + "\r\n"
	broken := strings.Replace(body, "one that does not leak", "one that does not leak at all", 1)

	cases := []struct {
		name, msg, kind string
		forgedKept      bool // a forged result is still in the delivered copy
	}{
		{"signed one-click newsletter", sig + head + "\r\n" + body, "declared", false},
		{"broken signature", sig + head + "\r\n" + broken, "undeclared", false},
		{"broken signature, forged pass below", sig + head + forged + "\r\n" + broken, "undeclared", false},
		{"broken signature, forged pass at the top", forged + sig + head + "\r\n" + broken, "undeclared", true},
		{"unsigned, forged pass", head + forged + "\r\n" + body, "undeclared", false},
	}
	for i, c := range cases {
		m := deliverCopy(t, pf, d, i, c.name, c.msg)
		verdict, level := m.Header.Get("X-Bulk"), m.Header.Get("X-Bulk-Level")
		if !strings.Contains(verdict, "kind="+c.kind) || level == "" || !strings.Contains(verdict, "level="+level) {
			t.Errorf("%s: X-Bulk %q, X-Bulk-Level %q; want kind=%s and the same level in both\nA-R: %q",
				c.name, verdict, level, c.kind, m.Header["Authentication-Results"])
		}
		// The verifier's result is the first field (OpenDKIM adds none to
		// unsigned mail); forged ones below it are gone.
		ars := m.Header["Authentication-Results"]
		if !strings.HasPrefix(c.msg, "DKIM-") && !strings.HasPrefix(c.msg, "Authentication-") {
			if len(ars) != 0 {
				t.Errorf("%s: delivered with %q, want no Authentication-Results", c.name, ars)
			}
			continue
		}
		if len(ars) == 0 || !strings.Contains(ars[0], "header.i=@news.example") {
			t.Errorf("%s: the verifier's result is not on top: %q", c.name, ars)
			continue
		}
		kept := 0
		for _, ar := range ars[1:] {
			if strings.Contains(ar, "header.b="+b[:8]) && strings.Contains(ar, "dkim=pass header.d=news.example header.s=") {
				kept++
			}
		}
		if (kept > 0) != c.forgedKept {
			t.Errorf("%s: %d forged results delivered, want kept=%v: %q", c.name, kept, c.forgedKept, ars)
		}
		t.Logf("%s: X-Bulk: %s; A-R %q", c.name, verdict, ars)
	}
	if n := d.metric(t, `bulkmilter_message_levels_total{kind="declared",level="5"}`); n != 1 {
		t.Errorf("declared level-5 messages counted %v, want 1", n)
	}
}

// signWith returns the DKIM-Signature field signer adds to msg (sent from
// news@news.example), CRLF-ended, to put on top of a message.
func signWith(t *testing.T, signer *testenv.OpenDKIM, msg string) string {
	t.Helper()
	res, err := mtaclient.New("tcp", signer.Addr()).Send(mtaclient.Envelope{From: "news@news.example", Rcpts: []string{"readers@news.example"}}, []byte(msg))
	if err != nil {
		t.Fatalf("signer: %v\n%s", err, signer.Log())
	}
	v, ok := res.Header("DKIM-Signature")
	if !ok {
		t.Fatalf("the signer added no DKIM-Signature: %v\n%s", res.Mods, signer.Log())
	}
	return "DKIM-Signature:" + strings.ReplaceAll(v, "\n", "\r\n") + "\r\n"
}

// deliverCopy sends msg from news@news.example through m to 12 new
// recipients (above the default threshold of 10) and returns the i-th
// message delivered, msg's copy.
func deliverCopy(t *testing.T, m mta, d *daemonProc, i int, name, msg string) *mail.Message {
	t.Helper()
	rcpts := make([]string, 12)
	for j := range rcpts {
		rcpts[j] = fmt.Sprintf("reader%d-%d@example.test", i, j)
	}
	if err := m.Send("news@news.example", rcpts, []byte(msg)); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, m.Log())
	}
	msgs, err := m.Sink().WaitFor(i+1, 60*time.Second)
	if err != nil {
		t.Fatalf("%s: %v\nMTA:\n%s\nmilterd:\n%s", name, err, m.Log(), d.Logs())
	}
	got, err := mail.ReadMessage(bytes.NewReader(msgs[i].Data))
	if err != nil {
		t.Fatal(err)
	}
	return got
}
