package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/milter"
	"github.com/bulkmilter/bulkmilter/refile"
	"github.com/bulkmilter/bulkmilter/store"
)

var _ refile.Observer = (*metrics.Metrics)(nil)

// newRefiler builds the refiler of a configuration (refile.enabled).
func newRefiler(cfg *config.Config, votes *votesOf, log *slog.Logger, met *metrics.Metrics) (*refile.Refiler, error) {
	r := cfg.Refile
	var mv refile.Mover
	switch r.Mover {
	case "doveadm-http":
		h := &refile.DoveadmHTTP{URL: r.Doveadm.URL, Folder: r.Folder, Timeout: r.Timeout.D()}
		var err error
		if r.Doveadm.APIKeyFile != "" {
			h.APIKey, err = readSecret(r.Doveadm.APIKeyFile)
		} else {
			h.Password, err = readSecret(r.Doveadm.PasswordFile)
		}
		if err != nil {
			return nil, fmt.Errorf("refile: %w", err)
		}
		mv = h
	case "doveadm":
		mv = &refile.DoveadmCommand{Path: r.Doveadm.Command, Config: r.Doveadm.Config, Folder: r.Folder, Timeout: r.Timeout.D()}
	case "hook":
		mv = &refile.Hook{Command: r.Hook.Command, URL: r.Hook.URL, Folder: r.Folder, Timeout: r.Timeout.D()}
	default:
		return nil, fmt.Errorf("refile: unknown mover %q", r.Mover)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil && cfg.Refile.File == "" {
		return nil, fmt.Errorf("refile: %w", err)
	}
	return refile.New(refile.Options{
		Mover:          mv,
		Votes:          votes,
		File:           cfg.RefileFile(),
		Window:         cfg.Store.Window.D(),
		MaxPerCampaign: r.MaxPerCampaign,
		MaxEntries:     r.MaxEntries,
		MaxQueue:       r.MaxQueue,
		Retries:        r.Retries,
		Backoff:        r.Backoff.D(),
		MaxBackoff:     r.MaxBackoff.D(),
		VotesTimeout:   r.Timeout.D(),
		Observer:       met, // nil-safe
		Logger:         log,
	})
}

// readSecret reads a one-line credential file.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read credential: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// refileKey identifies the refiling settings, to tell a reload that
// changes them (they apply after a restart).
func refileKey(cfg *config.Config) string {
	return fmt.Sprintf("%+v|%s|%s", cfg.Refile, cfg.RefileFile(), cfg.Store.Window.D())
}

// votesOf asks the store whether a recipient voted "not bulk" on any of
// the keys of the message that made a campaign bulk: her decision wins.
// A reload that opens another store points it there.
type votesOf struct{ st atomic.Pointer[adminBox] }

type adminBox struct{ store.Admin }

func (v *votesOf) use(st store.Admin) { v.st.Store(&adminBox{st}) }

func (v *votesOf) VotedNotBulk(ctx context.Context, rcpt string, keys []string) (bool, error) {
	if len(keys) == 0 {
		return false, nil
	}
	votes, err := v.st.Load().ListVotes(ctx, store.VoteQuery{Keys: keys, Voter: rcpt})
	if err != nil {
		return false, err
	}
	for _, e := range votes {
		if e.Kind == store.VoteNotBulk {
			return true, nil
		}
	}
	return false, nil
}

// refiling is the pipeline with refiling: after each verdict, the copies
// of a message that is not bulk are remembered for its campaign, and a
// bulk one tells the refiler the campaign crossed. Both calls are in
// memory only: the MTA never waits for a refile.
type refiling struct {
	milter.Pipeline
	r *refile.Refiler
	// domains limits refiling to the mail store's own recipients;
	// except are never routed (actions.except_*, header_only_*).
	domains, except milter.Recipients
	anyDomain       bool
}

func (p *refiling) Check(ctx context.Context, msg *detect.Message) detect.Verdict {
	v := p.Pipeline.Check(ctx, msg)
	if v.Err != nil || v.Unsigned {
		return v
	}
	id := messageID(msg.Header.Get("Message-Id"))
	rcpts := msg.Recipients
	if v.ExemptSender != "" {
		rcpts = nil // actions.except_senders: never routed, its copies stay where they are
	}
	var copies []refile.Copy
	for _, rc := range rcpts {
		rc = detect.NormaliseAddress(rc)
		if rc == "" || p.except.Match(rc) || (!p.anyDomain && !p.domains.Match(rc)) {
			continue
		}
		copies = append(copies, refile.Copy{Recipient: mailboxUser(rc), MessageID: id})
	}
	// A recipient whose own "bulk" vote made the message bulk for her
	// got it routed already; remembering her copy is harmless: a copy no
	// longer in INBOX is skipped.
	p.r.Note(v, copies, msg.Time)
	return v
}

// mailboxUser is the mail store's user for a recipient: the address
// without its "+detail" (the delimiter the milter's routing uses too),
// the user whose INBOX the copy went to.
func mailboxUser(rc string) string {
	local, domain, ok := strings.Cut(rc, "@")
	if base, _, found := strings.Cut(local, "+"); ok && found && base != "" {
		return base + "@" + domain
	}
	return rc
}

// messageID returns the first <id> of a Message-ID value, or the value
// trimmed when it has no angle brackets.
func messageID(v string) string {
	v = strings.Join(strings.Fields(v), " ")
	if i := strings.IndexByte(v, '<'); i >= 0 {
		if j := strings.IndexByte(v[i:], '>'); j > 0 {
			return v[i : i+j+1]
		}
	}
	return v
}
