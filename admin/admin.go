// Package admin is the daemon's votes administration over HTTP: the
// /admin/votes endpoints a running daemon serves beside /metrics, and the
// client "milterd votes" uses when the daemon holds the embedded store's
// file. Only the daemon's own host, carrying a token derived from the
// secret key, may use it: whoever can read the secret file may administer
// votes (and could open the store anyway), and the token does not reveal
// the secret.
//
// It may import store and the standard library.
package admin

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bulkmilter/bulkmilter/store"
)

// Token derives the endpoint's credential from the secret key.
func Token(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("bulkmilter votes admin"))
	return hex.EncodeToString(m.Sum(nil))
}

// Votes is what the endpoint needs of a store.
type Votes interface {
	ListVotes(ctx context.Context, q store.VoteQuery) ([]store.VoteEntry, error)
	RemoveVotes(ctx context.Context, q store.VoteQuery) (int, error)
}

// Vote is one vote as the endpoint and "milterd votes -json" print it.
type Vote struct {
	Key     string    `json:"key"`
	VoterID string    `json:"voter_id"`
	Voter   string    `json:"voter,omitempty"`
	Kind    string    `json:"kind"`
	Time    time.Time `json:"time"`
}

// ToJSON converts store entries to their printed form.
func ToJSON(es []store.VoteEntry) []Vote {
	out := make([]Vote, len(es))
	for i, e := range es {
		out[i] = Vote{Key: e.Key, VoterID: e.VoterID, Voter: e.Voter, Kind: e.Kind.String(), Time: e.Time.UTC()}
	}
	return out
}

// requestTimeout bounds one list or removal.
const requestTimeout = time.Minute

// Routes adds GET /admin/votes (list) and POST /admin/votes/remove to mux.
// current returns the store and token in force for each request: a reload
// may change both.
func Routes(mux *http.ServeMux, current func() (Votes, string), log *slog.Logger) {
	h := &handler{current: current, log: log}
	mux.HandleFunc("/admin/votes", h.serve)
	mux.HandleFunc("/admin/votes/remove", h.serve)
}

type handler struct {
	current func() (Votes, string)
	log     *slog.Logger
}

// authorised answers 403 or 401 unless the request comes from the
// daemon's own host with the token.
func authorised(w http.ResponseWriter, r *http.Request, token string) bool {
	if !sameHost(r) {
		http.Error(w, "the admin endpoint answers only its own host", http.StatusForbidden)
		return false
	}
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
		http.Error(w, "missing or wrong token", http.StatusUnauthorized)
		return false
	}
	return true
}

func (h *handler) serve(w http.ResponseWriter, r *http.Request) {
	st, token := h.current()
	if !authorised(w, r, token) {
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
	// The server's write timeout is shorter than a long listing may take;
	// this request, authorised, gets the store's budget and a margin.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(requestTimeout + 10*time.Second))
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	var out any
	if remove {
		n, err := st.RemoveVotes(ctx, q)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.log.Info("votes removed by admin", "removed", n, "by_voter", q.Voter != "" || q.VoterID != "", "by_key", len(q.Keys) > 0)
		out = map[string]int{"removed": n}
	} else {
		votes, err := st.ListVotes(ctx, q)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out = ToJSON(votes)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// Explainer explains one raw message without recording anything (package
// explain); the result is printed as JSON.
type Explainer interface {
	Explain(ctx context.Context, raw []byte, rcpts []string, name string) any
}

// MaxExplainBytes bounds a message posted to /admin/explain.
const MaxExplainBytes = 16 << 20

// ExplainRoute adds POST /admin/explain to mux: the body is a raw message,
// the query's rcpt values its envelope recipients and name its name; the
// answer is the explanation as JSON. Access as for the votes: the
// daemon's own host with the token.
func ExplainRoute(mux *http.ServeMux, current func() (Explainer, string)) {
	mux.HandleFunc("/admin/explain", func(w http.ResponseWriter, r *http.Request) {
		ex, token := current()
		if !authorised(w, r, token) {
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "use POST /admin/explain with the message as the body", http.StatusMethodNotAllowed)
			return
		}
		raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxExplainBytes))
		if err != nil {
			http.Error(w, "read message: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		q := r.URL.Query()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ex.Explain(ctx, raw, q["rcpt"], q.Get("name")))
	})
}

// Explain asks the daemon to explain a raw message; out receives the JSON
// answer.
func (c *Client) Explain(ctx context.Context, raw []byte, rcpts []string, name string, out any) error {
	q := url.Values{"rcpt": rcpts}
	if name != "" {
		q.Set("name", name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+"/admin/explain?"+q.Encode(), bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("ask the running daemon: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("the running daemon answered %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return json.NewDecoder(resp.Body).Decode(out)
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

// Client talks to a running daemon's endpoint.
type Client struct {
	// Base is the daemon's metrics listener, "http://HOST:PORT".
	Base  string
	Token string
	HTTP  *http.Client
}

// NewClient returns a client of the daemon listening at hostPort.
func NewClient(hostPort, token string) *Client {
	return &Client{Base: "http://" + hostPort, Token: token, HTTP: &http.Client{Timeout: requestTimeout}}
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

func (c *Client) do(ctx context.Context, method, path string, q store.VoteQuery, out any) error {
	var body io.Reader
	u := c.Base + path
	if method == http.MethodPost {
		body = strings.NewReader(queryValues(q).Encode())
	} else {
		u += "?" + queryValues(q).Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.HTTP.Do(req)
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

// ListVotes lists the votes q selects.
func (c *Client) ListVotes(ctx context.Context, q store.VoteQuery) ([]store.VoteEntry, error) {
	var vs []Vote
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

// RemoveVotes removes the votes q selects and returns how many.
func (c *Client) RemoveVotes(ctx context.Context, q store.VoteQuery) (int, error) {
	var r struct {
		Removed int `json:"removed"`
	}
	err := c.do(ctx, http.MethodPost, "/admin/votes/remove", q, &r)
	return r.Removed, err
}
