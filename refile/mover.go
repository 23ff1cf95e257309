package refile

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// sysexits codes doveadm answers with.
const (
	exDataErr = 65 // mailbox create: it exists already
	exNoUser  = 67 // no such user
)

// query finds a copy in INBOX by its Message-ID (with its angle
// brackets, so that one id cannot match inside another). Searching INBOX
// only is what lets a user's own filing win and makes a retry harmless.
func query(messageID string) []string {
	return []string{"mailbox", "INBOX", "header", "Message-ID", messageID}
}

// DoveadmHTTP moves copies through Dovecot's doveadm HTTP API
// (service doveadm { inet_listener http }), one request per batch: for
// each copy a search of INBOX, a create of the folder and a move.
type DoveadmHTTP struct {
	// URL is the API endpoint, e.g. http://127.0.0.1:8080/doveadm/v1.
	URL string
	// APIKey (doveadm_api_key) is sent as X-Dovecot-API; otherwise
	// Password (doveadm_password) as the Basic auth of user "doveadm".
	APIKey, Password string
	// Folder is the destination mailbox, e.g. "Bulk".
	Folder string
	// Timeout bounds one request (10s).
	Timeout time.Duration
	// Client is the HTTP client; nil means a plain one.
	Client *http.Client
}

// maxBatch bounds the copies of one HTTP request.
const maxBatch = 100

// Move implements Mover.
func (d *DoveadmHTTP) Move(ctx context.Context, _ string, copies []Copy) []Result {
	out := make([]Result, 0, len(copies))
	for len(copies) > 0 {
		n := min(len(copies), maxBatch)
		out = append(out, d.batch(ctx, copies[:n])...)
		copies = copies[n:]
	}
	return out
}

// batch searches INBOX for every copy in one request, then creates the
// folder and moves, in a second request, only the copies found exactly
// once: a Message-ID that more than one INBOX message has is not
// evidence enough to move any of them.
func (d *DoveadmHTTP) batch(ctx context.Context, copies []Copy) []Result {
	out := make([]Result, len(copies))
	var search []any
	for i, c := range copies {
		search = append(search, []any{"search", map[string]any{"user": c.Recipient, "query": query(c.MessageID)}, "s" + strconv.Itoa(i)})
	}
	found, err := d.call(ctx, search)
	if err != nil {
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	var moves []any
	toMove := make([]bool, len(copies))
	created := map[string]bool{}
	for i, c := range copies {
		s, ok := found["s"+strconv.Itoa(i)]
		switch {
		case !ok:
			out[i].Err = errors.New("doveadm http: no answer to the search")
		case s.code == exNoUser:
			out[i].Outcome = UnknownUser
		case !s.ok:
			out[i].Err = fmt.Errorf("doveadm http: search failed with exit code %d", s.code)
		case s.found == 0:
			out[i].Outcome = NotInInbox
		case s.found > 1:
			out[i].Outcome = Ambiguous
		default:
			toMove[i] = true
			if !created[c.Recipient] {
				created[c.Recipient] = true
				moves = append(moves, []any{"mailboxCreate", map[string]any{"user": c.Recipient, "mailbox": []string{d.Folder}}, "c" + strconv.Itoa(i)})
			}
			moves = append(moves, []any{"move", map[string]any{"user": c.Recipient, "destinationMailbox": d.Folder, "query": query(c.MessageID)}, "m" + strconv.Itoa(i)})
		}
	}
	if len(moves) == 0 {
		return out
	}
	moved, err := d.call(ctx, moves)
	for i := range copies {
		m, asked := moved["m"+strconv.Itoa(i)]
		switch {
		case !toMove[i]: // its outcome is the search's
		case err != nil:
			out[i].Err = err
		case !asked || !m.ok:
			out[i].Err = fmt.Errorf("doveadm http: move to %q failed with exit code %d", d.Folder, m.code)
		default:
			out[i].Outcome = Moved
		}
	}
	return out
}

// doveadmAnswer is the API's answer to one command.
type doveadmAnswer struct {
	ok    bool
	found int // messages a search found
	code  int // the exit code of an error
}

// call sends one request of commands and returns the answers by tag.
func (d *DoveadmHTTP) call(ctx context.Context, cmds []any) (map[string]doveadmAnswer, error) {
	body, err := json.Marshal(cmds)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, orDefault(d.Timeout, 10*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if d.APIKey != "" {
		req.Header.Set("Authorization", "X-Dovecot-API "+base64.StdEncoding.EncodeToString([]byte(d.APIKey)))
	} else {
		req.SetBasicAuth("doveadm", d.Password)
	}
	client := d.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("doveadm http: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("doveadm http: read reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("doveadm http: %s: %s", resp.Status, bytes.TrimSpace(data[:min(len(data), 200)]))
	}
	// Each reply is ["doveadmResponse", result, tag] or
	// ["error", {"type": ..., "exitCode": N}, tag].
	var replies [][]json.RawMessage
	if err := json.Unmarshal(data, &replies); err != nil {
		return nil, fmt.Errorf("doveadm http: reply: %w", err)
	}
	answers := map[string]doveadmAnswer{}
	for _, r := range replies {
		if len(r) != 3 {
			continue
		}
		var kind, tag string
		if json.Unmarshal(r[0], &kind) != nil || json.Unmarshal(r[2], &tag) != nil {
			continue
		}
		switch kind {
		case "doveadmResponse":
			var list []json.RawMessage
			_ = json.Unmarshal(r[1], &list)
			answers[tag] = doveadmAnswer{ok: true, found: len(list)}
		case "error":
			var e struct {
				Type     string `json:"type"`
				ExitCode int    `json:"exitCode"`
			}
			_ = json.Unmarshal(r[1], &e)
			answers[tag] = doveadmAnswer{code: e.ExitCode}
		}
	}
	return answers, nil
}

// DoveadmCommand moves copies with the doveadm command, as root or a user
// allowed to run it: search, mailbox create, move.
type DoveadmCommand struct {
	// Path is the doveadm program ("doveadm" on $PATH when empty).
	Path string
	// Config is passed as -c when set.
	Config string
	// Folder is the destination mailbox.
	Folder string
	// Timeout bounds one doveadm run (30s).
	Timeout time.Duration
}

// Move implements Mover.
func (d *DoveadmCommand) Move(ctx context.Context, _ string, copies []Copy) []Result {
	out := make([]Result, len(copies))
	created := map[string]bool{}
	for i, c := range copies {
		found, code, err := d.run(ctx, append([]string{"search", "-u", c.Recipient}, query(c.MessageID)...))
		hits := strings.TrimSpace(found) // a line a message
		switch {
		case code == exNoUser:
			out[i].Outcome = UnknownUser
			continue
		case err != nil:
			out[i].Err = err
			continue
		case hits == "":
			out[i].Outcome = NotInInbox
			continue
		case strings.Contains(hits, "\n"):
			out[i].Outcome = Ambiguous
			continue
		}
		if !created[c.Recipient] {
			created[c.Recipient] = true
			if _, code, err := d.run(ctx, []string{"mailbox", "create", "-u", c.Recipient, d.Folder}); err != nil && code != exDataErr {
				out[i].Err = err
				continue
			}
		}
		if _, _, err := d.run(ctx, append([]string{"move", "-u", c.Recipient, d.Folder}, query(c.MessageID)...)); err != nil {
			out[i].Err = err
			continue
		}
		out[i].Outcome = Moved
	}
	return out
}

// run runs doveadm and returns its output and exit code.
func (d *DoveadmCommand) run(ctx context.Context, args []string) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, orDefault(d.Timeout, 30*time.Second))
	defer cancel()
	if d.Config != "" {
		args = append([]string{"-c", d.Config}, args...)
	}
	path := d.Path
	if path == "" {
		path = "doveadm"
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return stdout.String(), exit.ExitCode(), fmt.Errorf("doveadm %s: %w: %s", args[0], err, firstLine(stderr.String()))
	}
	if err != nil {
		return "", -1, fmt.Errorf("doveadm %s: %w", args[0], err)
	}
	return stdout.String(), 0, nil
}

