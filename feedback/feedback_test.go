package feedback

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message/textproto"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkmilter/bulkmilter/bundled"
	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/mailtext"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// newEngine builds the daemon's pipeline from a configuration, with the
// bundled lexicon, over a real in-memory embedded store.
func newEngine(t testing.TB, cfg *config.Config) (*detect.Engine, *store.Embedded) {
	t.Helper()
	lex, err := bundled.Lexicon()
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Signatures.SetParams()
	p.Lexicon = lex
	if p.Secret, err = signature.NewSecret([]byte("feedback test secret, not for production")); err != nil {
		t.Fatal(err)
	}
	set, err := signature.NewSet(p)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenEmbedded(store.EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	th := map[signature.Family]int{}
	for _, s := range set.Signers() {
		th[s.Family()] = cfg.ThresholdFor(s.Family().String())
	}
	e, err := detect.New(detect.Options{
		Limits:         testLimits(cfg),
		Set:            set,
		Store:          st,
		Thresholds:     th,
		StripRecipient: cfg.Signatures.StripRecipient,
		GlobalVoters:   cfg.Feedback.GlobalVoters,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e, st
}

// testLimits are the daemon's limits for a configuration.
func testLimits(cfg *config.Config) detect.Limits {
	l := detect.DefaultLimits
	l.Text = mailtext.Limits{MaxDepth: cfg.Limits.MaxMIMEDepth, MaxParts: cfg.Limits.MaxMIMEParts, MaxTextBytes: int(cfg.Limits.MaxTextBytes)}
	return l
}

type env struct {
	cfg   *config.Config
	eng   *detect.Engine
	store *store.Embedded
	h     *Handler
	reg   *prometheus.Registry
	logs  *bytes.Buffer
	clock time.Time
}

func newEnv(t *testing.T, edit func(*config.Config)) *env {
	t.Helper()
	c := config.Default()
	c.Feedback.TrustedNetworks = []string{"10.0.0.0/8", "2001:db8::/32"}
	if edit != nil {
		edit(&c)
	}
	e := &env{cfg: &c, reg: prometheus.NewRegistry(), logs: &bytes.Buffer{}, clock: time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)}
	e.eng, e.store = newEngine(t, e.cfg)
	f := e.cfg.Feedback
	o := Options{
		TrustAuthenticated: f.TrustAuthenticated, LoginDomain: f.LoginDomain, RateLimit: f.RateLimit,
		SubjectTag: e.cfg.Actions.SubjectTag, StoreTimeout: e.cfg.Policy.StoreTimeout.D(),
		Limits: testLimits(e.cfg), VerdictHeader: e.cfg.Actions.Header, FeedbackHeader: f.Header,
		Engine: e.eng, Store: e.store, Observer: metrics.New(e.reg), Now: func() time.Time { return e.clock },
	}
	for _, n := range f.TrustedNetworks {
		p, err := config.ParseNetwork(n)
		if err != nil {
			t.Fatal(err)
		}
		o.TrustedNetworks = append(o.TrustedNetworks, p)
	}
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	return e
}

// personalised returns a copy of a campaign for one recipient: her name in
// the To header, the greeting and the subject, as bulk senders do.
func personalised(name, addr string) string {
	return fmt.Sprintf(`From: "Garden Weekly" <news@garden.example>
To: "%[1]s" <%[2]s>
Subject: %[1]s, your spring planting guide is here
Message-ID: <spring-%[2]s>
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8

Dear %[1]s,

Spring is the season to prepare your vegetable garden. This week we explain
how to test the soil, when to sow tomatoes and peppers indoors, and how to
protect young seedlings from late frost. Our experts compare raised beds
with traditional rows and recommend compost mixtures for heavy clay.

Visit our store for discounted seed collections, organic fertilizer and
durable tools. Members receive free shipping on every order this month.
Your member address: %[2]s

Happy gardening,
The Garden Weekly team
`, name, addr)
}

// parse turns a raw message into what the milter hands over, through the
// daemon's own builder.
func parse(t testing.TB, raw string, rcpts ...string) *detect.Message {
	t.Helper()
	b := detect.NewBuilder(detect.DefaultLimits, "X-Bulk", "X-Bulk-Feedback")
	b.ReadRaw([]byte(raw))
	for _, r := range rcpts {
		b.Recipient(r)
	}
	return b.Message()
}

// fbFrom is a report's envelope: the SASL login, the client address and
// the envelope sender.
type fbFrom struct{ AuthUser, ClientAddr, Sender string }

// stored is the copy as it sits in the user's mailbox: delivery headers
// and the verdict on top, optionally the subject tag, LF line ends.
func stored(orig, tag string) string {
	s := "Return-Path: <news@garden.example>\nDelivered-To: anna.ivanova@example.test\n" +
		"Received: from mx.example.test by imap.example.test with LMTP; Fri, 20 Nov 2026 10:00:00 +0000\n" +
		"X-Bulk: yes; family=imatch; volume=37\n" + orig
	if tag != "" {
		s = strings.Replace(s, "Subject: ", "Subject: "+tag+" ", 1)
	}
	return s
}

// report wraps a message the way deploy/dovecot/bulk-feedback does.
func report(kind, orig string, base64Encoded bool) string {
	part := "Content-Type: message/rfc822\nContent-Disposition: attachment\n\n" + orig
	if base64Encoded {
		enc := base64.StdEncoding.EncodeToString([]byte(orig))
		var b strings.Builder
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\n")
		part = "Content-Type: message/rfc822\nContent-Transfer-Encoding: base64\n\n" + b.String()
	}
	return "From: anna.ivanova@example.test\nTo: bulk-feedback@example.test\nSubject: bulk feedback\n" +
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"=-fb-=\"\n\n" +
		"--=-fb-=\nContent-Type: text/plain\n\nThe attached message is " + kind + ".\n" +
		"--=-fb-=\n" + part + "\n--=-fb-=--\n"
}

func (e *env) feedback(t testing.TB, value, raw string, from fbFrom) Outcome {
	t.Helper()
	msg := parse(t, raw, "bulk-feedback@example.test")
	msg.Sender = from.Sender
	msg.Client, _ = detect.ParseClientAddr(from.ClientAddr)
	r := &Report{Value: value, AuthUser: from.AuthUser, Message: msg, Logger: slog.New(slog.NewTextHandler(e.logs, nil))}
	return e.h.Handle(context.Background(), r)
}

func (e *env) votes(t testing.TB, voter string) []store.VoteEntry {
	t.Helper()
	v, err := e.store.ListVotes(context.Background(), store.VoteQuery{Voter: voter})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (e *env) rejected(reason string) float64 {
	return sample(e.reg, "bulkmilter_feedback_rejected_total", reason)
}

// sample returns the value of the counter sample whose last label has the
// value, 0 when there is none.
func sample(reg *prometheus.Registry, name, label string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if len(m.Label) > 0 && m.Label[len(m.Label)-1].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// The vote lands on exactly the keys the user's copy had when it was
// delivered: the attached copy carries delivery headers, the verdict, the
// subject tag and LF line ends, and is personalised with her name and
// address, which the pipeline strips for the voter as it did for the
// recipient.
func TestVoteMatchesDeliveredKeys(t *testing.T) {
	const anna, annaName = "anna.ivanova@example.test", "Anna Ivanova"
	for _, tc := range []struct {
		name   string
		tag    string
		base64 bool
		inline bool // the report is the message itself, not an attachment
	}{
		{name: "attached"},
		{name: "attached, subject tagged", tag: "[BULK]"},
		{name: "attached, base64", base64: true},
		{name: "inline", inline: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *config.Config) { c.Actions.SubjectTag = tc.tag })
			orig := personalised(annaName, anna)
			want := e.eng.Analyze(parse(t, orig, anna))
			if len(want.Keys) < 10 {
				t.Fatalf("only %d keys for the campaign copy", len(want.Keys))
			}
			raw := report("not bulk", stored(orig, tc.tag), tc.base64)
			if tc.inline {
				raw = stored(orig, tc.tag)
			}
			out := e.feedback(t, "not-bulk", raw, fbFrom{AuthUser: anna, ClientAddr: "192.0.2.1", Sender: anna})
			if out != Consumed {
				t.Fatalf("outcome %v, want consumed\n%s", out, e.logs)
			}
			var wantIDs, gotIDs []string
			for _, k := range want.Keys {
				wantIDs = append(wantIDs, e.eng.StoreID(k))
			}
			for _, v := range e.votes(t, anna) {
				if v.Kind != store.VoteNotBulk {
					t.Errorf("vote kind %v", v.Kind)
				}
				gotIDs = append(gotIDs, v.Key)
			}
			slices.Sort(wantIDs)
			wantIDs = slices.Compact(wantIDs)
			slices.Sort(gotIDs)
			if !slices.Equal(gotIDs, wantIDs) {
				t.Errorf("voted keys differ from the delivered copy's:\n got %v\nwant %v", gotIDs, wantIDs)
			}
		})
	}
}

// Another user's copy of the same campaign carries her own name: voted by
// its own recipient it lands on the campaign's keys; the stripping is what
// makes copies match. Without stripping the voter's name, the personalised
// copy would not share all keys with the copy delivered to her.
func TestStripsTheVoterNotSomeoneElse(t *testing.T) {
	e := newEnv(t, nil)
	const anna, bob = "anna.ivanova@example.test", "boris.schmidt@example.test"
	annaCopy := personalised("Anna Ivanova", anna)
	delivered := e.eng.Analyze(parse(t, annaCopy, anna))
	asIfBob := e.eng.Analyze(parse(t, annaCopy, bob)) // Anna's copy, Bob's name stripped
	shared := 0
	ids := map[string]bool{}
	for _, k := range delivered.Keys {
		ids[e.eng.StoreID(k)] = true
	}
	for _, k := range asIfBob.Keys {
		if ids[e.eng.StoreID(k)] {
			shared++
		}
	}
	if shared == len(delivered.Keys) {
		t.Fatalf("stripping the wrong recipient changed no key (%d shared): the test shows nothing", shared)
	}
	// Bob's own copy, stripped for Bob, has the keys of Anna's copy
	// stripped for Anna (personalisation removed on both sides).
	bobCopy := e.eng.Analyze(parse(t, personalised("Boris Schmidt", bob), bob))
	same := 0
	for _, k := range bobCopy.Keys {
		if ids[e.eng.StoreID(k)] {
			same++
		}
	}
	if same != len(delivered.Keys) || len(bobCopy.Keys) != len(delivered.Keys) {
		t.Errorf("personalised copies share %d of %d/%d keys after stripping each recipient", same, len(bobCopy.Keys), len(delivered.Keys))
	}
}

func TestTrust(t *testing.T) {
	const anna = "anna.ivanova@example.test"
	orig := report("not bulk", stored(personalised("Anna Ivanova", anna), ""), false)
	tests := []struct {
		name   string
		edit   func(*config.Config)
		fb     fbFrom
		out    Outcome
		voter  string // whose votes must exist ("" when none)
		reason string // rejection counted
	}{
		{name: "authenticated", fb: fbFrom{AuthUser: "Anna.Ivanova@Example.TEST", ClientAddr: "192.0.2.1", Sender: "anyone@else.example"},
			out: Consumed, voter: anna},
		{name: "authenticated, login completed with login_domain", edit: func(c *config.Config) { c.Feedback.LoginDomain = "example.test" },
			fb: fbFrom{AuthUser: "anna.ivanova", ClientAddr: "192.0.2.1"}, out: Consumed, voter: anna},
		{name: "authenticated but not trusted", edit: func(c *config.Config) { c.Feedback.TrustAuthenticated = false },
			fb: fbFrom{AuthUser: anna, ClientAddr: "192.0.2.1", Sender: anna}, out: Ignored, reason: ReasonUntrusted},
		{name: "trusted network: the envelope sender votes", fb: fbFrom{ClientAddr: "10.1.2.3", Sender: "<" + anna + ">"},
			out: Consumed, voter: anna},
		{name: "trusted IPv6 network, Sendmail's form", fb: fbFrom{ClientAddr: "IPv6:2001:db8::25", Sender: anna},
			out: Consumed, voter: anna},
		{name: "trusted network, IPv4-mapped", fb: fbFrom{ClientAddr: "::ffff:10.0.0.1", Sender: anna},
			out: Consumed, voter: anna},
		{name: "trusted network, null sender", fb: fbFrom{ClientAddr: "10.1.2.3", Sender: "<>"},
			out: Consumed, reason: ReasonInvalid},
		{name: "untrusted network", fb: fbFrom{ClientAddr: "192.0.2.1", Sender: anna},
			out: Ignored, reason: ReasonUntrusted},
		{name: "no client address", fb: fbFrom{Sender: anna}, out: Ignored, reason: ReasonUntrusted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.edit)
			if out := e.feedback(t, "not-bulk", orig, tc.fb); out != tc.out {
				t.Fatalf("outcome %v, want %v\n%s", out, tc.out, e.logs)
			}
			all, err := e.store.ListVotes(context.Background(), store.VoteQuery{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.voter == "" && len(all) > 0 {
				t.Errorf("%d votes recorded, want none", len(all))
			}
			if tc.voter != "" && (len(all) == 0 || len(e.votes(t, tc.voter)) != len(all)) {
				t.Errorf("%d votes, %d of them by %s; want all of them by that voter", len(all), len(e.votes(t, tc.voter)), tc.voter)
			}
			if tc.reason != "" && e.rejected(tc.reason) != 1 {
				t.Errorf("rejected{reason=%s} = %v, want 1", tc.reason, e.rejected(tc.reason))
			}
			if strings.Contains(e.logs.String(), anna) {
				t.Errorf("a full address reached the log:\n%s", e.logs)
			}
		})
	}
}

func TestValues(t *testing.T) {
	const anna = "anna.ivanova@example.test"
	orig := report("x", stored(personalised("Anna Ivanova", anna), ""), false)
	for _, tc := range []struct {
		value string
		kind  store.VoteKind
	}{
		{"not-bulk", store.VoteNotBulk},
		{"  Not-Bulk \r\n", store.VoteNotBulk},
		{"NOT -\r\n\tBULK", store.VoteNotBulk},
		{"bulk", store.VoteBulk},
		{"BULK ", store.VoteBulk},
		{"", store.VoteNone},
		{"notbulk", store.VoteNone},
		{"not-bulk; please", store.VoteNone},
		{"spam", store.VoteNone},
	} {
		t.Run(tc.value, func(t *testing.T) {
			e := newEnv(t, nil)
			if out := e.feedback(t, tc.value, orig, fbFrom{AuthUser: anna}); out != Consumed {
				t.Fatalf("outcome %v, want consumed (trusted sender)", out)
			}
			votes := e.votes(t, anna)
			if tc.kind == store.VoteNone {
				if len(votes) != 0 || e.rejected(ReasonInvalid) != 1 {
					t.Errorf("%d votes, rejected{invalid} = %v; want none and 1", len(votes), e.rejected(ReasonInvalid))
				}
				return
			}
			if len(votes) == 0 || votes[0].Kind != tc.kind {
				t.Errorf("votes %v, want kind %v", votes, tc.kind)
			}
			if got := sample(e.reg, "bulkmilter_feedback_votes_total", strings.ReplaceAll(tc.kind.String(), "-", "_")); got != 1 {
				t.Errorf("feedback_votes_total{kind=%s} = %v, want 1", tc.kind, got)
			}
		})
	}
}

func TestRateLimit(t *testing.T) {
	const anna = "anna.ivanova@example.test"
	e := newEnv(t, func(c *config.Config) { c.Feedback.RateLimit = 2 })
	orig := report("x", stored(personalised("Anna Ivanova", anna), ""), false)
	fb := fbFrom{AuthUser: anna}
	for i := range 3 {
		e.feedback(t, "not-bulk", orig, fb)
		if want := float64(max(0, i-1)); e.rejected(ReasonRateLimited) != want {
			t.Errorf("vote %d: rejected{rate_limited} = %v, want %v", i+1, e.rejected(ReasonRateLimited), want)
		}
	}
	// Another voter is not limited by Anna's votes.
	e.feedback(t, "not-bulk", orig, fbFrom{AuthUser: "bob@example.test"})
	if got := len(e.votes(t, "bob@example.test")); got == 0 {
		t.Error("bob's vote was not recorded")
	}
	// Half an hour refills one vote.
	e.clock = e.clock.Add(30 * time.Minute)
	e.feedback(t, "bulk", orig, fb)
	e.feedback(t, "bulk", orig, fb)
	if got := e.rejected(ReasonRateLimited); got != 2 {
		t.Errorf("after 30 minutes: rejected{rate_limited} = %v, want 2 (one vote refilled)", got)
	}
	if v := e.votes(t, anna); len(v) == 0 || v[0].Kind != store.VoteBulk {
		t.Errorf("refilled vote not recorded: %v", v)
	}
}

// A store failure asks the MTA to retry, and gives the vote back to the
// rate limit.
func TestStoreFailureRetries(t *testing.T) {
	const anna = "anna.ivanova@example.test"
	e := newEnv(t, func(c *config.Config) { c.Feedback.RateLimit = 1 })
	orig := report("x", stored(personalised("Anna Ivanova", anna), ""), false)
	e.store.Close()
	for range 2 {
		if out := e.feedback(t, "not-bulk", orig, fbFrom{AuthUser: anna}); out != Retry {
			t.Fatalf("outcome %v, want retry", out)
		}
	}
	if e.rejected(ReasonStoreError) != 2 || e.rejected(ReasonRateLimited) != 0 {
		t.Errorf("rejected{store_error} = %v, {rate_limited} = %v; want 2 and 0", e.rejected(ReasonStoreError), e.rejected(ReasonRateLimited))
	}
}

func TestUnsigned(t *testing.T) {
	const anna = "anna.ivanova@example.test"
	e := newEnv(t, nil)
	orig := report("x", "Subject: hi\n\nok\n", false)
	if out := e.feedback(t, "not-bulk", orig, fbFrom{AuthUser: anna}); out != Consumed {
		t.Fatalf("outcome %v, want consumed", out)
	}
	if e.rejected(ReasonUnsigned) != 1 || len(e.votes(t, anna)) != 0 {
		t.Errorf("rejected{unsigned} = %v, votes %d; want 1 and none", e.rejected(ReasonUnsigned), len(e.votes(t, anna)))
	}
}

// Untrusted attempts are counted every time but logged once a minute.
func TestUntrustedLogIsSampled(t *testing.T) {
	e := newEnv(t, nil)
	orig := report("x", stored(personalised("Anna Ivanova", "a@example.test"), ""), false)
	for range 50 {
		e.feedback(t, "not-bulk", orig, fbFrom{ClientAddr: "192.0.2.9", Sender: "spammer@evil.example"})
	}
	e.clock = e.clock.Add(time.Minute)
	e.feedback(t, "not-bulk", orig, fbFrom{ClientAddr: "192.0.2.9", Sender: "spammer@evil.example"})
	if got := e.rejected(ReasonUntrusted); got != 51 {
		t.Errorf("rejected{untrusted} = %v, want 51", got)
	}
	if n := strings.Count(e.logs.String(), "untrusted sender"); n != 2 {
		t.Errorf("%d log lines for 51 attempts over a minute, want 2:\n%s", n, e.logs)
	}
	if !strings.Contains(e.logs.String(), "since_last_report=49") {
		t.Errorf("second line does not count the 49 skipped attempts:\n%s", e.logs)
	}
}

func TestReported(t *testing.T) {
	inner := "From: a@b.example\nSubject: the original\n\nOriginal body.\n"
	tests := []struct {
		name     string
		raw      string
		attached bool
		subject  string
	}{
		{"plain message is itself", inner, false, "the original"},
		{"multipart/mixed", "Subject: report\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nsee attached\n--b\nContent-Type: message/rfc822\n\n" + inner + "\n--b--\n", true, "the original"},
		{"nested multipart", "Subject: report\nContent-Type: multipart/mixed; boundary=o\n\n--o\nContent-Type: multipart/alternative; boundary=i\n\n--i\nContent-Type: text/plain\n\nx\n--i\nContent-Type: message/rfc822\n\n" + inner + "\n--i--\n--o--\n", true, "the original"},
		{"top-level message/rfc822", "Subject: report\nContent-Type: message/rfc822\n\n" + inner, true, "the original"},
		{"quoted-printable", "Subject: report\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: message/rfc822\nContent-Transfer-Encoding: quoted-printable\n\nSubject: the =\noriginal\n\nbody\n--b--\n", true, "the original"},
		{"digest default type", "Subject: report\nContent-Type: multipart/digest; boundary=b\n\n--b\n\n" + inner + "\n--b--\n", true, "the original"},
		{"no attached message", "Subject: report\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nx\n--b--\n", false, "report"},
		{"broken boundary", "Subject: report\nContent-Type: multipart/mixed; boundary=zz\n\n--b\nContent-Type: message/rfc822\n\n" + inner, false, "report"},
		{"no boundary", "Subject: report\nContent-Type: multipart/mixed\n\n" + inner, false, "report"},
		{"bad content type", "Subject: report\nContent-Type: ;;;\n\n" + inner, false, "report"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg, attached := (&Handler{}).reported(parse(t, tc.raw))
			if attached != tc.attached {
				t.Errorf("attached = %v, want %v", attached, tc.attached)
			}
			if got := msg.Header.Get("Subject"); got != tc.subject {
				t.Errorf("subject %q, want %q", got, tc.subject)
			}
		})
	}
}

