package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d--j/go-milter"

	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// These tests close the feedback loop through the real daemon: a campaign
// is tagged, users report copies with the feedback header, later copies
// are judged with their votes.

// trustedNet is the network the daemons under test trust for feedback;
// mtaclient's default client address, 192.0.2.1, is not in it.
const trustedNet = "198.51.100.0/24"

// newsletterWords makes campaign() add the same words to every copy.
func newsletterWords() *rand.Rand { return rand.New(rand.NewPCG(1, 1)) }

// writeConfig writes a configuration file for a daemon under test.
func writeConfig(t testing.TB, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bulkmilter.yml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// feedbackConfig gives Redis calls a budget no busy machine overruns: a
// verdict past the default 500 ms is "error=store-unavailable", which these
// tests do not test (TestFeedbackInRedis saw it once at load 37, right
// after the restart of a Redis that fsyncs every write).
const feedbackConfig = `
feedback:
  trusted_networks: [` + trustedNet + `]
actions:
  recipient_detail: Bulk
policy:
  store_timeout: 15s
`

// deliveredCopy is what a user has in her mailbox: the copy the milter
// passed, with delivery headers and the verdict on top.
func deliveredCopy(raw []byte, verdict string) []byte {
	return append([]byte("Return-Path: <news@garden.example>\nReceived: from mx.example.test by imap.example.test with LMTP\n"+
		"X-Bulk: "+verdict+"\n"), raw...)
}

// feedbackReport is a report on a message, attached as message/rfc822,
// as deploy/dovecot/bulk-feedback sends it.
func feedbackReport(kind, voter string, reported []byte) []byte {
	return []byte("From: <" + voter + ">\nTo: <bulk-feedback@example.test>\nSubject: bulk feedback: " + kind + "\n" +
		"X-Bulk-Feedback: " + kind + "\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"fb-boundary\"\n\n" +
		"--fb-boundary\nContent-Type: text/plain; charset=us-ascii\n\nThe attached message was reported as " + kind + ".\n\n" +
		"--fb-boundary\nContent-Type: message/rfc822\nContent-Disposition: attachment\n\n" + string(reported) + "\n--fb-boundary--\n")
}

// mailer sends campaign copies and reports to one daemon.
type mailer struct {
	t    *testing.T
	d    *daemonProc
	cl   *mtaclient.Client
	rng  *rand.Rand
	next int
	got  map[string][]byte // the copy each recipient got, as delivered
	// salted adds random words to each copy, as spammers do. Off, copies
	// differ only by the recipient's name and address, like a newsletter's:
	// how votes carry over between salted copies is a matter of chance
	// (99 in 100 for her next copy, TestMeasureRescue), so the tests that
	// must not flake send newsletters.
	salted bool
}

func newMailer(t *testing.T, d *daemonProc, seed uint64) *mailer {
	return &mailer{t: t, d: d, cl: mtaclient.New("tcp", d.milterAddr), rng: rand.New(rand.NewPCG(seed, 7)), got: map[string][]byte{}}
}

// copyTo sends the next campaign copy, personalised for the first
// recipient, and returns the milter's answer.
func (m *mailer) copyTo(rcpts ...int) mtaclient.Result {
	m.t.Helper()
	m.next++
	addrs := make([]string, len(rcpts))
	for i, r := range rcpts {
		addrs[i] = recipientAddr(r)
	}
	rng := m.rng
	if !m.salted {
		rng = newsletterWords()
	}
	raw := campaign(m.next, addrs[0], recipientName(rcpts[0]), rng)
	res, err := m.cl.Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: addrs}, raw)
	if err != nil {
		m.t.Fatalf("copy %d to %v: %v", m.next, addrs, err)
	}
	v, _ := res.Header("X-Bulk")
	m.got[addrs[0]] = deliveredCopy(raw, v)
	return res
}

// verdict sends a copy to one recipient and returns the verdict header.
func (m *mailer) verdict(rcpt int) string {
	m.t.Helper()
	return verdictOf(m.t, m.copyTo(rcpt))
}