// HookRequest is the JSON a hook receives: one campaign's copies to move
// from INBOX to Folder.
type HookRequest struct {
	Campaign string `json:"campaign"`
	Folder   string `json:"folder"`
	Copies   []Copy `json:"copies"`
}

// HookReply is what a hook may answer (stdout of a command, body of a
// URL): one status per copy, in order, "moved", "not_in_inbox" or
// "unknown_user". An empty answer means every copy was moved.
type HookReply struct {
	Results []string `json:"results"`
}

// Hook hands the copies to another mail store: a command that reads the
// request on its standard input, or a URL that receives it in a POST.
// Success is exit status 0, or a 2xx reply; anything else is retried, so
// the hook must be idempotent and move (never copy and delete).
type Hook struct {
	// Command is the program and its arguments; or URL.
	Command []string
	URL     string
	// Folder is passed in the request.
	Folder string
	// Timeout bounds one run or request (30s).
	Timeout time.Duration
	// Client is the HTTP client; nil means a plain one.
	Client *http.Client
}

// Move implements Mover.
func (h *Hook) Move(ctx context.Context, campaign string, copies []Copy) []Result {
	all := func(err error) []Result {
		out := make([]Result, len(copies))
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	body, err := json.Marshal(HookRequest{Campaign: campaign, Folder: h.Folder, Copies: copies})
	if err != nil {
		return all(err)
	}
	ctx, cancel := context.WithTimeout(ctx, orDefault(h.Timeout, 30*time.Second))
	defer cancel()
	var reply []byte
	if len(h.Command) > 0 {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, h.Command[0], h.Command[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(body), &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return all(fmt.Errorf("refile hook %s: %w: %s", h.Command[0], err, firstLine(stderr.String())))
		}
		reply = stdout.Bytes()
	} else {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
		if err != nil {
			return all(err)
		}
		req.Header.Set("Content-Type", "application/json")
		client := h.Client
		if client == nil {
			client = http.DefaultClient
		}
		resp, err := client.Do(req)
		if err != nil {
			return all(fmt.Errorf("refile hook: %w", err))
		}
		defer resp.Body.Close()
		reply, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return all(fmt.Errorf("refile hook: read reply: %w", err))
		}
		if resp.StatusCode/100 != 2 {
			return all(fmt.Errorf("refile hook: %s", resp.Status))
		}
	}
	out := make([]Result, len(copies))
	if len(bytes.TrimSpace(reply)) == 0 {
		return out // all moved
	}
	var hr HookReply
	if err := json.Unmarshal(reply, &hr); err != nil || len(hr.Results) != len(copies) {
		return all(fmt.Errorf("refile hook: reply is not {\"results\": [...]} with %d statuses", len(copies)))
	}
	for i, s := range hr.Results {
		switch s {
		case "moved":
			out[i].Outcome = Moved
		case "not_in_inbox":
			out[i].Outcome = NotInInbox
		case "unknown_user":
			out[i].Outcome = UnknownUser
		case "ambiguous_message_id":
			out[i].Outcome = Ambiguous
		default:
			out[i].Err = fmt.Errorf("refile hook: status %q", s)
		}
	}
	return out
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
