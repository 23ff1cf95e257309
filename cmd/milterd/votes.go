package main

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/feedback"
	"github.com/bulkmilter/bulkmilter/store"
)

// "milterd votes list|remove" lists and removes users' feedback votes.
//
// With Redis it talks to Redis like the daemon. The embedded store's file
// has one owner: when no daemon holds it, the command opens it itself
// (and writes it back on exit); while a daemon holds it (its lock,
// FILE.lock, is taken), the command asks that daemon over its metrics
// listener (metrics_listen), at /admin/votes. That endpoint answers only
// connections from the daemon's own host carrying a token derived from the
// secret key, so only someone who can read the secret file can use it.

func init() {
	offlineCommands = append(offlineCommands, command{"votes", "list or remove users' feedback votes (list|remove)", votesCommand})
}

// voteJSON is a vote on the admin endpoint and in -json output.
type voteJSON struct {
	Key     string    `json:"key"`
	VoterID string    `json:"voter_id"`
	Voter   string    `json:"voter,omitempty"`
	Kind    string    `json:"kind"`
	Time    time.Time `json:"time"`
}

func toJSON(es []store.VoteEntry) []voteJSON {
	out := make([]voteJSON, len(es))
	for i, e := range es {
		out[i] = voteJSON{Key: e.Key, VoterID: e.VoterID, Voter: e.Voter, Kind: e.Kind.String(), Time: e.Time.UTC()}
	}
	return out
}

const votesUsage = `usage:
  milterd votes list   [-voter ADDR | -voter-id ID] [-key PREFIX] [-limit N] [-json] [config flags]
  milterd votes remove (-voter ADDR | -voter-id ID | -key ID) [config flags]

Config flags are the daemon's (-config, -redis, -data-dir, -metrics-listen).
list -key matches a prefix of the signature id; remove -key names one id.
Voters are stored as pseudonyms (voter_id); -voter finds a user's votes by
her address or login as the daemon normalises it.
`

func votesCommand(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "remove") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "help") {
			fmt.Fprint(stdout, votesUsage)
			return flag.ErrHelp
		}
		fmt.Fprint(stderr, votesUsage)
		return errUsage
	}
	sub := args[0]
	fs := newFlagSet("votes "+sub, stderr)
	cf := configFlags{daemon: true}
	cf.register(fs)
	var q store.VoteQuery
	var key string
	var asJSON bool
	fs.StringVar(&q.Voter, "voter", "", "the voter's `address` or login")
	fs.StringVar(&q.VoterID, "voter-id", "", "the voter's pseudonym (`ID`) as listed")
	fs.StringVar(&key, "key", "", "list: signature id `prefix`; remove: one signature id")
	if sub == "list" {
		fs.IntVar(&q.Limit, "limit", 100, "list at most `N` votes (0: all)")
		fs.BoolVar(&asJSON, "json", false, "print JSON lines")
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "milterd votes %s: unexpected arguments %q\n", sub, fs.Args())
		return errUsage
	}
	if sub == "list" {
		q.KeyPrefix = key
	} else {
		if key != "" {
			q.Keys = []string{key}
		}
		if q.Voter == "" && q.VoterID == "" && key == "" {
			fmt.Fprintln(stderr, "milterd votes remove: name -voter, -voter-id or -key")
			return errUsage
		}
	}
	cfg, err := cf.load()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return errUsage
	}
	q.Voter = feedback.Voter(q.Voter, cfg.Feedback.LoginDomain)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := openVotesAdmin(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.close()
	if sub == "remove" {
		n, err := a.remove(ctx, q)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed %d votes\n", n)
		return nil
	}
	votes, err := a.list(ctx, q)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, v := range toJSON(votes) {
			if err := enc.Encode(v); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVOTER_ID\tVOTER\tKIND\tTIME")
	for _, v := range toJSON(votes) {
		voter := v.Voter
		if voter == "" {
			voter = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Key, v.VoterID, voter, v.Kind, v.Time.Format(time.RFC3339))
	}
	return tw.Flush()
}

// votesAdmin is where the command lists and removes votes: a store it
// opened, or a running daemon.
type votesAdmin struct {
	list   func(ctx context.Context, q store.VoteQuery) ([]store.VoteEntry, error)
	remove func(ctx context.Context, q store.VoteQuery) (int, error)
	close  func()
}

func openVotesAdmin(ctx context.Context, cfg *config.Config) (*votesAdmin, error) {
	path := cfg.SecretKeyPath()
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no secret key at %s: no daemon has run with this configuration (check -config and -data-dir)", path)
	}
	secret, _, err := loadSecret(path)
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, _, err := openStore(cfg, secret, quiet, nil)
	if errors.Is(err, errStoreBusy) {
		if cfg.MetricsListen == "" {
			return nil, fmt.Errorf("%w; the daemon holding it has no metrics listener to ask: stop milterd, or set metrics_listen (and restart it) to manage votes while it runs", err)
		}
		c := &adminClient{base: "http://" + cfg.MetricsListen, token: adminToken(secret), http: &http.Client{Timeout: time.Minute}}
		return &votesAdmin{list: c.list, remove: c.remove, close: func() {}}, nil
	}
	if err != nil {
		return nil, err
	}
	return &votesAdmin{
		list:   st.ListVotes,
		remove: st.RemoveVotes,
		close: func() {
			if err := st.Close(); err != nil {
				slog.Error("close store", "err", err)
			}
		},
	}, nil
}

