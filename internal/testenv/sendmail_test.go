package testenv

import (
	"bytes"
	"errors"
	"net/textproto"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestSendmailDelivers(t *testing.T) {
	start := time.Now()
	s := StartSendmail(t, SendmailOptions{})
	t.Logf("sendmail start-up (m4 + daemon + first banner): %v", time.Since(start))
	to := []string{"alice@example.test", "bob@elsewhere.test"}
	if err := s.Send("sender@example.org", to, testMessage("sendmail-test")); err != nil {
		t.Fatalf("Send: %v\n%s", err, s.Log())
	}
	msgs, err := s.Sink().WaitFor(1, 30*time.Second)
	if err != nil {
		t.Fatalf("%v\n%s", err, s.Log())
	}
	var rcpts []string
	for _, m := range s.Sink().Messages() {
		if m.From != "sender@example.org" {
			t.Errorf("envelope from %q, want sender@example.org", m.From)
		}
		if !bytes.Contains(m.Data, []byte("Subject: sendmail-test")) || !bytes.Contains(m.Data, []byte("by "+sendmailHostname)) {
			t.Errorf("delivered data lacks the subject or Sendmail's Received header:\n%s", m.Data)
		}
		rcpts = append(rcpts, m.To...)
	}
	sort.Strings(rcpts)
	if len(msgs) == 0 || strings.Join(rcpts, ",") != strings.Join(to, ",") {
		t.Fatalf("recipients delivered = %v, want %v", rcpts, to)
	}
	s.Stop()
	if s.Running() || !portFree(s.port) {
		t.Fatalf("after Stop: Running() = %v, port %d free = %v", s.Running(), s.port, portFree(s.port))
	}
}

// With F=T, an unreachable milter makes Sendmail tempfail the message:
// proof that the filter is wired in.
func TestSendmailMilterUnreachable(t *testing.T) {
	s := StartSendmail(t, SendmailOptions{MilterAddr: FreeAddr(t)})
	err := s.Send("sender@example.org", []string{"alice@example.test"}, testMessage("no-milter"))
	var te *textproto.Error
	if !errors.As(err, &te) || te.Code/100 != 4 {
		t.Fatalf("Send with the milter down: err = %v, want a 4xx reply", err)
	}
}