func TestParseKind(t *testing.T) {
	for in, want := range map[string]store.VoteKind{
		"not-bulk": store.VoteNotBulk, "NOT-BULK": store.VoteNotBulk, " not-bulk\t": store.VoteNotBulk,
		"bulk": store.VoteBulk, "Bulk": store.VoteBulk,
		"": store.VoteNone, "no": store.VoteNone, "not bulk!": store.VoteNone, "bulk bulk": store.VoteNone,
	} {
		got, ok := ParseKind(in)
		if got != want || ok != (want != store.VoteNone) {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
}

func TestUntagSubject(t *testing.T) {
	for _, tc := range []struct{ in, tag, want string }{
		{"[BULK] Hello", "[BULK]", "Hello"},
		{"  [BULK] Hello", "[BULK]", "Hello"},
		{"Hello [BULK]", "[BULK]", "Hello [BULK]"},
		{"[BULK]", "[BULK]", ""},
	} {
		var h textproto.Header
		h.Set("Subject", tc.in)
		out := untagSubject(h, tc.tag)
		if got := out.Get("Subject"); got != tc.want {
			t.Errorf("untag(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if h.Get("Subject") != tc.in {
			t.Error("untagSubject changed its argument")
		}
	}
}

func TestLimiterIsBounded(t *testing.T) {
	l := NewLimiter(2, 100)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10_000 {
		if !l.Allow(fmt.Sprintf("v%d", i), now) {
			t.Fatalf("voter %d refused its first vote", i)
		}
		if l.Len() > 100 {
			t.Fatalf("limiter holds %d voters, bound 100", l.Len())
		}
	}
	// Full buckets go first: after an hour everybody's bucket is full.
	l2 := NewLimiter(1, 2)
	l2.Allow("a", now)
	l2.Allow("b", now)
	if l2.Allow("a", now) {
		t.Error("a got a second vote within the hour")
	}
	l2.Allow("c", now.Add(2*time.Hour))
	if l2.Len() != 1 {
		t.Errorf("after refill, %d voters tracked, want 1 (a and b full, dropped)", l2.Len())
	}
}

func FuzzReported(f *testing.F) {
	f.Add([]byte(report("x", "Subject: a\n\nb\n", false)), "multipart/mixed; boundary=\"=-fb-=\"")
	f.Add([]byte("--b\nContent-Type: message/rfc822\nContent-Transfer-Encoding: base64\n\n!!!\n--b--"), "multipart/mixed; boundary=b")
	f.Add([]byte("--b\nContent-Type: multipart/mixed; boundary=b\n\n--b\n"), "multipart/mixed; boundary=b")
	f.Fuzz(func(t *testing.T, body []byte, ct string) {
		var h textproto.Header
		h.Set("Content-Type", ct)
		msg, _ := (&Handler{}).reported(&detect.Message{Header: h, Body: bytes.NewReader(body)})
		if msg == nil || msg.Body == nil {
			t.Fatal("nil message")
		}
		if _, err := io.ReadAll(msg.Body); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzParseKind(f *testing.F) {
	for _, s := range []string{"not-bulk", "bulk", " NOT-BULK ", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, ok := ParseKind(s)
		if ok != (k != store.VoteNone) {
			t.Fatalf("ParseKind(%q) = %v, %v", s, k, ok)
		}
	})
}

// The attached message is found however the report wraps it, by the walk
// that reads every message: base64 and message/global too, deep nesting
// within the depth limit, and not past it.
func TestReportedWrappings(t *testing.T) {
	inner := "From: a@b.example\nSubject: the original\n\nOriginal body.\n"
	b64 := base64.StdEncoding.EncodeToString([]byte(inner))
	nest := func(depth int) string {
		s := "Content-Type: message/rfc822\n\n" + inner
		for i := range depth {
			s = fmt.Sprintf("Content-Type: multipart/mixed; boundary=b%d\n\n--b%d\n%s\n--b%d--\n", i, i, s, i)
		}
		return "Subject: report\n" + s
	}
	for _, tc := range []struct {
		name     string
		raw      string
		depth    int // limits.max_mime_depth; 0: default
		attached bool
	}{
		{"base64", "Subject: report\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: message/rfc822\nContent-Transfer-Encoding: base64\n\n" + b64 + "\n--b--\n", 0, true},
		{"message/global", "Subject: report\nContent-Type: multipart/report; boundary=b\n\n--b\nContent-Type: text/plain\n\nx\n--b\nContent-Type: message/global\n\n" + inner + "\n--b--\n", 0, true},
		{"nested 10 deep", nest(10), 0, true},
		{"nested past the depth limit", nest(10), 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := detect.DefaultLimits
			if tc.depth > 0 {
				lim.Text.MaxDepth = tc.depth
			}
			msg, attached := (&Handler{opt: Options{Limits: lim}}).reported(parse(t, tc.raw))
			if attached != tc.attached {
				t.Fatalf("attached = %v, want %v", attached, tc.attached)
			}
			if want := map[bool]string{true: "the original", false: "report"}[tc.attached]; msg.Header.Get("Subject") != want {
				t.Errorf("subject %q, want %q", msg.Header.Get("Subject"), want)
			}
		})
	}
}
