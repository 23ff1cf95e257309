package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	milter "github.com/d--j/go-milter"

	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// actions.except_senders: a campaign past the threshold whose copies carry
// the site's verifier's dkim=pass of a listed domain, aligned with From,
// stays "no; …; exempt=sender", unrouted, and is still counted: the same
// campaign's copies without that pass (none, a pass the sender wrote below
// other fields, a pass of the spammer's own domain, another authserv-id)
// are tagged, from the volume the exempt copies built. A reload that
// empties the list tags the next exempt-looking copy.
func TestExceptSenders(t *testing.T) {
	const authserv = "mx.site.test"
	cfgPath := filepath.Join(t.TempDir(), "bulkmilter.yml")
	base := "policy:\n  authserv_id: " + authserv + "\nactions:\n  subject_tag: \"[BULK]\"\n  recipient_detail: Bulk\n"
	writeFile(t, cfgPath, base+"  except_senders: [garden.example]\n")
	d := startDaemon(t, "-config", cfgPath)
	cl := mtaclient.New("tcp", d.milterAddr)
	rng := rand.New(rand.NewPCG(3, 4))

	trusted := "Authentication-Results: " + authserv + "; dkim=pass header.d=garden.example header.s=s1 header.b=abcdefgh\n"
	send := func(i int, top, below string) (verdict string, routed bool) {
		t.Helper()
		rcpt := recipientAddr(i)
		raw := string(hashBusterCopy(i, rcpt, recipientName(i), rng))
		head, body, _ := strings.Cut(raw, "\n\n")
		res, err := cl.Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{rcpt}}, []byte(top+head+"\n"+below+"\n"+body))
		if err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
		for _, m := range res.Mods {
			if m.Type == milter.ActionAddRcpt || m.Type == milter.ActionDelRcpt || m.Type == milter.ActionQuarantine ||
				(m.HeaderName == "Subject" && strings.HasPrefix(m.HeaderValue, "[BULK]")) {
				routed = true
			}
		}
		level, _ := res.Header("X-Bulk-Level")
		return verdictOf(t, res) + " | level " + level, routed
	}

	const threshold, exempt = 10, 15 // threshold: the default policy.threshold
	for i := 1; i <= exempt; i++ {
		v, routed := send(i, trusted, "")
		if !strings.HasPrefix(v, "no;") || !strings.Contains(v, "; exempt=sender") || routed {
			t.Errorf("exempt copy %d: %q, routed %v; want no; …; exempt=sender, not routed", i, v, routed)
		}
		if i >= threshold && (!strings.Contains(v, fmt.Sprintf("volume=%d;", i)) || !strings.HasSuffix(v, "| level 4")) {
			t.Errorf("exempt copy %d: %q; want it counted (volume=%d) and level 4, below the bulk levels", i, v, i)
		}
	}

	// The same campaign without the verifier's pass: tagged at once, on
	// the volume the exempt copies built.
	forgedBelow := "Authentication-Results: " + authserv + "; dkim=pass header.d=garden.example\n"
	for i, c := range []struct{ name, top, below string }{
		{"no Authentication-Results", "", ""},
		{"a pass the sender wrote below other fields", "", forgedBelow},
		{"a pass of another authserv-id", "Authentication-Results: mx.spam.test; dkim=pass header.d=garden.example\n", ""},
		{"the spammer's own domain's pass", "Authentication-Results: " + authserv + "; dkim=pass header.d=spam.example\n", ""},
		{"a fail", "Authentication-Results: " + authserv + "; dkim=fail header.d=garden.example\n", ""},
	} {
		v, routed := send(exempt+1+i, c.top, c.below)
		if !strings.HasPrefix(v, "yes;") || strings.Contains(v, "exempt") || !routed {
			t.Errorf("%s: %q, routed %v; want tagged and routed", c.name, v, routed)
		}
	}
	// A From not aligned with the listed signer: another copy of the
	// campaign under a From the sender chose.
	rcpt := recipientAddr(100)
	raw := strings.Replace(string(hashBusterCopy(100, rcpt, recipientName(100), rng)), "<news@garden.example>", "<news@garden-news.example>", 1)
	res, err := cl.Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{rcpt}}, []byte(trusted+raw))
	if err != nil {
		t.Fatal(err)
	}
	if v := verdictOf(t, res); !strings.HasPrefix(v, "yes;") {
		t.Errorf("From not aligned with the signer: %q, want tagged", v)
	}

	if got := d.metric(t, `bulkmilter_sender_exempt_messages_total{verdict="bulk"}`); got != exempt-threshold+1 {
		t.Errorf("sender_exempt_messages_total{verdict=bulk} = %v, want %d", got, exempt-threshold+1)
	}
	if got := d.metric(t, `bulkmilter_sender_exempt_messages_total{verdict="not_bulk"}`); got != threshold-1 {
		t.Errorf("sender_exempt_messages_total{verdict=not_bulk} = %v, want %d", got, threshold-1)
	}
	if logs := d.Logs(); !strings.Contains(logs, "exempt_sender=garden.example") {
		t.Errorf("no message line says exempt_sender=garden.example:\n%s", logs)
	}

	// A reload that empties the list: the next trusted copy is tagged.
	writeFile(t, cfgPath, base)
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitMetric(t, `bulkmilter_config_reloads_total{result="success"}`, 1)
	if v, routed := send(200, trusted, ""); !strings.HasPrefix(v, "yes;") || !routed {
		t.Errorf("after a reload without except_senders: %q, routed %v; want tagged and routed", v, routed)
	}
}

