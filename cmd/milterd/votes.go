package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/bulkmilter/bulkmilter/admin"
	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/daemon"
	"github.com/bulkmilter/bulkmilter/feedback"
	"github.com/bulkmilter/bulkmilter/internal/cli"
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
// secret key, so only someone who can read the secret file can use it
// (package admin).

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
		return cli.ErrUsage
	}
	sub := args[0]
	fs := cli.NewFlagSet("milterd votes "+sub, stderr)
	cf := cli.ConfigFlags{Daemon: true}
	cf.Register(fs)
	var q store.VoteQuery
	var key string
	var asJSON bool
	fs.Usage = func() {
		fmt.Fprint(stderr, votesUsage+"\nFlags of milterd votes "+sub+":\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&q.Voter, "voter", "", "the voter's `address` or login")
	fs.StringVar(&q.VoterID, "voter-id", "", "the voter's pseudonym (`ID`) as listed")
	fs.StringVar(&key, "key", "", "list: signature id `prefix`; remove: one signature id")
	if sub == "list" {
		fs.IntVar(&q.Limit, "limit", 100, "list at most `N` votes (0: all)")
		fs.BoolVar(&asJSON, "json", false, "print JSON lines")
	}
	if err := cli.ParseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "milterd votes %s: unexpected arguments %q\n", sub, fs.Args())
		return cli.ErrUsage
	}
	if sub == "list" {
		q.KeyPrefix = key
	} else {
		if key != "" {
			q.Keys = []string{key}
		}
		if q.Voter == "" && q.VoterID == "" && key == "" {
			fmt.Fprintln(stderr, "milterd votes remove: name -voter, -voter-id or -key")
			return cli.ErrUsage
		}
	}
	cfg, err := cf.Load()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return cli.ErrUsage
	}
	q.Voter = feedback.Voter(q.Voter, cfg.Feedback.LoginDomain)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, closeAdmin, err := openVotes(cfg)
	if err != nil {
		return err
	}
	defer closeAdmin()
	if sub == "remove" {
		n, err := a.RemoveVotes(ctx, q)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed %d votes\n", n)
		return nil
	}
	votes, err := a.ListVotes(ctx, q)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, v := range admin.ToJSON(votes) {
			if err := enc.Encode(v); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVOTER_ID\tVOTER\tKIND\tTIME")
	for _, v := range admin.ToJSON(votes) {
		voter := v.Voter
		if voter == "" {
			voter = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Key, v.VoterID, voter, v.Kind, v.Time.Format(time.RFC3339))
	}
	return tw.Flush()
}

// openVotes returns where the command lists and removes votes: the store,
// opened by the command, or the running daemon that holds it.
func openVotes(cfg *config.Config) (admin.Votes, func(), error) {
	path := cfg.SecretKeyPath()
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("no secret key at %s: no daemon has run with this configuration (check -config and -data-dir)", path)
	}
	secret, _, err := daemon.LoadSecret(path)
	if err != nil {
		return nil, nil, err
	}
	st, _, err := daemon.OpenStore(cfg, secret, slog.New(slog.DiscardHandler), nil)
	if errors.Is(err, daemon.ErrStoreBusy) {
		if cfg.MetricsListen == "" {
			return nil, nil, fmt.Errorf("%w; the daemon holding it has no metrics listener to ask: stop milterd, or set metrics_listen (and restart it) to manage votes while it runs", err)
		}
		return admin.NewClient(cfg.MetricsListen, admin.Token(secret)), func() {}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return st, func() {
		if err := st.Close(); err != nil {
			slog.Error("close store", "err", err)
		}
	}, nil
}
