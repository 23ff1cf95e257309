package refile

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Copy is one copy of a campaign in one recipient's mailbox.
type Copy struct {
	Recipient string `json:"recipient"`
	MessageID string `json:"message_id"`
}

// Outcome is what a mover did with one copy.
type Outcome int8

// Outcomes of a move.
const (
	// Moved: the copy was moved from INBOX to the folder.
	Moved Outcome = iota
	// NotInInbox: no copy with that Message-ID is in INBOX (the user
	// filed it, or an earlier attempt moved it); nothing was done.
	NotInInbox
	// UnknownUser: the mail store has no such user; nothing was done.
	UnknownUser
	// Ambiguous: more than one message of the user's INBOX has that
	// Message-ID; nothing was done. A Message-ID is the sender's to
	// write, so a message of her own could share it, and a move by
	// Message-ID would take it too.
	Ambiguous
)

// Result is a mover's answer for one copy: Err when the move may be
// retried, otherwise its Outcome.
type Result struct {
	Outcome Outcome
	Err     error
}

// Mover moves copies from INBOX to the Bulk folder. It returns one Result
// per copy, in order. A retry of a copy that was moved must find it no
// longer in INBOX (NotInInbox): movers are idempotent.
type Mover interface {
	Move(ctx context.Context, campaign string, copies []Copy) []Result
}

// Votes tells whether a recipient voted "not bulk" on any of keys (the
// store ids of the message that made the campaign bulk).
type Votes interface {
	VotedNotBulk(ctx context.Context, recipient string, keys []string) (bool, error)
}

// Reasons a copy was not moved (Observer.RefileSkipped).
const (
	SkipNotInInbox  = "not_in_inbox"         // the user (or an earlier attempt) moved it
	SkipVoted       = "voted_not_bulk"       // the recipient voted "not bulk"
	SkipUnknownUser = "unknown_user"         // the mail store has no such user
	SkipNoMessageID = "no_message_id"        // a copy without Message-ID cannot be found again
	SkipAmbiguous   = "ambiguous_message_id" // INBOX has more than one message with its Message-ID
	SkipLedgerFull  = "ledger_full"          // forgotten to keep the ledger within its bounds
	SkipQueueFull   = "queue_full"           // the queue held max_queue copies already
	// SkipUnreadable counts state files that could not be read (once per
	// file: how many copies it held is unknown).
	SkipUnreadable = "state_unreadable"
)

// Observer receives what the refiler does, for metrics. It must be safe
// for concurrent use and return quickly.
type Observer interface {
	// Refiled counts one copy moved, d after its campaign crossed.
	Refiled(d time.Duration)
	// RefileSkipped counts copies not moved, by reason (the Skip constants).
	RefileSkipped(reason string, n int)
	// RefileFailed counts copies given up after the last retry.
	RefileFailed(n int)
	// RefileQueue sets the copies waiting to be moved and the copies
	// remembered in the ledger.
	RefileQueue(queued, remembered int)
}

