package detect

import (
	"reflect"
	"testing"

	"github.com/bulkmilter/bulkmilter/declared"
)

// Authentication-Results of the site's authserv-id count at the top of
// the header, where a verifier milter before this one inserts them, and are
// forged below; other authserv-ids are neither.
func TestBuilderAuthResults(t *testing.T) {
	raw := "Authentication-Results: mx.example.test; spf=pass smtp.mailfrom=a.example\r\n" +
		"Authentication-Results: other.example; dkim=pass header.d=a.example\r\n" +
		"Authentication-Results: MX.example.test;\r\n\tdkim=pass header.d=a.example\r\n" +
		"X-Bulk-Level: 0\r\n" +
		"Authentication-Results: mx.example.test; dkim=pass header.d=forged.example\r\n" +
		"From: a@a.example\r\n" +
		"Authentication-Results: other.example; none\r\n" +
		"Authentication-Results: (c) mx.example.test; dkim=pass\r\n" +
		"\r\nbody\r\n"
	b := NewBuilder(DefaultLimits, "X-Bulk", "X-Bulk-Feedback")
	b.AuthservID, b.LevelHeader = "mx.example.test", "X-Bulk-Level"
	b.ReadRaw([]byte(raw))
	want := []string{"mx.example.test; spf=pass smtp.mailfrom=a.example", "MX.example.test;\tdkim=pass header.d=a.example"}
	if got := b.Message().AuthResults; !reflect.DeepEqual(got, want) {
		t.Errorf("trusted %q, want %q", got, want)
	}
	if got := b.ForgedResults(); !reflect.DeepEqual(got, []int{4, 6}) {
		t.Errorf("forged %v, want [4 6]", got)
	}
	if b.LevelHeaders() != 1 {
		t.Errorf("level headers %d, want 1", b.LevelHeaders())
	}
	b.Reset()
	if len(b.ForgedResults())+len(b.Message().AuthResults)+b.LevelHeaders() != 0 {
		t.Error("Reset kept the results")
	}

	// Without an authserv-id nothing is trusted and nothing is forged.
	b = NewBuilder(DefaultLimits, "X-Bulk", "X-Bulk-Feedback")
	b.ReadRaw([]byte(raw))
	if len(b.Message().AuthResults) != 0 || len(b.ForgedResults()) != 0 {
		t.Errorf("no authserv-id: trusted %q, forged %v", b.Message().AuthResults, b.ForgedResults())
	}
}

// The engine judges declared bulk on the trusted results.
func TestCheckDeclared(t *testing.T) {
	f := newFixture(t)
	sig := "v=1; d=news.example; s=s1; h=From:Subject:List-Unsubscribe:List-Unsubscribe-Post; b=AbCdEfGh123"
	for _, tc := range []struct {
		trusted []string
		kind    string
	}{
		{[]string{"mx.example.test; dkim=pass header.d=news.example header.b=AbCdEfGh"}, KindDeclared},
		{[]string{"mx.example.test; dkim=fail header.d=news.example header.b=AbCdEfGh"}, KindUndeclared},
		{nil, KindUndeclared},
	} {
		msg := newsletter("garden", recipients("d", 20)...)
		msg.Header.Add("DKIM-Signature", sig)
		msg.Header.Add("List-Unsubscribe", "<https://news.example/u>")
		msg.Header.Add("List-Unsubscribe-Post", "List-Unsubscribe=One-Click")
		msg.AuthResults = tc.trusted
		v := f.check(msg)
		if v.Kind() != tc.kind {
			t.Errorf("trusted %q: kind %s, want %s (%+v)", tc.trusted, v.Kind(), tc.kind, v.Declared)
		}
	}
}

// actions.except_senders judged on a raw message as the milter builds it:
// only the site's verifier's field at the top exempts; one of another
// authserv-id, or of the site's below another field, is not the
// verifier's.
func TestExemptSenderFromRaw(t *testing.T) {
	list := declared.NewSenders([]string{"partner.example"})
	const pass = "Authentication-Results: mx.example.test; dkim=pass header.d=partner.example\r\n"
	for _, tc := range []struct {
		name, head string
		want       string
	}{
		{"verifier's pass on top", pass + "Received: by mx\r\nFrom: p@partner.example\r\n", "partner.example"},
		{"pass below another field", "Received: by mx\r\n" + pass + "From: p@partner.example\r\n", ""},
		{"pass of another authserv-id", "Authentication-Results: mx.other.test; dkim=pass header.d=partner.example\r\nFrom: p@partner.example\r\n", ""},
		{"forged pass below the verifier's fail", "Authentication-Results: mx.example.test; dkim=fail header.d=partner.example\r\nFrom: p@partner.example\r\n" + pass, ""},
		{"verifier's pass, From elsewhere", pass + "From: p@spam.example\r\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder(DefaultLimits, "X-Bulk", "X-Bulk-Feedback")
			b.AuthservID = "mx.example.test"
			b.ReadRaw([]byte(tc.head + "Subject: s\r\n\r\nbody\r\n"))
			msg := b.Message()
			if got, _ := list.Exempt(&msg.Header, msg.AuthResults); got != tc.want {
				t.Errorf("exempt by %q, want %q", got, tc.want)
			}
		})
	}
}