// report sends recipient r's report on the copy she got, with env's
// trust (client address, SASL login, envelope sender).
func (m *mailer) report(kind string, r int, env mtaclient.Envelope) mtaclient.Result {
	m.t.Helper()
	addr := recipientAddr(r)
	reported, ok := m.got[addr]
	if !ok {
		m.t.Fatalf("recipient %d got no copy to report", r)
	}
	env.Rcpts = []string{"bulk-feedback@example.test"}
	if env.From == "" {
		env.From = addr
	}
	res, err := m.cl.Send(env, feedbackReport(kind, addr, reported))
	if err != nil {
		m.t.Fatalf("report by %d: %v", r, err)
	}
	return res
}

func wantPrefix(t *testing.T, what, got, prefix, suffix string) {
	t.Helper()
	if !strings.HasPrefix(got, prefix) || !strings.HasSuffix(got, suffix) {
		t.Errorf("%s: X-Bulk %q, want %q…%q", what, got, prefix, suffix)
	}
}

// A campaign is tagged; a recipient's authenticated "not bulk" stops the
// tagging of her later copies and of nobody else's; the same report from
// an untrusted client changes nothing and loses its header; three
// distinct voters stop the tagging for everyone.
func TestFeedbackClosesTheLoop(t *testing.T) {
	d := startDaemon(t, "-config", writeConfig(t, feedbackConfig))
	m := newMailer(t, d, 11)
	for r := 1; r <= 20; r++ {
		v := m.verdict(r)
		if want := r >= 10; strings.HasPrefix(v, "yes") != want {
			t.Fatalf("copy to %d: X-Bulk %q, want bulk=%v", r, v, want)
		}
	}

	// Recipient 12 reports her tagged copy, authenticated: recorded, the
	// report discarded.
	res := m.report("not-bulk", 12, mtaclient.Envelope{AuthUser: recipientAddr(12)})
	if res.Action.Type != milter.ActionDiscard {
		t.Fatalf("report: action %v, want discard; log:\n%s", res.Action, d.Logs())
	}
	if got := d.metric(t, `bulkmilter_feedback_votes_total{kind="not_bulk"}`); got != 1 {
		t.Errorf("feedback_votes_total{not_bulk} = %v, want 1", got)
	}
	if got := d.metric(t, `bulkmilter_messages_total{verdict="feedback"}`); got != 1 {
		t.Errorf("messages_total{feedback} = %v, want 1", got)
	}
	wantPrefix(t, "later copy to the voter", m.verdict(12), "no; ", "; feedback=user-not-bulk")
	wantPrefix(t, "later copy to someone else", m.verdict(21), "yes; ", "")
	// One message to her and to someone else: routed to Bulk for the other
	// recipient only.
	res = m.copyTo(12, 22)
	wantPrefix(t, "copy to the voter and another", verdictOf(t, res), "yes; ", "; feedback=user-not-bulk")
	var routed []string
	for _, mod := range res.Mods {
		if mod.Type == milter.ActionAddRcpt || mod.Type == milter.ActionDelRcpt {
			routed = append(routed, mod.String())
		}
	}
	if want := []string{fmt.Sprintf("DelRcpt %q", "<"+recipientAddr(22)+">"), fmt.Sprintf("AddRcpt %q \"\"", "<"+strings.Replace(recipientAddr(22), "@", "+Bulk@", 1)+">")}; strings.Join(routed, "|") != strings.Join(want, "|") {
		t.Errorf("routing %q, want %q", routed, want)
	}

	// The same report from an untrusted client: checked as normal mail,
	// header removed, nothing recorded, her later copies still tagged.
	res = m.report("not-bulk", 13, mtaclient.Envelope{})
	if res.Action.Type == milter.ActionDiscard {
		t.Error("untrusted report discarded; want it delivered as normal mail")
	}
	removed := false
	for _, mod := range res.Mods {
		if mod.Type == milter.ActionChangeHeader && mod.HeaderName == "X-Bulk-Feedback" && mod.HeaderValue == "" {
			removed = true
		}
	}
	if !removed {
		t.Errorf("untrusted report keeps its feedback header; modifications %v", res.Mods)
	}
	if _, ok := res.Header("X-Bulk"); !ok {
		t.Error("untrusted report got no verdict header: not checked as normal mail")
	}
	if got := d.metric(t, `bulkmilter_feedback_rejected_total{reason="untrusted"}`); got != 1 {
		t.Errorf("feedback_rejected_total{untrusted} = %v, want 1", got)
	}
	wantPrefix(t, "copy to the untrusted reporter", m.verdict(13), "yes; ", "")

	// The admin lists the votes while the daemon runs (it holds the
	// embedded store, so the command asks it over the metrics listener).
	out := runVotes(t, 0, "list", "-data-dir", d.dataDir, "-metrics-listen", d.httpAddr, "-voter", recipientAddr(12))
	if n := strings.Count(out, "not-bulk"); n < 10 {
		t.Errorf("votes list -voter: %d not-bulk votes listed, want the report's keys (at least 10):\n%s", n, out)
	}
	if !strings.Contains(out, recipientAddr(12)) {
		t.Errorf("votes list -voter does not name the voter:\n%s", out)
	}
}

