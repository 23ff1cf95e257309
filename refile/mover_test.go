package refile

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// DoveadmHTTPConfig is what a dovecot.conf needs for the doveadm HTTP API
// on a loopback port.
func doveadmHTTPConfig(port int, password string) string {
	return fmt.Sprintf("doveadm_password = %s\nservice doveadm {\n  inet_listener http {\n    address = 127.0.0.1\n    port = %d\n  }\n}\n", password, port)
}

func deliver(t *testing.T, d *testenv.Dovecot, to, id string) {
	t.Helper()
	deliverAs(t, d, to, id, id)
}

// deliverAs delivers a message of that Message-ID and Subject.
func deliverAs(t *testing.T, d *testenv.Dovecot, to, id, subject string) {
	t.Helper()
	msg := "From: news@shop.example\r\nTo: " + to + "\r\nSubject: " + subject + "\r\nMessage-ID: " + id + "\r\n\r\nHello.\r\n"
	if err := d.Deliver("news@shop.example", []string{to}, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// subjects returns the Subjects of a user's folder, in delivery order.
func subjects(t *testing.T, d *testenv.Dovecot, user, folder string) []string {
	t.Helper()
	msgs, err := d.Messages(user, folder)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		for _, line := range strings.Split(string(m.Data), "\n") {
			if s, ok := strings.CutPrefix(line, "Subject: "); ok {
				out = append(out, strings.TrimSpace(s))
				break
			}
		}
	}
	return out
}

// Every mover against a real Dovecot: a copy in INBOX is moved (once,
// also when asked twice), a copy its user filed elsewhere stays, mail
// with another Message-ID stays, an unknown user is skipped, and a copy
// whose Message-ID another INBOX message of its user has too (the
// sender's to write: a forged or reused one) is not moved, nor is the
// other message.
func TestMoversDovecot(t *testing.T) {
	port := testenv.FreePort(t)
	d := testenv.StartDovecot(t, testenv.DovecotOptions{Config: doveadmHTTPConfig(port, "s3cret")})
	url := fmt.Sprintf("http://127.0.0.1:%d/doveadm/v1", port)
	movers := map[string]Mover{
		"http":    &DoveadmHTTP{URL: url, Password: "s3cret", Folder: "Bulk"},
		"command": &DoveadmCommand{Path: testenv.Program(t, "doveadm"), Config: d.ConfigFile(), Folder: "Bulk"},
	}
	for name, mv := range movers {
		t.Run(name, func(t *testing.T) {
			alice, bob := "alice@example.test", "bob@example.test"
			id := func(s string) string { return "<" + name + "-" + s + "@shop.example>" }
			deliver(t, d, alice, id("c1"))
			deliver(t, d, alice, id("personal"))
			deliver(t, d, bob, id("c1"))
			carol := "carol@example.test"
			deliver(t, d, carol, id("c1"))
			deliverAs(t, d, carol, id("c1"), id("reply")) // a personal reply reusing the campaign's Message-ID
			// bob files his copy himself before the campaign crosses.
			if _, err := d.Doveadm("mailbox", "create", "-u", bob, "Keep-"+name); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Doveadm("move", "-u", bob, "Keep-"+name, "mailbox", "INBOX", "header", "Message-ID", id("c1")); err != nil {
				t.Fatal(err)
			}
			copies := []Copy{
				{Recipient: alice, MessageID: id("c1")},
				{Recipient: bob, MessageID: id("c1")},
				{Recipient: "nobody@example.test", MessageID: id("c1")},
				{Recipient: carol, MessageID: id("c1")},
			}
			want := []Result{{Outcome: Moved}, {Outcome: NotInInbox}, {Outcome: UnknownUser}, {Outcome: Ambiguous}}
			for attempt := range 2 {
				got := mv.Move(context.Background(), "c", copies)
				if len(got) != len(want) {
					t.Fatalf("attempt %d: %d results, want %d", attempt, len(got), len(want))
				}
				for i := range want {
					if got[i].Err != nil || got[i].Outcome != want[i].Outcome {
						t.Errorf("attempt %d, %s: got %+v, want outcome %d", attempt, copies[i].Recipient, got[i], want[i].Outcome)
					}
				}
				// A retry finds nothing left in INBOX: idempotent.
				want[0] = Result{Outcome: NotInInbox}
			}
			if got := subjects(t, d, alice, "Bulk"); !containsOnce(got, id("c1")) {
				t.Errorf("alice's Bulk = %v, want %s once", got, id("c1"))
			}
			if got := subjects(t, d, alice, "INBOX"); containsOnce(got, id("c1")) || !containsOnce(got, id("personal")) {
				t.Errorf("alice's INBOX = %v, want the personal message and not the campaign", got)
			}
			if got := subjects(t, d, bob, "Keep-"+name); !containsOnce(got, id("c1")) {
				t.Errorf("bob's own folder = %v, want his copy to stay", got)
			}
			if got := subjects(t, d, carol, "INBOX"); !containsOnce(got, id("c1")) || !containsOnce(got, id("reply")) {
				t.Errorf("carol's INBOX = %v, want both messages of the shared Message-ID left", got)
			}
			if got := subjects(t, d, bob, "Bulk"); len(got) != 0 && containsOnce(got, id("c1")) {
				t.Errorf("bob's Bulk = %v, want not his filed copy", got)
			}
		})
	}
}

func containsOnce(list []string, s string) bool {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n == 1
}

// A wrong password is an error to retry, never a skip.
func TestDoveadmHTTPUnauthorised(t *testing.T) {
	port := testenv.FreePort(t)
	d := testenv.StartDovecot(t, testenv.DovecotOptions{Config: doveadmHTTPConfig(port, "s3cret")})
	deliver(t, d, "alice@example.test", "<x@shop.example>")
	mv := &DoveadmHTTP{URL: fmt.Sprintf("http://127.0.0.1:%d/doveadm/v1", port), Password: "wrong", Folder: "Bulk"}
	got := mv.Move(context.Background(), "c", []Copy{{Recipient: "alice@example.test", MessageID: "<x@shop.example>"}})
	if len(got) != 1 || got[0].Err == nil || !strings.Contains(got[0].Err.Error(), "401") {
		t.Errorf("got %+v, want a 401 error", got)
	}
	if n := len(subjects(t, d, "alice@example.test", "INBOX")); n != 1 {
		t.Errorf("INBOX holds %d, want 1", n)
	}
}

func TestHookCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "request.json")
	script := filepath.Join(dir, "hook.sh")
	body := "#!/bin/sh\ncat > " + out + "\necho '{\"results\": [\"moved\", \"not_in_inbox\"]}'\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	copies := []Copy{{Recipient: "a@example.test", MessageID: "<1@x>"}, {Recipient: "b@example.test", MessageID: "<2@x>"}}
	got := (&Hook{Command: []string{script}, Folder: "Bulk"}).Move(context.Background(), "c7", copies)
	if len(got) != 2 || got[0] != (Result{Outcome: Moved}) || got[1] != (Result{Outcome: NotInInbox}) {
		t.Errorf("got %+v, want moved, not_in_inbox", got)
	}
	var req HookRequest
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &req); err != nil {
		t.Fatal(err)
	}
	if req.Campaign != "c7" || req.Folder != "Bulk" || len(req.Copies) != 2 || req.Copies[1] != copies[1] {
		t.Errorf("hook got %+v", req)
	}

	fail := filepath.Join(dir, "fail.sh")
	if err := os.WriteFile(fail, []byte("#!/bin/sh\necho 'imap down' >&2\nexit 75\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got = (&Hook{Command: []string{fail}}).Move(context.Background(), "c7", copies)
	if got[0].Err == nil || !strings.Contains(got[0].Err.Error(), "imap down") {
		t.Errorf("a failing hook: got %+v, want an error with its stderr", got)
	}
}

func TestHookURL(t *testing.T) {
	var got HookRequest
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	h := &Hook{URL: srv.URL, Folder: "Bulk"}
	copies := []Copy{{Recipient: "a@example.test", MessageID: "<1@x>"}}
	res := h.Move(context.Background(), "c1", copies)
	if len(res) != 1 || res[0] != (Result{Outcome: Moved}) || got.Copies[0] != copies[0] {
		t.Errorf("got %+v (request %+v), want moved", res, got)
	}
	status = http.StatusServiceUnavailable
	if res := h.Move(context.Background(), "c1", copies); res[0].Err == nil {
		t.Errorf("a 503: got %+v, want an error", res)
	}
}