// Options configure a Refiler. Zero values take the defaults shown.
type Options struct {
	Mover Mover // required
	Votes Votes // nil: no vote is checked
	// File keeps the ledger, and File.queue the queue, across restarts;
	// "" keeps them in memory only.
	File string
	// Window is how long a copy is remembered (the store's window, 24h).
	Window time.Duration
	// MaxPerCampaign bounds the copies remembered per campaign (1000);
	// MaxEntries the copies remembered in all (200000), the oldest going
	// first; MaxQueue the copies waiting to be moved (100000).
	MaxPerCampaign, MaxEntries, MaxQueue int
	// Retries bounds the attempts after the first (10); Backoff is the
	// first wait (10s), doubled up to MaxBackoff (10m).
	Retries             int
	Backoff, MaxBackoff time.Duration
	// Workers run jobs in parallel (1).
	Workers int
	// VotesTimeout bounds one question to Votes (10s).
	VotesTimeout time.Duration
	// SaveEvery is how often the ledger is written to File (30s); the
	// queue is written to File.queue soon after every change.
	SaveEvery time.Duration
	Observer  Observer     // may be nil
	Logger    *slog.Logger // may be nil
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defD(&o.Window, 24*time.Hour)
	def(&o.MaxPerCampaign, 1000)
	def(&o.MaxEntries, 200_000)
	def(&o.MaxQueue, 100_000)
	if o.Retries < 0 {
		o.Retries = 0
	} else if o.Retries == 0 {
		o.Retries = 10
	}
	defD(&o.Backoff, 10*time.Second)
	defD(&o.MaxBackoff, 10*time.Minute)
	def(&o.Workers, 1)
	defD(&o.VotesTimeout, 10*time.Second)
	defD(&o.SaveEvery, 30*time.Second)
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

type nopObserver struct{}

func (nopObserver) Refiled(time.Duration)       {}
func (nopObserver) RefileSkipped(string, int)   {}
func (nopObserver) RefileFailed(int)            {}
func (nopObserver) RefileQueue(queued, rem int) {}

// entry is one remembered copy.
type entry struct {
	Campaign string    `json:"campaign"`
	Copy     Copy      `json:"copy"`
	At       time.Time `json:"at"`
}

// job moves one campaign's remembered copies.
type job struct {
	Campaign string    `json:"campaign"`
	Keys     []string  `json:"keys,omitempty"`
	Crossed  time.Time `json:"crossed"`
	Copies   []Copy    `json:"copies"`
	Attempts int       `json:"attempts"`
	Next     time.Time `json:"next"`
	// What happened so far, for the log line at the end.
	Moved   int `json:"moved"`
	Skipped int `json:"skipped"`

	running bool
}

// Refiler remembers the copies of campaigns before their threshold and
// moves them to Bulk once a campaign crosses it.
type Refiler struct {
	opt Options
	now func() time.Time

	mu     sync.Mutex
	order  *list.List                 // *entry, oldest first
	byCamp map[string][]*list.Element // a campaign's entries, oldest first
	jobs   []*job
	queued int // copies in jobs
	// lastAt is the latest message time seen and lastWall when it was:
	// the clock the ledger expires by when no mail comes (replays run on
	// their messages' times, not the wall clock's).
	lastAt, lastWall time.Time
	dirty            bool // ledger changed since the last save
	jobDirty         bool // queue changed since the last save: save soon

	wake   chan struct{} // a job is ready
	saveCh chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool
}

// New starts a refiler: it reads Options.File when it exists and starts
// the workers. Close stops them and saves.
func New(o Options) (*Refiler, error) {
	if o.Mover == nil {
		return nil, errors.New("refile: no mover")
	}
	r := &Refiler{
		opt:    o.withDefaults(),
		now:    time.Now,
		order:  list.New(),
		byCamp: map[string][]*list.Element{},
		wake:   make(chan struct{}, 1),
		saveCh: make(chan struct{}, 1),
	}
	if err := r.load(); err != nil {
		return nil, err
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	for range r.opt.Workers {
		r.wg.Add(1)
		go r.work()
	}
	r.wg.Add(1)
	go r.saver()
	r.report()
	r.poke()
	return r, nil
}

// Remember records copies a campaign delivered before its threshold. It
// never blocks on I/O: the milter calls it for every message that is not
// bulk.
func (r *Refiler) Remember(campaign string, copies []Copy, at time.Time) {
	if campaign == "" || len(copies) == 0 {
		return
	}
	if at.IsZero() {
		at = r.now()
	}
	var noID, full int
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.tick(at)
	r.expire(at)
	for _, c := range copies {
		if c.MessageID == "" {
			noID++
			continue
		}
		els := r.byCamp[campaign]
		if len(els) >= r.opt.MaxPerCampaign {
			full++
			continue
		}
		if r.order.Len() >= r.opt.MaxEntries {
			r.removeOldest()
			full++
		}
		el := r.order.PushBack(&entry{Campaign: campaign, Copy: c, At: at})
		r.byCamp[campaign] = append(els, el)
	}
	r.dirty = true
	queued, rem := r.queued, r.order.Len()
	r.mu.Unlock()
	if noID > 0 {
		r.opt.Observer.RefileSkipped(SkipNoMessageID, noID)
	}
	if full > 0 {
		r.opt.Observer.RefileSkipped(SkipLedgerFull, full)
	}
	r.opt.Observer.RefileQueue(queued, rem)
}

// Crossed tells the refiler that a campaign is bulk now: its remembered
// copies (if any) leave the ledger for a move job. keys are the store ids
// of the message that decided it, for the votes check. Later calls find
// nothing left to move. It never blocks on I/O.
func (r *Refiler) Crossed(campaign string, keys []string, at time.Time) {
	if campaign == "" {
		return
	}
	if at.IsZero() {
		at = r.now()
	}
	r.mu.Lock()
	r.tick(at)
	els := r.byCamp[campaign]
	if r.closed || len(els) == 0 {
		r.mu.Unlock()
		return
	}
	delete(r.byCamp, campaign)
	j := &job{Campaign: campaign, Keys: append([]string(nil), keys...), Crossed: at, Next: at}
	for _, el := range els {
		e := r.order.Remove(el).(*entry)
		if at.Sub(e.At) <= r.opt.Window {
			j.Copies = append(j.Copies, e.Copy)
		}
	}
	var dropped int
	if room := r.opt.MaxQueue - r.queued; len(j.Copies) > room {
		dropped = len(j.Copies) - max(room, 0)
		j.Copies = j.Copies[:max(room, 0)]
	}
	if len(j.Copies) > 0 {
		r.jobs = append(r.jobs, j)
		r.queued += len(j.Copies)
		r.jobDirty = true
	}
	r.dirty = true
	queued, rem := r.queued, r.order.Len()
	r.mu.Unlock()
	if dropped > 0 {
		r.opt.Observer.RefileSkipped(SkipQueueFull, dropped)
		r.opt.Logger.Warn("refile queue full; copies of a campaign stay in the inbox", "campaign", campaign, "copies", dropped)
	}
	r.opt.Observer.RefileQueue(queued, rem)
	r.poke()
	r.requestSave()
}

// tick advances the message clock. r.mu is held.
func (r *Refiler) tick(at time.Time) {
	if at.After(r.lastAt) {
		r.lastAt, r.lastWall = at, r.now()
	}
}

// clock is the message time now: the latest message's time plus the wall
// time since. r.mu is held.
func (r *Refiler) clock() time.Time {
	if r.lastAt.IsZero() {
		return r.now()
	}
	return r.lastAt.Add(r.now().Sub(r.lastWall))
}

// expire forgets copies older than the window. r.mu is held.
func (r *Refiler) expire(now time.Time) {
	for el := r.order.Front(); el != nil; el = r.order.Front() {
		if now.Sub(el.Value.(*entry).At) <= r.opt.Window {
			return
		}
		r.removeOldest()
	}
}

// removeOldest forgets the oldest copy. r.mu is held.
func (r *Refiler) removeOldest() {
	el := r.order.Front()
	e := r.order.Remove(el).(*entry)
	els := r.byCamp[e.Campaign]
	// The campaign's entries are in insertion order too: el is first.
	if len(els) > 0 && els[0] == el {
		els = els[1:]
	} else {
		for i := range els {
			if els[i] == el {
				els = append(els[:i:i], els[i+1:]...)
				break
			}
		}
	}
	if len(els) == 0 {
		delete(r.byCamp, e.Campaign)
	} else {
		r.byCamp[e.Campaign] = els
	}
}

// Pending returns the copies waiting to be moved and those remembered.
func (r *Refiler) Pending() (queued, remembered int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queued, r.order.Len()
}

func (r *Refiler) report() {
	q, rem := r.Pending()
	r.opt.Observer.RefileQueue(q, rem)
}

func (r *Refiler) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Refiler) requestSave() {
	select {
	case r.saveCh <- struct{}{}:
	default:
	}
}

// work runs jobs as they become ready.
func (r *Refiler) work() {
	defer r.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		j, wait := r.next()
		if j != nil {
			r.run(j)
			continue
		}
		timer.Reset(wait)
		select {
		case <-r.ctx.Done():
			return
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// next takes the first ready job, or says how long until one is.
func (r *Refiler) next() (*job, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil {
		return nil, time.Hour
	}
	now := r.now()
	wait := time.Hour
	for _, j := range r.jobs {
		if j.running {
			continue
		}
		if d := j.Next.Sub(now); d > 0 {
			wait = min(wait, d)
			continue
		}
		j.running = true
		return j, 0
	}
	return nil, wait
}

// run makes one attempt at a job.
func (r *Refiler) run(j *job) {
	r.mu.Lock()
	copies := append([]Copy(nil), j.Copies...)
	r.mu.Unlock()

	var todo []Copy
	var left []Copy // to retry
	var lastErr error
	skipped := map[string]int{}
	for _, c := range copies {
		if r.opt.Votes != nil {
			ctx, cancel := context.WithTimeout(r.ctx, r.opt.VotesTimeout)
			voted, err := r.opt.Votes.VotedNotBulk(ctx, c.Recipient, j.Keys)
			cancel()
			if err != nil {
				left = append(left, c)
				lastErr = fmt.Errorf("read votes: %w", err)
				continue
			}
			if voted {
				skipped[SkipVoted]++
				continue
			}
		}
		todo = append(todo, c)
	}
	var moved int
	if len(todo) > 0 {
		res := r.opt.Mover.Move(r.ctx, j.Campaign, todo)
		now := r.now()
		for i, c := range todo {
			var rs Result
			if i < len(res) {
				rs = res[i]
			} else {
				rs.Err = fmt.Errorf("mover returned %d results for %d copies", len(res), len(todo))
			}
			switch {
			case rs.Err != nil:
				left = append(left, c)
				lastErr = rs.Err
			case rs.Outcome == Moved:
				moved++
				r.opt.Observer.Refiled(now.Sub(j.Crossed))
			case rs.Outcome == NotInInbox:
				skipped[SkipNotInInbox]++
			case rs.Outcome == UnknownUser:
				skipped[SkipUnknownUser]++
			case rs.Outcome == Ambiguous:
				skipped[SkipAmbiguous]++
			}
		}
	}
	for reason, n := range skipped {
		r.opt.Observer.RefileSkipped(reason, n)
	}

	r.mu.Lock()
	j.running = false
	j.Moved += moved
	for _, n := range skipped {
		j.Skipped += n
	}
	r.queued -= len(j.Copies) - len(left)
	j.Copies = left
	failed := 0
	done := len(left) == 0
	stopping := r.ctx.Err() != nil
	if !done && !stopping {
		j.Attempts++
		if j.Attempts > r.opt.Retries {
			failed, done = len(left), true
			r.queued -= len(left)
			j.Copies = nil
		} else {
			j.Next = r.now().Add(backoff(r.opt.Backoff, r.opt.MaxBackoff, j.Attempts))
		}
	}
	if done {
		for i, x := range r.jobs {
			if x == j {
				r.jobs = append(r.jobs[:i], r.jobs[i+1:]...)
				break
			}
		}
	}
	r.jobDirty = true
	queued, rem := r.queued, r.order.Len()
	r.mu.Unlock()
	r.opt.Observer.RefileQueue(queued, rem)
	r.requestSave()

	log := r.opt.Logger
	switch {
	case failed > 0:
		r.opt.Observer.RefileFailed(failed)
		log.Error("refile: gave up on copies of a campaign; they stay where they are",
			"campaign", j.Campaign, "moved", j.Moved, "skipped", j.Skipped, "failed", failed,
			"attempts", j.Attempts, "err", lastErr)
	case done:
		log.Info("campaign refiled", "campaign", j.Campaign, "moved", j.Moved, "skipped", j.Skipped,
			"attempts", j.Attempts+1, "took", r.now().Sub(j.Crossed).Round(time.Millisecond))
	case !stopping:
		log.Warn("refile: mail store failed; will retry", "campaign", j.Campaign, "left", len(left),
			"attempt", j.Attempts, "retry_in", j.Next.Sub(r.now()).Round(time.Millisecond), "err", lastErr)
	}
}

// backoff is the wait before attempt n+1: base doubled n-1 times, at most
// limit.
func backoff(base, limit time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Close stops the workers (a move in progress is cancelled and kept for
// the next start) and saves the ledger and the queue.
func (r *Refiler) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	return r.save()
}
