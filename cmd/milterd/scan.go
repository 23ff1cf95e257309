package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/daemon"
	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/internal/cli"
	"github.com/bulkmilter/bulkmilter/mailbox"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/signature"
)

// scanRecord is the JSON line printed per message.
type scanRecord struct {
	N          int               `json:"n"`
	Name       string            `json:"name"`
	MessageID  string            `json:"message_id,omitempty"`
	Subject    string            `json:"subject,omitempty"`
	Time       string            `json:"time,omitempty"` // arrival time used for the store's window
	Recipients int               `json:"recipients"`
	Client     string            `json:"client,omitempty"` // -client-from received
	Sender     string            `json:"sender,omitempty"` // -sender-from return-path
	Bulk       bool              `json:"bulk"`
	Verdict    string            `json:"verdict"`
	Family     string            `json:"family,omitempty"`
	Volume     int64             `json:"volume"`
	Volumes    map[string]int64  `json:"volumes,omitempty"`
	Keys       map[string]string `json:"keys,omitempty"` // family → space-separated short ids "index:hash8"
	Declined   map[string]string `json:"declined,omitempty"`
	Defects    []string          `json:"defects,omitempty"`
	Error      string            `json:"error,omitempty"`
}

// scanSummary is the last line.
type scanSummary struct {
	Summary struct {
		Messages int            `json:"messages"`
		Tagged   int            `json:"tagged"`
		Unsigned int            `json:"unsigned"`
		Errors   int            `json:"errors"`
		ByFamily map[string]int `json:"tagged_by_family"`
		Clusters []scanCluster  `json:"top_clusters"`
		Store    string         `json:"store"`
		Version  string         `json:"signature_version"`
		Seconds  float64        `json:"seconds"`
	} `json:"summary"`
}

// scanCluster is a group of messages connected by shared keys.
type scanCluster struct {
	Size    int    `json:"size"`
	Tagged  int    `json:"tagged"`
	First   string `json:"first"`
	Subject string `json:"subject,omitempty"`
}