// actions.except_senders behind a real Postfix and a real OpenDKIM
// verifier, with messages signed by a real OpenDKIM signer: a listed
// domain's newsletter to more recipients than the threshold is not
// tagged; the same with its signature broken, signed by the spammer's own
// domain under the listed From, or unsigned with a forged pass at the top
// of the message (below Postfix's Received) is tagged.
func TestExceptSendersThroughOpenDKIM(t *testing.T) {
	testenv.RequireRoot(t, "Postfix runs its daemons as the postfix user")
	const authserv = "mx.example.test"
	news := testenv.NewDKIMKey(t, "news.example", "s2026")
	spam := testenv.NewDKIMKey(t, "spam.example", "s1")
	hdrs := []string{"From", "To", "Subject", "Message-ID"}
	signers := map[string]*testenv.OpenDKIM{
		"news": testenv.StartOpenDKIM(t, testenv.OpenDKIMOptions{Sign: &news, SignHeaders: hdrs}),
		"spam": testenv.StartOpenDKIM(t, testenv.OpenDKIMOptions{Sign: &spam, SignHeaders: hdrs, SenderHeaders: []string{"Sender"}}),
	}
	verifier := testenv.StartOpenDKIM(t, testenv.OpenDKIMOptions{AuthservID: authserv, Keys: []testenv.DKIMKey{news, spam}})
	d := startDaemon(t, "-config", writeConfig(t, "policy:\n  authserv_id: "+authserv+"\nactions:\n  except_senders: [news.example]\n"))
	pf := testenv.StartPostfix(t, testenv.PostfixOptions{Main: map[string]string{
		"smtpd_milters": "inet:" + verifier.Addr() + ", inet:" + d.milterAddr,
	}})

	head := "From: Garden News <news@news.example>\r\nSender: bulk@spam.example\r\nTo: readers@news.example\r\nSubject: Garden News for November\r\n" +
		"Message-ID: <nov-2026@news.example>\r\n"
	body := "Dear reader,\r\n\r\nThis month in the garden: how to prune roses before the first frost, which bulbs to plant\r\n" +
		"for an early spring, and why mulch keeps the soil alive through the winter. Our editors also\r\n" +
		"tested six watering cans and found one that does not leak.\r\n"
	sigNews, sigSpam := signWith(t, signers["news"], head+"\r\n"+body), signWith(t, signers["spam"], head+"\r\n"+body)
	broken := strings.Replace(body, "does not leak", "does not leak at all", 1)
	forged := "Authentication-Results: " + authserv + "; dkim=pass header.d=news.example\r\n"

	for i, c := range []struct {
		name, msg string
		exempt    bool
	}{
		{"signed by the listed domain", sigNews + head + "\r\n" + body, true},
		{"the listed domain's signature broken", sigNews + head + "\r\n" + broken, false},
		{"signed by the spammer's own domain, the listed From", sigSpam + head + "\r\n" + body, false},
		{"unsigned, a forged pass on top", forged + head + "\r\n" + body, false},
	} {
		m := deliverCopy(t, pf, d, i, c.name, c.msg)
		v, level := m.Header.Get("X-Bulk"), m.Header.Get("X-Bulk-Level")
		ars := m.Header["Authentication-Results"]
		if c.exempt && (!strings.HasPrefix(v, "no;") || !strings.Contains(v, "; exempt=sender") || level >= "5") {
			t.Errorf("%s: X-Bulk %q, level %s; want no; …; exempt=sender below level 5\nA-R: %q", c.name, v, level, ars)
		}
		if !c.exempt && (!strings.HasPrefix(v, "yes;") || strings.Contains(v, "exempt")) {
			t.Errorf("%s: X-Bulk %q; want yes\nA-R: %q", c.name, v, ars)
		}
		t.Logf("%s: X-Bulk: %s; A-R %q", c.name, v, ars)
	}
	if n := d.metric(t, `bulkmilter_sender_exempt_messages_total{verdict="bulk"}`); n != 1 {
		t.Errorf("sender_exempt_messages_total{verdict=bulk} = %v, want 1", n)
	}
}