// adminClient talks to a running daemon's /admin/votes.
type adminClient struct {
	base, token string
	http        *http.Client
}

func queryValues(q store.VoteQuery) url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("voter", q.Voter)
	set("voter_id", q.VoterID)
	set("key_prefix", q.KeyPrefix)
	if len(q.Keys) > 0 {
		v.Set("key", q.Keys[0])
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

func (c *adminClient) do(ctx context.Context, method, path string, q store.VoteQuery, out any) error {
	var body io.Reader
	u := c.base + path
	if method == http.MethodPost {
		body = strings.NewReader(queryValues(q).Encode())
	} else {
		u += "?" + queryValues(q).Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("ask the running daemon (the embedded store is in use): %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read the daemon's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the running daemon answered %s: %s", resp.Status, bytes.TrimSpace(data))
	}
	return json.Unmarshal(data, out)
}

func (c *adminClient) list(ctx context.Context, q store.VoteQuery) ([]store.VoteEntry, error) {
	var vs []voteJSON
	if err := c.do(ctx, http.MethodGet, "/admin/votes", q, &vs); err != nil {
		return nil, err
	}
	out := make([]store.VoteEntry, len(vs))
	for i, v := range vs {
		kind := store.VoteNone
		switch v.Kind {
		case "not-bulk":
			kind = store.VoteNotBulk
		case "bulk":
			kind = store.VoteBulk
		}
		out[i] = store.VoteEntry{Key: v.Key, VoterID: v.VoterID, Voter: v.Voter, Kind: kind, Time: v.Time}
	}
	return out, nil
}

func (c *adminClient) remove(ctx context.Context, q store.VoteQuery) (int, error) {
	var r struct {
		Removed int `json:"removed"`
	}
	err := c.do(ctx, http.MethodPost, "/admin/votes/remove", q, &r)
	return r.Removed, err
}

// adminRoutes adds the votes admin endpoint to the daemon's HTTP mux.
func (d *daemon) adminRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/admin/votes", d.adminVotes)
	mux.HandleFunc("/admin/votes/remove", d.adminVotes)
}

// adminVotes serves GET /admin/votes (list) and POST /admin/votes/remove.
func (d *daemon) adminVotes(w http.ResponseWriter, r *http.Request) {
	rt := d.current.Load()
	if !sameHost(r) {
		http.Error(w, "the votes admin endpoint answers only its own host", http.StatusForbidden)
		return
	}
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if subtle.ConstantTimeCompare([]byte(got), []byte(rt.adminToken)) != 1 {
		http.Error(w, "missing or wrong token", http.StatusUnauthorized)
		return
	}
	remove := r.URL.Path == "/admin/votes/remove"
	if remove != (r.Method == http.MethodPost) || (!remove && r.Method != http.MethodGet) {
		http.Error(w, "use GET /admin/votes or POST /admin/votes/remove", http.StatusMethodNotAllowed)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	q := store.VoteQuery{
		Voter:     r.Form.Get("voter"),
		VoterID:   r.Form.Get("voter_id"),
		KeyPrefix: r.Form.Get("key_prefix"),
	}
	if k := r.Form.Get("key"); k != "" {
		q.Keys = []string{k}
	}
	if l := r.Form.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			http.Error(w, "bad limit", http.StatusBadRequest)
			return
		}
		q.Limit = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	var out any
	if remove {
		n, err := rt.store.RemoveVotes(ctx, q)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d.log.Info("votes removed by admin", "removed", n, "by_voter", q.Voter != "" || q.VoterID != "", "by_key", len(q.Keys) > 0)
		out = map[string]int{"removed": n}
	} else {
		votes, err := rt.store.ListVotes(ctx, q)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out = toJSON(votes)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// sameHost reports whether a request comes from the daemon's own host:
// from loopback, or from the very address it reached (a connection to
// one's own interface address comes from that address).
func sameHost(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	lhost, _, err := net.SplitHostPort(local.String())
	return err == nil && net.ParseIP(lhost).Equal(ip)
}