func scanCommand(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("milterd scan", stderr)
	cf := cli.ConfigFlags{}
	cf.Register(fs)
	rcptFrom := fs.String("rcpt-from", "synth", "recipients: `flag` (-rcpt), headers (the topmost Received field's for clause, else Delivered-To or X-Original-To, else To and Cc), or synth (one new recipient per message)")
	clientFrom := fs.String("client-from", "none", "client address: `received` (the topmost Received field naming one, loopback skipped) or none")
	senderFrom := fs.String("sender-from", "none", "envelope sender: `return-path` (the Return-Path field) or none")
	var rcpts stringList
	fs.Var(&rcpts, "rcpt", "envelope recipient `ADDR` for every message (repeatable; implies -rcpt-from flag)")
	top := fs.Int("top", 10, "clusters to list in the summary")
	clock := fs.String("time", "date", "arrival `time` of each message: date (its Date header, so the store's window applies as it would have; undated messages take the previous one's, a Date later than the topmost Received field's that one), received (the date of the topmost Received field, likewise) or now")
	quiet := fs.Bool("q", false, "no progress on stderr")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: milterd scan [flags] MAILBOX...

Replays mailboxes (mbox, maildir, directory of messages, tar archive) in order
through the daemon's pipeline and prints one JSON line per message, then a
summary line. By default the store is embedded in a temporary directory with a
new secret, so the daemon's state is never touched; -data-dir or -redis use
that state (and count every message scanned).`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return cli.ErrUsage
	}
	if len(rcpts) > 0 && *rcptFrom == "synth" {
		*rcptFrom = "flag"
	}
	switch *rcptFrom {
	case "flag":
		if len(rcpts) == 0 {
			fmt.Fprintln(stderr, "milterd scan: -rcpt-from flag needs -rcpt ADDR")
			return cli.ErrUsage
		}
	case "headers", "synth":
	default:
		fmt.Fprintf(stderr, "milterd scan: -rcpt-from %q: want flag, headers or synth\n", *rcptFrom)
		return cli.ErrUsage
	}
	for _, c := range []struct{ flag, v, want string }{
		{"time", *clock, "date received now"}, {"client-from", *clientFrom, "received none"}, {"sender-from", *senderFrom, "return-path none"},
	} {
		if !slices.Contains(strings.Fields(c.want), c.v) {
			fmt.Fprintf(stderr, "milterd scan: -%s %q: want one of %s\n", c.flag, c.v, c.want)
			return cli.ErrUsage
		}
	}
	cfg, err := cf.Load()
	if err != nil {
		return err
	}
	temp := ""
	if cf.DataDir == "" && cf.Redis == "" {
		// A dry run: nothing of the daemon's state is read or written.
		if temp, err = os.MkdirTemp("", "milterd-scan-"); err != nil {
			return err
		}
		defer os.RemoveAll(temp)
		cfg.DataDir, cfg.Store.File, cfg.SecretKeyFile = temp, "", ""
		cfg.Store.Redis = config.Redis{}
	}
	log := cli.NewLogger(cfg, stderr)
	if temp != "" {
		log = discardLogger // "created a new secret key" is about the temporary one
	}
	rt, err := daemon.NewRuntime(cfg, log, metrics.New(prometheus.NewRegistry()), nil)
	if err != nil {
		return err
	}
	defer rt.Close()

	s := &scanner{rt: rt, out: json.NewEncoder(stdout), from: *rcptFrom, rcpts: rcpts, start: time.Now(), clock: *clock,
		client: *clientFrom == "received", sender: *senderFrom == "return-path"}
	s.out.SetEscapeHTML(false)
	if !*quiet {
		s.progress = stderr
	}
	ctx := context.Background()
	for _, path := range fs.Args() {
		opts := mailbox.Options{
			MaxSize: 64 << 20,
			OnSkip: func(name string, reason error) error {
				if errors.Is(reason, mailbox.ErrTooLarge) {
					fmt.Fprintf(stderr, "milterd scan: skipped %s: %v\n", name, reason)
				}
				return nil
			},
		}
		err := opts.Walk(path, func(m *mailbox.Message) error {
			return s.scan(ctx, m)
		})
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
	}
	return s.finish(*top)
}

// scanner holds the state of one scan.
type scanner struct {
	rt       *daemon.Runtime
	out      *json.Encoder
	progress io.Writer
	from     string
	rcpts    []string
	clock    string    // date, received or now
	client   bool      // the client address from the Received fields
	sender   bool      // the envelope sender from Return-Path
	last     time.Time // the previous message's arrival time
	start    time.Time
	lastTick time.Time

	n, tagged, unsigned, errs int
	byFamily                  map[string]int
	// Cluster bookkeeping: messages joined by shared keys (union-find).
	parent   []int
	keyOwner map[signature.Key]int
	bulk     []bool
	names    []string
	subjects []string
}

// recipients returns the recipients given or synthesised; "headers"
// takes them from the message afterwards.
func (s *scanner) recipients() []string {
	if s.from == "flag" {
		return s.rcpts
	}
	// One new recipient per message: counts become numbers of messages,
	// which is what a corpus with one recipient per message can say.
	return []string{fmt.Sprintf("scan-recipient-%d@scan.invalid", s.n)}
}

func (s *scanner) scan(ctx context.Context, m *mailbox.Message) error {
	if s.byFamily == nil {
		s.byFamily, s.keyOwner = map[string]int{}, map[signature.Key]int{}
	}
	s.n++
	msg := s.rt.Message(m.Data, s.recipients(), time.Time{})
	msg.SetFromHeader(detect.FromHeader{Recipients: s.from == "headers", Client: s.client, Sender: s.sender})
	var at time.Time
	if s.clock != "now" {
		at = s.last
		switch s.clock {
		case "date":
			if d, ok := detect.DateTime(msg.Header); ok {
				at = d
			}
		case "received":
			if d := detect.ReceivedTime(msg.Header); !d.IsZero() {
				at = d
			}
		}
		s.last = at
	}
	msg.Time = at
	rcpts := msg.Recipients
	v := s.rt.Engine().Check(ctx, msg)
	rec := scanRecord{N: s.n, Name: m.Name, Recipients: len(rcpts), Bulk: v.Bulk, Verdict: v.Header(false), Volume: v.Volume}
	rec.MessageID = strings.TrimSpace(msg.Header.Get("Message-Id"))
	if c := s.rt.Engine().Client(msg); c.IsValid() { // the counted one: behind a relay, the relay's client
		rec.Client = c.String()
	}
	rec.Sender = msg.Sender
	if !at.IsZero() {
		rec.Time = at.UTC().Format(time.RFC3339)
	}
	if a := v.Analysis; a != nil {
		rec.Subject = a.Text.Subject
		if len(rec.Subject) > 120 {
			rec.Subject = strings.ToValidUTF8(rec.Subject[:120], "") + "…"
		}
		for _, d := range a.Text.Defects {
			rec.Defects = append(rec.Defects, string(d.Kind))
		}
		rec.Keys = map[string]string{}
		for _, k := range a.Keys {
			f := k.Family.String()
			id := fmt.Sprintf("%d:%08x", k.Index, k.Hash>>32)
			if rec.Keys[f] != "" {
				id = " " + id
			}
			rec.Keys[f] += id
		}
		for _, ex := range a.Explains {
			if ex.Keys == 0 {
				if rec.Declined == nil {
					rec.Declined = map[string]string{}
				}
				rec.Declined[ex.Family.String()] = ex.Declined
			}
		}
	}
	if v.Err != nil {
		rec.Error = v.Err.Error()
		s.errs++
	} else if !v.Unsigned {
		rec.Family = v.Family.String()
		rec.Volumes = map[string]int64{}
		for f, vol := range v.Volumes {
			rec.Volumes[f.String()] = vol
		}
	}
	if v.Unsigned {
		s.unsigned++
	}
	if v.Bulk {
		s.tagged++
		s.byFamily[v.Family.String()]++
	}
	s.cluster(v, m.Name, rec.Subject)
	if err := s.out.Encode(rec); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if s.progress != nil && time.Since(s.lastTick) > 2*time.Second {
		s.lastTick = time.Now()
		el := time.Since(s.start).Seconds()
		fmt.Fprintf(s.progress, "%d messages, %d tagged (%.0f/s)\n", s.n, s.tagged, float64(s.n)/el)
	}
	return nil
}

// cluster joins the message to every earlier message it shares a key with.
func (s *scanner) cluster(v detect.Verdict, name, subject string) {
	i := len(s.parent)
	s.parent = append(s.parent, i)
	s.bulk = append(s.bulk, v.Bulk)
	s.names = append(s.names, name)
	s.subjects = append(s.subjects, subject)
	if v.Analysis == nil {
		return
	}
	for _, k := range v.Analysis.Keys {
		if j, ok := s.keyOwner[k]; ok {
			s.union(i, j)
		} else {
			s.keyOwner[k] = i
		}
	}
}

func (s *scanner) find(i int) int {
	for s.parent[i] != i {
		s.parent[i] = s.parent[s.parent[i]]
		i = s.parent[i]
	}
	return i
}

func (s *scanner) union(a, b int) {
	a, b = s.find(a), s.find(b)
	if a == b {
		return
	}
	if a < b {
		a, b = b, a
	}
	s.parent[a] = b // the earliest message is the root
}

func (s *scanner) finish(top int) error {
	var sum scanSummary
	out := &sum.Summary
	out.Messages, out.Tagged, out.Unsigned, out.Errors = s.n, s.tagged, s.unsigned, s.errs
	out.ByFamily = s.byFamily
	out.Store, out.Version = s.rt.StoreName(), s.rt.Set().Version()
	out.Seconds = time.Since(s.start).Seconds()
	sizes := map[int]*scanCluster{}
	for i := range s.parent {
		r := s.find(i)
		c := sizes[r]
		if c == nil {
			c = &scanCluster{First: s.names[r], Subject: s.subjects[r]}
			sizes[r] = c
		}
		c.Size++
		if s.bulk[i] {
			c.Tagged++
		}
	}
	for _, c := range sizes {
		if c.Size > 1 {
			out.Clusters = append(out.Clusters, *c)
		}
	}
	sort.SliceStable(out.Clusters, func(i, j int) bool {
		if out.Clusters[i].Size != out.Clusters[j].Size {
			return out.Clusters[i].Size > out.Clusters[j].Size
		}
		return out.Clusters[i].First < out.Clusters[j].First
	})
	out.Clusters = out.Clusters[:min(top, len(out.Clusters))]
	if err := s.out.Encode(sum); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if s.progress != nil {
		fmt.Fprintf(s.progress, "%d messages, %d tagged, %d unsigned, %d errors in %.1f s; store %s\n",
			s.n, s.tagged, s.unsigned, s.errs, out.Seconds, out.Store)
		for _, c := range out.Clusters {
			fmt.Fprintf(s.progress, "  cluster of %d (%d tagged): %s %q\n", c.Size, c.Tagged, c.First, c.Subject)
		}
	}
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

var _ flag.Value = (*stringList)(nil)

// discardLogger drops every record.
var discardLogger = slog.New(slog.DiscardHandler)