// Distinct voters stop the tagging for everyone: two are not enough, the
// third (global_voters, default 3) is. The mail is a newsletter, the
// realistic case: copies differ only by the recipient's name and address.
// Two of the voters report from the trusted network, as the imapsieve
// script does, one authenticated.
func TestEnoughVotersStopTaggingForEveryone(t *testing.T) {
	d := startDaemon(t, "-config", writeConfig(t, feedbackConfig))
	m := newMailer(t, d, 14)
	for r := 1; r <= 15; r++ {
		m.verdict(r)
	}
	fromTrusted := mtaclient.Envelope{ClientAddr: "198.51.100.7"}
	for _, r := range []int{12, 14} {
		if res := m.report("not-bulk", r, fromTrusted); res.Action.Type != milter.ActionDiscard {
			t.Fatalf("trusted-network report by %d: action %v, want discard\n%s", r, res.Action, d.Logs())
		}
	}
	wantPrefix(t, "copy to a new recipient after two voters", m.verdict(30), "yes; ", "")
	m.report("not-bulk", 15, mtaclient.Envelope{AuthUser: recipientAddr(15)})
	wantPrefix(t, "copy to a new recipient after three voters", m.verdict(31), "no; ", "; feedback=global-not-bulk")
	wantPrefix(t, "copy to an old recipient after three voters", m.verdict(3), "no; ", "; feedback=global-not-bulk")
	if got := d.metric(t, `bulkmilter_feedback_overrides_total{kind="not_bulk",scope="global"}`); got != 2 {
		t.Errorf("feedback_overrides_total{global,not_bulk} = %v, want 2", got)
	}
	// A voter who changes her mind ("bulk") leaves two not-bulk voters
	// against one bulk voter: no quorum, the volume decides again.
	m.report("bulk", 12, fromTrusted)
	wantPrefix(t, "copy after one voter changed her mind", m.verdict(32), "yes; ", "")

	all := runVotes(t, 0, "list", "-data-dir", d.dataDir, "-metrics-listen", d.httpAddr, "-limit", "0", "-json")
	voters := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(all), "\n") {
		if i := strings.Index(line, `"voter_id":"`); i >= 0 {
			voters[line[i+12:i+24]] = true
		}
	}
	if len(voters) != 3 {
		t.Errorf("votes list: %d distinct voters, want 3:\n%s", len(voters), all)
	}
}

