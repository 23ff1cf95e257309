package milter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomilter "github.com/d--j/go-milter"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/feedback"
	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/signature"
)

// These tests drive the protocol adapter with go-milter's real client over
// a loopback socket. The pipeline behind it is scripted: the adapter's job
// is to turn any verdict into the right replies and modifications, which
// is what is checked here. The real pipeline is exercised end to end in
// cmd/milterd's tests.

// scripted is a Pipeline whose verdict a test sets.
type scripted struct {
	mu        sync.Mutex
	verdict   func(*detect.Message) detect.Verdict
	seen      []*detect.Message
	bodies    []string
	deadlines int // calls whose context had a deadline
}

func (p *scripted) Check(ctx context.Context, msg *detect.Message) detect.Verdict {
	body, _ := io.ReadAll(msg.Body)
	p.mu.Lock()
	if _, ok := ctx.Deadline(); ok {
		p.deadlines++
	}
	p.seen = append(p.seen, msg)
	p.bodies = append(p.bodies, string(body))
	f := p.verdict
	p.mu.Unlock()
	return f(msg)
}

// fbReport is what a feedback handler was given.
type fbReport struct {
	Value, AuthUser, Sender string
	Client                  netip.Addr
}

type fbRecorder struct {
	mu    sync.Mutex
	got   []fbReport
	retry bool // answer Retry to authenticated senders
}

func (r *fbRecorder) Handle(ctx context.Context, fb *feedback.Report) feedback.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fbReport{Value: fb.Value, AuthUser: fb.AuthUser, Sender: fb.Message.Sender, Client: fb.Message.Client})
	switch {
	case fb.AuthUser == "":
		return feedback.Ignored
	case r.retry:
		return feedback.Retry
	}
	return feedback.Consumed
}

type harness struct {
	srv   *Server
	addr  string
	state *State
	pipe  *scripted
	fb    *fbRecorder
	reg   *prometheus.Registry
	met   *metrics.Metrics
	logs  *testenv.SyncBuffer
}

// defaultState is the state of the default configuration, with a
// scripted pipeline and a recording feedback handler.
func defaultState() *State {
	return &State{
		Limits:  detect.DefaultLimits,
		Actions: Actions{Header: "X-Bulk", FeedbackHeader: "X-Bulk-Feedback", DiscardFeedback: true},
	}
}

func start(t *testing.T, edit func(*State)) *harness {
	t.Helper()
	state := defaultState()
	if edit != nil {
		edit(state)
	}
	h := &harness{state: state, pipe: &scripted{}, fb: &fbRecorder{}, reg: prometheus.NewRegistry(), logs: &testenv.SyncBuffer{}}
	h.pipe.verdict = func(*detect.Message) detect.Verdict {
		return detect.Verdict{Family: signature.FamilyIMatch, Volume: 1}
	}
	h.met = metrics.New(h.reg)
	state.Pipeline, state.Feedback = h.pipe, h.fb
	h.srv = NewServer(Options{
		State:    func() *State { return state },
		Logger:   slog.New(slog.NewTextHandler(h.logs, nil)),
		Observer: h.met,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	go h.srv.Serve(ln)
	t.Cleanup(func() { h.srv.Close() })
	return h
}

func (h *harness) send(t *testing.T, env mtaclient.Envelope, msg string) mtaclient.Result {
	t.Helper()
	res, err := mtaclient.New("tcp", h.addr).Send(env, []byte(msg))
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return res
}

func mods(r mtaclient.Result) []string {
	var s []string
	for _, m := range r.Mods {
		s = append(s, m.String())
	}
	return s
}

// accepted reports whether the message goes on to delivery: at end of
// message the library reports "continue" as accept.
func accepted(r mtaclient.Result) bool {
	return r.Action.Type == gomilter.ActionContinue || r.Action.Type == gomilter.ActionAccept
}

func equal(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}

const plain = "From: a@example.com\nTo: b@example.test\nSubject: hello\n\nbody text\n"

func TestVerdictHeaderReplacesForgedCopies(t *testing.T) {
	h := start(t, nil)
	msg := "X-Bulk: no; forged\nFrom: a@example.com\nx-bulk: no\nX-Bulk-Feedback: not-bulk\nSubject: hi\n\nbody\n"
	res := h.send(t, mtaclient.Envelope{From: "a@example.com", Rcpts: []string{"b@example.test"}}, msg)
	want := []string{
		`ChangeHeader 2 "X-Bulk" ""`,
		`ChangeHeader 1 "X-Bulk" ""`,
		`ChangeHeader 1 "X-Bulk-Feedback" ""`,
		`AddHeader "X-Bulk" "no; family=imatch; volume=1; level=0; kind=undeclared"`,
	}
	if got := mods(res); !equal(got, want) {
		t.Errorf("modifications:\n got %q\nwant %q", got, want)
	}
	if !accepted(res) {
		t.Errorf("action = %v, want continue", res.Action)
	}
	// The session sets no deadline of its own: the pipeline's store
	// budget starts after the analysis, so a slow analysis is never taken
	// for a store failure.
	if h.pipe.deadlines != 0 {
		t.Errorf("the pipeline got a context with a deadline from the session")
	}
	// The pipeline never sees our own headers.
	if got := h.pipe.seen[0].Header.Get("X-Bulk"); got != "" {
		t.Errorf("pipeline saw X-Bulk %q", got)
	}
	if got := labelled(t, h.reg, "bulkmilter_actions_total", "action", "remove_forged"); got != 1 {
		t.Errorf("remove_forged actions = %v, want 1", got)
	}
}

func TestBulkActions(t *testing.T) {
	h := start(t, func(s *State) {
		s.Actions.SubjectTag = "[BULK]"
		s.Actions.RecipientDetail = "Bulk"
		s.Actions.Quarantine = true
		s.Actions.Except = NewRecipients(nil, []string{"vip.test"})
	})
	h.pipe.verdict = func(*detect.Message) detect.Verdict {
		return detect.Verdict{Bulk: true, Base: true, Family: signature.FamilySift, Volume: 42}
	}
	res := h.send(t, mtaclient.Envelope{From: "news@shop.example", Rcpts: []string{"Ann@Example.Test", "bob+lists@example.test"}}, plain)
	want := []string{
		`AddHeader "X-Bulk" "yes; family=sift; volume=42; level=5; kind=undeclared"`,
		`DelRcpt "<Ann@Example.Test>"`,
		`AddRcpt "<ann+Bulk@example.test>" ""`,
		`DelRcpt "<bob+lists@example.test>"`,
		`AddRcpt "<bob+Bulk@example.test>" ""`,
		`ChangeHeader 1 "Subject" "[BULK] hello"`,
		`Quarantine "bulk: family=sift volume=42"`,
	}
	if got := mods(res); !equal(got, want) {
		t.Errorf("modifications:\n got %q\nwant %q", got, want)
	}
	for _, a := range []string{"header", "recipient_detail", "subject_tag", "quarantine"} {
		if got := labelled(t, h.reg, "bulkmilter_actions_total", "action", a); got != 1 {
			t.Errorf("actions_total{action=%q} = %v, want 1", a, got)
		}
	}
}

// Exceptions and header-only recipients, per recipient: the routed ones
// get their detail; the Subject tag and quarantine, which would change
// everyone's copy, are skipped unless every recipient is routed.
func TestRoutingExceptions(t *testing.T) {
	bulk := func(*detect.Message) detect.Verdict {
		return detect.Verdict{Bulk: true, Base: true, Family: signature.FamilyIMatch, Volume: 30}
	}
	edit := func(s *State) {
		s.Actions.SubjectTag = "[BULK]"
		s.Actions.RecipientDetail = "Bulk"
		s.Actions.Quarantine = true
		s.Actions.Except = NewRecipients([]string{"ceo@example.test"}, []string{"vip.test", ".partners.test"})
		s.Actions.HeaderOnly = NewRecipients([]string{"archive@example.test"}, []string{"lists.test"})
	}
	for _, tc := range []struct {
		name  string
		rcpts []string
		want  []string
	}{
		{"mixed: only the routed recipient changes", []string{"ann@example.test", "boss@vip.test", "x@lists.test"}, []string{
			`AddHeader "X-Bulk" "yes; family=imatch; volume=30; level=5; kind=undeclared"`,
			`DelRcpt "<ann@example.test>"`,
			`AddRcpt "<ann+Bulk@example.test>" ""`,
		}},
		{"header only: the header says yes, nothing is routed", []string{"x@lists.test", "archive+2026@example.test"}, []string{
			`AddHeader "X-Bulk" "yes; family=imatch; volume=30; level=5; kind=undeclared"`,
		}},
		{"except by subdomain and by address with a detail", []string{"a@eu.partners.test", "ceo+news@example.test"}, []string{
			`AddHeader "X-Bulk" "no; family=imatch; volume=30; level=0; kind=undeclared; exempt"`,
		}},
		{"a recipient that already has the detail is left alone", []string{"ann+Bulk@example.test", "bob@example.test"}, []string{
			`AddHeader "X-Bulk" "yes; family=imatch; volume=30; level=5; kind=undeclared"`,
			`DelRcpt "<bob@example.test>"`,
			`AddRcpt "<bob+Bulk@example.test>" ""`,
			`ChangeHeader 1 "Subject" "[BULK] hello"`,
			`Quarantine "bulk: family=imatch volume=30"`,
		}},
		{"the parent of a .subdomain rule is not exempt", []string{"a@partners.test"}, []string{
			`AddHeader "X-Bulk" "yes; family=imatch; volume=30; level=5; kind=undeclared"`,
			`DelRcpt "<a@partners.test>"`,
			`AddRcpt "<a+Bulk@partners.test>" ""`,
			`ChangeHeader 1 "Subject" "[BULK] hello"`,
			`Quarantine "bulk: family=imatch volume=30"`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, edit)
			h.pipe.verdict = bulk
			res := h.send(t, mtaclient.Envelope{From: "news@shop.example", Rcpts: tc.rcpts}, plain)
			if got := mods(res); !equal(got, tc.want) {
				t.Errorf("modifications:\n got %q\nwant %q", got, tc.want)
			}
			if !accepted(res) {
				t.Errorf("action = %v, want continue", res.Action)
			}
		})
	}
}

// A message without a Subject gets the tag as its Subject; a Subject that
// already carries the tag is left alone.
func TestSubjectTagEdges(t *testing.T) {
	h := start(t, func(s *State) { s.Actions.SubjectTag = "[BULK]" })
	h.pipe.verdict = func(*detect.Message) detect.Verdict {
		return detect.Verdict{Bulk: true, Base: true, Family: signature.FamilyShingle, Volume: 11}
	}
	env := mtaclient.Envelope{From: "a@b.example", Rcpts: []string{"c@example.test"}}
	res := h.send(t, env, "From: a@b.example\n\nno subject here\n")
	if want := []string{`AddHeader "X-Bulk" "yes; family=shingle; volume=11; level=5; kind=undeclared"`, `AddHeader "Subject" "[BULK]"`}; !equal(mods(res), want) {
		t.Errorf("no Subject: modifications %q, want %q", mods(res), want)
	}
	res = h.send(t, env, "From: a@b.example\nSubject: [BULK] again\n\nbody\n")
	if want := []string{`AddHeader "X-Bulk" "yes; family=shingle; volume=11; level=5; kind=undeclared"`}; !equal(mods(res), want) {
		t.Errorf("tagged Subject: modifications %q, want %q", mods(res), want)
	}
}

// labelled returns the value of one labelled counter in a registry, 0 when
// it has no such sample.
func labelled(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestAllRecipientsExempt(t *testing.T) {
	h := start(t, func(s *State) {
		s.Actions.SubjectTag = "[BULK]"
		s.Actions.Except = NewRecipients([]string{"boss@vip.test"}, nil)
	})
	h.pipe.verdict = func(*detect.Message) detect.Verdict {
		return detect.Verdict{Bulk: true, Base: true, Family: signature.FamilyIMatch, Volume: 12}
	}
	res := h.send(t, mtaclient.Envelope{From: "x@y.example", Rcpts: []string{"boss@vip.test"}}, plain)
	want := []string{`AddHeader "X-Bulk" "no; family=imatch; volume=12; level=0; kind=undeclared; exempt"`}
	if got := mods(res); !equal(got, want) {
		t.Errorf("modifications:\n got %q\nwant %q", got, want)
	}
}

func TestUserNotBulkVoteExemptsThatUserOnly(t *testing.T) {
	h := start(t, func(s *State) { s.Actions.RecipientDetail = "Bulk" })
	h.pipe.verdict = func(*detect.Message) detect.Verdict {
		return detect.Verdict{Bulk: true, Base: true, Family: signature.FamilyIMatch, Volume: 50,
			Override: "user not-bulk", NotBulkFor: []string{"ann@example.test"}}
	}
	res := h.send(t, mtaclient.Envelope{From: "x@y.example", Rcpts: []string{"ann@example.test", "bob@example.test"}}, plain)
	want := []string{
		`AddHeader "X-Bulk" "yes; family=imatch; volume=50; level=5; kind=undeclared; feedback=user-not-bulk"`,
		`DelRcpt "<bob@example.test>"`,
		`AddRcpt "<bob+Bulk@example.test>" ""`,
	}
	if got := mods(res); !equal(got, want) {
		t.Errorf("modifications:\n got %q\nwant %q", got, want)
	}
}

func TestStoreFailurePolicy(t *testing.T) {
	failing := func(*detect.Message) detect.Verdict {
		return detect.Verdict{Err: errors.New("store unavailable: timeout")}
	}
	t.Run("accept", func(t *testing.T) {
		h := start(t, nil)
		h.pipe.verdict = failing
		res := h.send(t, mtaclient.Envelope{From: "a@b.example", Rcpts: []string{"c@example.test"}}, plain)
		if !accepted(res) {
			t.Errorf("action = %v, want continue", res.Action)
		}
		want := []string{`AddHeader "X-Bulk" "no; error=store-unavailable"`}
		if got := mods(res); !equal(got, want) {
			t.Errorf("modifications:\n got %q\nwant %q", got, want)
		}
	})
	t.Run("tempfail", func(t *testing.T) {
		h := start(t, func(s *State) { s.Actions.TempfailOnStoreError = true })
		h.pipe.verdict = failing
		res := h.send(t, mtaclient.Envelope{From: "a@b.example", Rcpts: []string{"c@example.test"}}, plain)
		if res.Action.Type != gomilter.ActionTempFail {
			t.Errorf("action = %v, want tempfail", res.Action)
		}
	})
}

// A panic anywhere in the pipeline becomes a safe reply and a metric; the
// daemon and even the MTA connection live on.
func TestPanicIsRecovered(t *testing.T) {
	h := start(t, nil)
	var calls atomic.Int32
	h.pipe.verdict = func(*detect.Message) detect.Verdict {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return detect.Verdict{Family: signature.FamilyIMatch, Volume: 2}
	}
	s, err := mtaclient.New("tcp", h.addr).Open(mtaclient.Envelope{From: "a@b.example", Rcpts: []string{"c@example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Send("", nil, []byte(plain))
	if err != nil {
		t.Fatalf("first message: %v", err)
	}
	if !accepted(res) || len(res.Mods) != 0 {
		t.Errorf("after panic: action %v, mods %q; want continue without modifications", res.Action, mods(res))
	}
	res, err = s.Send("", nil, []byte(plain))
	if err != nil {
		t.Fatalf("second message on the same connection: %v", err)
	}
	if v, _ := res.Header("X-Bulk"); v != "no; family=imatch; volume=2; level=0; kind=undeclared" {
		t.Errorf("second message header = %q", v)
	}
	if n := counter(h.reg, "bulkmilter_panics_recovered_total"); n != 1 {
		t.Errorf("panics_recovered_total = %v, want 1", n)
	}
}

// counter returns the sum of a counter's samples in the registry.
func counter(reg *prometheus.Registry, name string) float64 {
	mfs, _ := reg.Gather()
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.Metric {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// Connection facts (client address) and MAIL-stage macros (SASL login)
// reach end of message, also for the second message of a connection,
// after the ABORT that clears the library's macros.
func TestConnectionFactsSurviveAbort(t *testing.T) {
	h := start(t, nil)
	s, err := mtaclient.New("tcp", h.addr).Open(mtaclient.Envelope{
		ClientAddr: "198.51.100.7", AuthUser: "ann", From: "ann@example.test", Rcpts: []string{"ann@example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fb := "From: ann@example.test\nX-Bulk-Feedback: not-bulk\nSubject: fb\n\nbody\n"
	for i := 0; i < 2; i++ {
		res, err := s.Send("", nil, []byte(fb))
		if err != nil {
			t.Fatal(err)
		}
		if res.Action.Type != gomilter.ActionDiscard {
			t.Errorf("message %d: action %v, want discard (consumed feedback)", i, res.Action)
		}
	}
	if len(h.fb.got) != 2 {
		t.Fatalf("feedback handler called %d times, want 2", len(h.fb.got))
	}
	for i, got := range h.fb.got {
		if got.Client != netip.MustParseAddr("198.51.100.7") || got.AuthUser != "ann" || got.Sender != "ann@example.test" || got.Value != "not-bulk" {
			t.Errorf("feedback %d: %+v", i, got)
		}
	}
}

func TestBodyIsBounded(t *testing.T) {
	h := start(t, func(s *State) { s.Limits.BodyBytes = 4096 })
	big := "From: a@b.example\nSubject: big\n\n" + strings.Repeat("0123456789abcdef\n", 2000)
	res := h.send(t, mtaclient.Envelope{From: "a@b.example", Rcpts: []string{"c@example.test"}}, big)
	if _, ok := res.Header("X-Bulk"); !ok {
		t.Fatal("no verdict header")
	}
	if got := len(h.pipe.bodies[0]); got != 4096 {
		t.Errorf("pipeline got %d body bytes, want the 4096 limit", got)
	}
	if !h.pipe.seen[0].Truncated {
		t.Error("message not marked truncated")
	}
}

// Shutdown waits for a message in progress to get its reply.
func TestShutdownDrainsMessagesInProgress(t *testing.T) {
	h := start(t, nil)
	release := make(chan struct{})
	entered := make(chan struct{})
	h.pipe.verdict = func(*detect.Message) detect.Verdict {
		close(entered)
		<-release
		return detect.Verdict{Family: signature.FamilyIMatch, Volume: 3}
	}
	type result struct {
		res mtaclient.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := mtaclient.New("tcp", h.addr).Send(mtaclient.Envelope{From: "a@b.example", Rcpts: []string{"c@example.test"}}, []byte(plain))
		done <- result{res, err}
	}()
	<-entered
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- h.srv.Shutdown(ctx)
	}()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) while a message was in progress", err)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := net.DialTimeout("tcp", h.addr, time.Second); err == nil {
		// The listener is closed first; a new connection is refused.
		t.Error("new connection accepted during shutdown")
	}
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatalf("message in progress failed: %v", r.err)
	}
	if v, _ := r.res.Header("X-Bulk"); v != "no; family=imatch; volume=3; level=0; kind=undeclared" {
		t.Errorf("drained message header = %q", v)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

func TestListenUnixSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "milter.sock")
	ln, err := Listen("unix", path, SocketAccess{Mode: 0o600})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("socket mode = %o, want 600", got)
	}
	// A second daemon must not steal a live socket.
	if _, err := Listen("unix", path, SocketAccess{}); err == nil {
		t.Error("second Listen on a live socket succeeded")
	}
	ln.Close()
	// Go removes the socket file on Close; a stale file left by a crash
	// must be replaced.
	if f, err := os.Create(path); err == nil {
		f.Close()
	}
	os.Remove(path)
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	ln, err = Listen("unix", path, SocketAccess{})
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ln.Close()
}

// A user's own "bulk" vote routes the message for her only: the others
// get it as the base verdict says, not bulk.
func TestUserBulkVoteRoutesThatUserOnly(t *testing.T) {
	h := start(t, func(s *State) { s.Actions.RecipientDetail = "Bulk" })
	h.pipe.verdict = func(*detect.Message) detect.Verdict {
		return detect.Verdict{Bulk: true, Base: false, Family: signature.FamilyIMatch, Volume: 2,
			Override: "user bulk", BulkFor: []string{"ann@example.test"}}
	}
	res := h.send(t, mtaclient.Envelope{From: "x@y.example", Rcpts: []string{"ann@example.test", "bob@example.test"}}, plain)
	want := []string{
		`AddHeader "X-Bulk" "yes; family=imatch; volume=2; level=5; kind=undeclared; feedback=user-bulk"`,
		`DelRcpt "<ann@example.test>"`,
		`AddRcpt "<ann+Bulk@example.test>" ""`,
	}
	if got := mods(res); !equal(got, want) {
		t.Errorf("modifications:\n got %q\nwant %q", got, want)
	}
}

// What happens to a feedback message: consumed feedback is discarded, or
// delivered without the feedback header; feedback the handler could not
// record now is tempfailed; feedback it ignores is checked as normal mail,
// the header removed.
func TestFeedbackOutcomes(t *testing.T) {
	fb := "From: ann@example.test\nX-Bulk-Feedback: not-bulk\nX-Bulk: yes\nSubject: fb\n\nbody\n"
	auth := mtaclient.Envelope{AuthUser: "ann@example.test", From: "ann@example.test", Rcpts: []string{"ann@example.test"}}
	tests := []struct {
		name   string
		keep   string
		retry  bool
		env    mtaclient.Envelope
		action gomilter.ActionType
		mods   []string
		checks int // calls of the pipeline
	}{
		{name: "consumed, discard", keep: "discard", env: auth, action: gomilter.ActionDiscard},
		{name: "consumed, deliver", keep: "deliver", env: auth, action: gomilter.ActionContinue,
			mods: []string{`ChangeHeader 1 "X-Bulk" ""`, `ChangeHeader 1 "X-Bulk-Feedback" ""`}},
		{name: "retry", keep: "discard", retry: true, env: auth, action: gomilter.ActionTempFail},
		{name: "ignored", keep: "discard", env: mtaclient.Envelope{From: "x@y.example", Rcpts: []string{"ann@example.test"}},
			action: gomilter.ActionContinue, checks: 1,
			mods: []string{`ChangeHeader 1 "X-Bulk" ""`, `ChangeHeader 1 "X-Bulk-Feedback" ""`, `AddHeader "X-Bulk" "no; family=imatch; volume=1; level=0; kind=undeclared"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, func(s *State) { s.Actions.DiscardFeedback = tc.keep == "discard" })
			h.fb.retry = tc.retry
			res := h.send(t, tc.env, fb)
			if got := res.Action.Type; got != tc.action && !(tc.action == gomilter.ActionContinue && accepted(res)) {
				t.Errorf("action %v, want %v", got, tc.action)
			}
			if got := mods(res); !equal(got, tc.mods) {
				t.Errorf("modifications:\n got %q\nwant %q", got, tc.mods)
			}
			if len(h.pipe.seen) != tc.checks {
				t.Errorf("pipeline called %d times, want %d", len(h.pipe.seen), tc.checks)
			}
			// The pipeline counts the messages it checks; the milter
			// counts feedback.
			if n := counter(h.reg, "bulkmilter_messages_total"); n != float64(1-tc.checks) {
				t.Errorf("messages_total = %v, want %d", n, 1-tc.checks)
			}
		})
	}
}

// A recipient flood: the session keeps every recipient up to
// limits.max_recipients (100,000 by default) and hands them all to the
// pipeline, marks the message truncated past it, and keeps an overlong
// address cut (counted, never rewritten).
func TestRecipientFlood(t *testing.T) {
	h := start(t, func(s *State) {
		s.Actions.RecipientDetail = "Bulk"
		s.Limits.Recipients = 100_000
	})
	h.pipe.verdict = func(*detect.Message) detect.Verdict {
		return detect.Verdict{Bulk: true, Base: true, Family: signature.FamilyIMatch, Volume: 99}
	}
	rcpts := make([]string, 100_002)
	for i := range rcpts {
		rcpts[i] = fmt.Sprintf("r%06d@example.test", i)
	}
	long := strings.Repeat("x", 1<<20) + "@example.test"
	rcpts[0] = long
	res := h.send(t, mtaclient.Envelope{From: "a@b.example", Rcpts: rcpts}, plain)
	if _, ok := res.Header("X-Bulk"); !ok {
		t.Fatal("no verdict header")
	}
	h.pipe.mu.Lock()
	m := h.pipe.seen[0]
	h.pipe.mu.Unlock()
	if len(m.Recipients) != 100_000 || !m.Truncated {
		t.Errorf("pipeline got %d recipients, truncated %v; want 100000 and true", len(m.Recipients), m.Truncated)
	}
	if got := m.Recipients[0]; len(got) != detect.DefaultLimits.AddressBytes || !strings.HasPrefix(long, got) {
		t.Errorf("overlong address kept as %d bytes", len(got))
	}
	for _, mod := range res.Mods {
		if strings.Contains(mod.String(), "xxxxxxxx") {
			t.Errorf("the cut address was rewritten: %.80s", mod.String())
			break
		}
	}
	if n := len(res.Mods); n != 1+2*(100_000-1) {
		t.Errorf("%d modifications, want the header and a detail for each of the 99,999 whole recipients", n)
	}
}

// Every message gets one info line, with its queue id and verdict and no
// address unless configured.
func TestOneLogLinePerMessage(t *testing.T) {
	for _, addresses := range []bool{false, true} {
		h := start(t, func(s *State) { s.Actions.LogAddresses = addresses })
		var n atomic.Int32
		h.pipe.verdict = func(*detect.Message) detect.Verdict {
			if n.Add(1) == 2 {
				return detect.Verdict{Err: errors.New("store down")}
			}
			return detect.Verdict{Bulk: true, Base: true, Family: signature.FamilyShingle, Volume: 12, Slow: true}
		}
		env := mtaclient.Envelope{From: "news@shop.example", Rcpts: []string{"ann@example.test"}, QueueID: "Q1"}
		h.send(t, env, plain)
		env.QueueID = "Q2"
		h.send(t, env, "X-Bulk: yes\n"+plain)
		env.QueueID, env.AuthUser = "Q3", "ann@example.test"
		h.send(t, env, "X-Bulk-Feedback: not-bulk\n"+plain)
		var lines []string
		for _, l := range strings.Split(h.logs.String(), "\n") {
			if strings.Contains(l, "level=INFO") {
				lines = append(lines, l)
			}
		}
		want := []string{
			`msg=message queue_id=Q1 verdict=bulk family=shingle volume=12 bulk_level=5 bulk_kind=undeclared slow=true recipients=1 `,
			`msg=message queue_id=Q2 verdict=error recipients=1 forged_headers=1 `,
			`msg=message queue_id=Q3 verdict=feedback outcome=consumed action=discard recipients=1 `,
		}
		if len(lines) != len(want) {
			t.Fatalf("addresses=%v: %d info lines for 3 messages:\n%s", addresses, len(lines), h.logs)
		}
		for i, l := range lines {
			if !strings.Contains(l, want[i]) || !strings.Contains(l, " took=") {
				t.Errorf("addresses=%v: line %d\n got %s\nwant …%s…took=…", addresses, i+1, l, want[i])
			}
			if got := strings.Contains(l, "ann@example.test") && strings.Contains(l, "from=news@shop.example"); got != addresses {
				t.Errorf("addresses=%v: line %d names the addresses: %v\n%s", addresses, i+1, got, l)
			}
		}
	}
}

// The Subject tag goes on the Subject as the MTA has it: a Subject that
// comes after a thousand fields, folded and longer than what is analysed,
// keeps all of it, folding included.
func TestSubjectTagAsTheMTAHasIt(t *testing.T) {
	h := start(t, func(s *State) { s.Actions.SubjectTag = "[BULK]" })
	h.pipe.verdict = func(*detect.Message) detect.Verdict {
		return detect.Verdict{Bulk: true, Base: true, Family: signature.FamilyIMatch, Volume: 10}
	}
	var b strings.Builder
	for i := range 1200 {
		fmt.Fprintf(&b, "X-Filler-%d: %d\n", i, i)
	}
	subject := "Spring offers\n\t" + strings.Repeat("long ", 5000) + "end"
	b.WriteString("Subject: " + subject + "\nFrom: a@example.com\n\nbody\n")
	res := h.send(t, mtaclient.Envelope{From: "a@example.com", Rcpts: []string{"b@example.test"}}, b.String())
	want := []string{`AddHeader "X-Bulk" "yes; family=imatch; volume=10; level=5; kind=undeclared"`, fmt.Sprintf("ChangeHeader 1 %q %q", "Subject", "[BULK] "+subject)}
	if got := mods(res); !equal(got, want) {
		t.Errorf("modifications:\n got %.200q\nwant %.200q", got, want)
	}
}

// A peer on the milter socket may send a header name with blanks around
// it, which Postfix never does: "x-bulk " is the verdict header too.
func TestForgedHeaderNameWithBlanks(t *testing.T) {
	h := start(t, nil)
	cl := gomilter.NewClient("tcp", h.addr)
	s, err := cl.Session(gomilter.NewMacroBag())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	steps := []func() (*gomilter.Action, error){
		func() (*gomilter.Action, error) {
			return s.Conn("client.example", gomilter.FamilyInet, 25, "192.0.2.1")
		},
		func() (*gomilter.Action, error) { return s.Helo("client.example") },
		func() (*gomilter.Action, error) { return s.Mail("a@example.com", "") },
		func() (*gomilter.Action, error) { return s.Rcpt("b@example.test", "") },
		func() (*gomilter.Action, error) { return s.DataStart() },
		func() (*gomilter.Action, error) { return s.HeaderField("x-bulk ", "yes; forged", nil) },
		func() (*gomilter.Action, error) { return s.HeaderField(" X-Bulk-Feedback\t", "not-bulk", nil) },
		func() (*gomilter.Action, error) { return s.HeaderField("Subject", "hi", nil) },
		func() (*gomilter.Action, error) { return s.HeaderEnd() },
		func() (*gomilter.Action, error) { return s.BodyChunk([]byte("body\r\n")) },
	}
	for i, step := range steps {
		if _, err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	modsGot, _, err := s.End()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range modsGot {
		got = append(got, m.String())
	}
	want := []string{`ChangeHeader 1 "X-Bulk" ""`, `ChangeHeader 1 "X-Bulk-Feedback" ""`, `AddHeader "X-Bulk" "no; family=imatch; volume=1; level=0; kind=undeclared"`}
	if !equal(got, want) {
		t.Errorf("modifications:\n got %q\nwant %q", got, want)
	}
	if v := h.pipe.seen[0].Header.Get("X-Bulk"); v != "" {
		t.Errorf("the pipeline saw the forged header: %q", v)
	}
}

// A closed session's message builder serves the next session (the
// server's pool): the next message is built afresh, nothing of the last
// one kept, and a builder made for a state since replaced (a reload) is
// never used for a message of the new state.
func TestBuilderReusedAcrossSessions(t *testing.T) {
	h := start(t, nil)
	var cur atomic.Pointer[State]
	cur.Store(h.state)
	srv := NewServer(Options{State: cur.Load, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	h.addr = ln.Addr().String()
	env := mtaclient.Envelope{From: "a@example.com", Rcpts: []string{"b@example.test"}}
	long := "Subject: first\nX-Bulk: forged\n\n" + strings.Repeat("the first message's long body\n", 400)
	for i := range 5 {
		h.send(t, env, long)
		res := h.send(t, env, "From: a@example.com\n\nsecond\n")
		h.pipe.mu.Lock()
		body, msg := h.pipe.bodies[len(h.pipe.bodies)-1], h.pipe.seen[len(h.pipe.seen)-1]
		h.pipe.mu.Unlock()
		if body != "second\r\n" || msg.Header.Has("Subject") || msg.Header.Has("X-Bulk") {
			t.Fatalf("round %d: the second message has body %.40q…, Subject %v, X-Bulk %v; want only its own", i, body,
				msg.Header.Has("Subject"), msg.Header.Has("X-Bulk"))
		}
		// Only the verdict header is added: the first message's forged
		// copy is not counted against the second.
		if got := mods(res); len(got) != 1 || !strings.Contains(got[0], `"X-Bulk"`) {
			t.Fatalf("round %d: modifications %q, want only the verdict header added", i, got)
		}
	}

	// A reload: the new state's header name and limits.
	next := defaultState()
	next.Pipeline, next.Feedback = h.pipe, h.fb
	next.Actions.Header = "X-Mass"
	next.Limits.BodyBytes = 5
	cur.Store(next)
	for i := range 5 {
		res := h.send(t, env, "X-Mass: forged\nFrom: a@example.com\n\nlonger than five\n")
		h.pipe.mu.Lock()
		body := h.pipe.bodies[len(h.pipe.bodies)-1]
		h.pipe.mu.Unlock()
		got := mods(res)
		if body != "longe" || len(got) != 2 || !strings.Contains(strings.Join(got, " "), `"X-Mass"`) || strings.Contains(strings.Join(got, " "), `"X-Bulk"`) {
			t.Fatalf("after the reload, message %d: body %q, modifications %q; want 5 bytes and X-Mass removed and added", i, body, got)
		}
	}
}