// runVotes runs "milterd votes ..." in process and checks its exit code.
func runVotes(t *testing.T, wantCode int, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := mainExit(append([]string{"votes"}, args...), &stdout, &stderr); code != wantCode {
		t.Fatalf("milterd votes %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, wantCode, stdout.String(), stderr.String())
	}
	return stdout.String() + stderr.String()
}

// Votes survive a restart of the daemon with the embedded store; the admin
// lists them while no daemon runs, and removes them while one does.
func TestVotesSurviveRestart(t *testing.T) {
	cfg := writeConfig(t, feedbackConfig)
	dir := t.TempDir()
	d := startDaemon(t, "-config", cfg, "-data-dir", dir)
	m := newMailer(t, d, 12)
	for r := 1; r <= 12; r++ {
		m.verdict(r)
	}
	if res := m.report("not-bulk", 12, mtaclient.Envelope{AuthUser: recipientAddr(12)}); res.Action.Type != milter.ActionDiscard {
		t.Fatalf("report: action %v, want discard", res.Action)
	}
	d.stop(t)

	out := runVotes(t, 0, "list", "-config", cfg, "-data-dir", dir, "-voter", recipientAddr(12))
	if n := strings.Count(out, "not-bulk"); n < 10 {
		t.Fatalf("votes list with the daemon stopped: %d votes, want at least 10:\n%s", n, out)
	}

	d2 := startDaemon(t, "-config", cfg, "-data-dir", dir)
	m.d, m.cl = d2, mtaclient.New("tcp", d2.milterAddr)
	wantPrefix(t, "copy to the voter after a restart", m.verdict(12), "no; ", "; feedback=user-not-bulk")
	wantPrefix(t, "copy to another after a restart", m.verdict(13), "yes; ", "")

	// A second daemon on the same store file refuses to start.
	out2, err := exec.Command(milterdBinary(t), "run", "-config", cfg, "-data-dir", dir,
		"-listen", "inet:"+testenv.FreeAddr(t), "-metrics-listen", "off").CombinedOutput()
	if err == nil || !strings.Contains(string(out2), "in use by another process") {
		t.Errorf("second daemon on the same store: err %v, output:\n%s", err, out2)
	}

	// While the daemon holds the store, the command refuses to open it
	// and, without a metrics listener to ask, says what to do.
	refused := runVotes(t, 1, "list", "-config", cfg, "-data-dir", dir, "-metrics-listen", "off")
	if !strings.Contains(refused, "in use by another process") || !strings.Contains(refused, "metrics_listen") {
		t.Errorf("votes list against a held store without metrics listener:\n%s", refused)
	}
	// A wrong token is refused by the endpoint.
	if code := adminStatus(t, d2.httpAddr, "not-the-token"); code != 401 {
		t.Errorf("admin endpoint with a wrong token: status %d, want 401", code)
	}

	removed := runVotes(t, 0, "remove", "-config", cfg, "-data-dir", dir, "-metrics-listen", d2.httpAddr, "-voter", recipientAddr(12))
	if !strings.Contains(removed, "removed ") || strings.Contains(removed, "removed 0 ") {
		t.Errorf("votes remove: %s", removed)
	}
	wantPrefix(t, "copy to the voter after her votes were removed", m.verdict(12), "yes; ", "")
}

// adminStatus asks the admin endpoint with a token and returns the HTTP
// status.
func adminStatus(t *testing.T, addr, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/admin/votes", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Votes live in Redis: a second daemon sharing the Redis (and the secret)
// applies the votes recorded through the first, also after Redis restarts
// from its append-only file.
func TestFeedbackInRedis(t *testing.T) {
	rd := testenv.StartRedis(t, testenv.RedisOptions{Config: []string{"appendonly yes", "appendfsync always"}})
	url := "redis://" + rd.Addr()
	cfg := writeConfig(t, feedbackConfig)
	dir := t.TempDir() // the secret key; both daemons share it
	d := startDaemon(t, "-config", cfg, "-data-dir", dir, "-redis", url)
	m := newMailer(t, d, 13)
	for r := 1; r <= 12; r++ {
		m.verdict(r)
	}
	if res := m.report("not-bulk", 12, mtaclient.Envelope{AuthUser: recipientAddr(12)}); res.Action.Type != milter.ActionDiscard {
		t.Fatalf("report: action %v, want discard", res.Action)
	}
	d.stop(t)
	rd.Restart()

	d2 := startDaemon(t, "-config", cfg, "-data-dir", dir, "-redis", url)
	m.d, m.cl = d2, mtaclient.New("tcp", d2.milterAddr)
	wantPrefix(t, "copy to the voter through another daemon", m.verdict(12), "no; ", "; feedback=user-not-bulk")
	wantPrefix(t, "copy to another through another daemon", m.verdict(13), "yes; ", "")
	// With Redis the command talks to Redis directly, daemon or not.
	out := runVotes(t, 0, "list", "-config", cfg, "-data-dir", dir, "-redis", url, "-voter", recipientAddr(12))
	if n := strings.Count(out, "not-bulk"); n < 10 {
		t.Errorf("votes list -redis: %d votes, want at least 10:\n%s", n, out)
	}
}

// feedback.vote_ttl reaches the store: the voter's copy is not tagged, the
// admin lists the vote, and Redis keeps every vote key for the horizon
// plus the hour of grace (store/doc.go), not the default 180 days. How a
// vote stops counting and being listed at the horizon is the conformance
// suite's VoteHorizonNow, on a clock it fixes: waiting out a short TTL
// here made a stall between the vote and the next copy fail the test.
func TestVotesExpire(t *testing.T) {
	rd := testenv.StartRedis(t, testenv.RedisOptions{})
	const ttl = 2 * time.Hour
	cfg := writeConfig(t, "feedback:\n  vote_ttl: 2h\n")
	d := startDaemon(t, "-config", cfg, "-redis", "redis://"+rd.Addr())
	m := newMailer(t, d, 15)
	for r := 1; r <= 12; r++ {
		m.verdict(r)
	}
	m.report("not-bulk", 12, mtaclient.Envelope{AuthUser: recipientAddr(12)})
	wantPrefix(t, "copy to the voter within vote_ttl", m.verdict(12), "no; ", "; feedback=user-not-bulk")
	out := runVotes(t, 0, "list", "-config", cfg, "-data-dir", d.dataDir, "-redis", "redis://"+rd.Addr(), "-voter", recipientAddr(12))
	if !strings.Contains(out, "not-bulk") {
		t.Errorf("the vote is not listed:\n%s", out)
	}
	ctx := context.Background()
	keys, err := rd.Client().Keys(ctx, "*:[uv]:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("vote keys in Redis: %v, %v", keys, err)
	}
	for _, k := range keys {
		// The key was written within the test: its TTL has run down by
		// the test's duration, never by an hour.
		if left := rd.Client().PTTL(ctx, k).Val(); left <= ttl || left > ttl+time.Hour {
			t.Fatalf("%s of %d vote keys expires in %v, want within (%v, %v]", k, len(keys), left, ttl, ttl+time.Hour)
		}
	}
}

// editedCopy rewrites every other body line of a campaign copy and its
// subject, as a spammer edits each copy: the edited copy shares keys with
// the original in too few families for a vote on the original's keys to
// cover it, and still joins the original's campaign.
func editedCopy(raw []byte, edit int) []byte {
	head, body, _ := bytes.Cut(raw, []byte("\n\n"))
	head = bytes.Replace(head, []byte("your spring planting guide is here"), fmt.Appendf(nil, "spring planting guide, edition %d", edit), 1)
	lines := strings.Split(string(body), "\n")
	for i, l := range lines {
		if i%2 == 0 && strings.TrimSpace(l) != "" {
			lines[i] = fmt.Sprintf("Offer %d for our readers: %s", edit*7+i, strings.ToUpper(l))
		}
	}
	return append(append(head, "\n\n"...), strings.Join(lines, "\n")...)
}

// campaignOf returns the campaign id a verdict header names.
func campaignOf(v string) string {
	_, rest, _ := strings.Cut(v, "campaign=")
	id, _, _ := strings.Cut(rest, ";")
	return id
}

// A vote follows the campaign through the daemon: after her "not bulk" on
// the copy she got, an edited copy of the same campaign is not tagged for
// her and is tagged for the others.
func TestFeedbackFollowsTheCampaign(t *testing.T) {
	d := startDaemon(t, "-config", writeConfig(t, feedbackConfig))
	m := newMailer(t, d, 15)
	var id string
	for r := 1; r <= 12; r++ {
		id = campaignOf(m.verdict(r))
	}
	if res := m.report("not-bulk", 12, mtaclient.Envelope{AuthUser: recipientAddr(12)}); res.Action.Type != milter.ActionDiscard {
		t.Fatalf("report: action %v, want discard; log:\n%s", res.Action, d.Logs())
	}
	send := func(edit int, rcpts ...int) string {
		t.Helper()
		addrs := make([]string, len(rcpts))
		for i, r := range rcpts {
			addrs[i] = recipientAddr(r)
		}
		raw := editedCopy(campaign(100+edit, addrs[0], recipientName(rcpts[0]), newsletterWords()), edit)
		res, err := m.cl.Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: addrs}, raw)
		if err != nil {
			t.Fatal(err)
		}
		return verdictOf(t, res)
	}
	v := send(1, 30)
	wantPrefix(t, "edited copy to someone else", v, "yes; ", "")
	if got := campaignOf(v); got != id || id == "" {
		t.Fatalf("edited copy: campaign %q, want the campaign %q (X-Bulk %q)", got, id, v)
	}
	wantPrefix(t, "edited copy to the voter", send(2, 12), "no; ", "; feedback=user-not-bulk")
	wantPrefix(t, "edited copy to the voter and another", send(3, 12, 31), "yes; ", "; feedback=user-not-bulk")
}
