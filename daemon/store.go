package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/store"
)

// ErrStoreBusy means another process holds the embedded store's file.
var ErrStoreBusy = errors.New("the embedded store is in use by another process")

// storeLocks are the embedded store files this process holds, each by an
// exclusive flock on FILE.lock, counted: a reload may briefly open the
// same file twice in one process, which the lock must not refuse. Another
// process (a second daemon, "milterd votes") is refused.
var storeLocks = struct {
	sync.Mutex
	held map[string]*heldLock
}{held: map[string]*heldLock{}}

type heldLock struct {
	f    *os.File
	refs int
}

// lockStore takes the lock of an embedded store file; the returned
// function releases it.
func lockStore(path string) (func(), error) {
	storeLocks.Lock()
	defer storeLocks.Unlock()
	name := path + ".lock"
	l := storeLocks.held[name]
	if l == nil {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open store lock: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%s (lock %s): %w", path, name, ErrStoreBusy)
			}
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		l = &heldLock{f: f}
		storeLocks.held[name] = l
	}
	l.refs++
	var once sync.Once
	return func() {
		once.Do(func() {
			storeLocks.Lock()
			defer storeLocks.Unlock()
			if l.refs--; l.refs == 0 {
				delete(storeLocks.held, name)
				l.f.Close() // releases the flock
			}
		})
	}, nil
}

// lockedStore is an embedded store that releases its file lock on Close
// and writes its file soon after a vote.
type lockedStore struct {
	*store.Embedded
	unlock func()

	mu     sync.Mutex
	save   *time.Timer // pending save after a vote; nil when none
	closed bool
	saving sync.WaitGroup // a save after a vote in progress
}

// voteSaveDelay is how soon after a vote (or a removal) the store file is
// written. Votes are the users' data and rare: a daemon killed (SIGKILL,
// the OOM killer, a power cut) loses the votes of the last second, not
// those since the periodic save (store.DefaultSaveInterval, 5 min), which
// only counts can afford to lose. Votes within the delay share one save.
const voteSaveDelay = time.Second

// Unbudgeted: see Observe.
func (s *lockedStore) Unbudgeted() {}

// Observe and RecordVote drop the caller's deadline (policy.store_timeout):
// the embedded store answers in process, with CPU work under short
// per-shard locks and no I/O (Save copies a shard under its lock and
// writes without it), so the deadline could only fire when the host was
// too busy to run the call, and "unavailable" then would worsen the
// verdict without protecting the MTA from anything. The budget is for a
// store across a network (docs/reliability.md, "The store budget").
//
// Unbudgeted tells the pipeline so (detect.Unbudgeted): it sets no
// deadline of its own for a message, which saves a timer a message.
func (s *lockedStore) Observe(ctx context.Context, o store.Observation) (store.Result, error) {
	return s.Embedded.Observe(context.WithoutCancel(ctx), o)
}

func (s *lockedStore) RecordVote(ctx context.Context, v store.Vote) error {
	err := s.Embedded.RecordVote(context.WithoutCancel(ctx), v)
	if err == nil {
		s.saveSoon()
	}
	return err
}

func (s *lockedStore) RemoveVotes(ctx context.Context, q store.VoteQuery) (int, error) {
	n, err := s.Embedded.RemoveVotes(ctx, q)
	if n > 0 {
		s.saveSoon()
	}
	return n, err
}

func (s *lockedStore) saveSoon() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.save != nil || s.closed {
		return
	}
	s.save = time.AfterFunc(voteSaveDelay, func() {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		s.save = nil
		s.saving.Add(1)
		s.mu.Unlock()
		defer s.saving.Done()
		s.Embedded.Save() // a failure is counted by the store's observer, as for the periodic save
	})
}

func (s *lockedStore) Close() error {
	s.mu.Lock()
	s.closed = true
	if s.save != nil {
		s.save.Stop()
	}
	s.mu.Unlock()
	s.saving.Wait()
	err := s.Embedded.Close() // saves
	s.unlock()
	return err
}

// storeObserver is the stores' observer: the metrics, and a debug line for
// each time a store did not take as given (store.AheadObserver).
type storeObserver struct {
	*metrics.Metrics
	log *slog.Logger
}

// ObserveAhead counts and logs what a store found dated more than a bucket
// ahead of its clock (a forged date replayed, a clock stepped back).
func (o storeObserver) ObserveAhead(what string, n int, given, counted time.Time) {
	o.StoreAhead(what, n)
	if o.log != nil {
		o.log.Debug("store: dated ahead of its clock", "what", what, "n", n,
			"given", given.UTC().Format(time.RFC3339), "counted_at", counted.UTC().Format(time.RFC3339))
	}
}

var (
	_ store.AheadObserver   = storeObserver{}
	_ store.ClusterObserver = storeObserver{} // the metrics' ObserveClusterFallback
)

// OpenStore opens Redis when configured, else the embedded store.
func OpenStore(cfg *config.Config, secret []byte, log *slog.Logger, met *metrics.Metrics) (Backend, string, error) {
	params := storeParams(cfg, secret)
	if !cfg.UsesRedis() {
		if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil && cfg.Store.File == "" {
			return nil, "", fmt.Errorf("create data directory: %w", err)
		}
		unlock, err := lockStore(cfg.StoreFile())
		if err != nil {
			return nil, "", err
		}
		e, err := store.OpenEmbedded(store.EmbeddedOptions{
			Path:       cfg.StoreFile(),
			MaxEntries: cfg.Store.MaxEntries,
			Observer:   storeObserver{met, log},
			Params:     params,
		})
		var corrupt *store.CorruptFileError
		if errors.As(err, &corrupt) {
			// The damaged file was moved aside and what could be read
			// was kept; the admin learns what was lost.
			log.Error("embedded store file was damaged; it was moved aside and what could be read was kept",
				"file", corrupt.Path, "moved_to", corrupt.MovedTo, "lost", corrupt.Lost, "err", corrupt.Err)
			err = nil
		}
		if err != nil {
			unlock()
			return nil, "", fmt.Errorf("open embedded store: %w", err)
		}
		return &lockedStore{Embedded: e, unlock: unlock}, "embedded:" + cfg.StoreFile(), nil
	}
	o, err := RedisOptions(cfg)
	if err != nil {
		return nil, "", err
	}
	o.Params = params
	o.Observer = storeObserver{met, log}
	// A timeout in the URL may be tighter; never looser than the
	// per-message budget.
	if budget := cfg.Policy.StoreTimeout.D(); o.Timeout == 0 || o.Timeout > budget {
		o.Timeout = budget
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := store.NewRedis(ctx, o)
	if err != nil {
		if msg := err.Error(); strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "NOPERM") {
			// Redis's own words name neither setting.
			return nil, "", fmt.Errorf("open redis store: %w (Redis refused the login: check the user and password in store.redis.url or store.redis.password_file, and the user's ACL: docs/operations.md \"Redis\")", err)
		}
		return nil, "", fmt.Errorf("open redis store: %w", err)
	}
	return r, "redis:" + strings.Join(o.Addrs, ","), nil
}

// RedisOptions turns the configured Redis settings into the store's.
func RedisOptions(cfg *config.Config) (store.RedisOptions, error) {
	r := cfg.Store.Redis
	var o store.RedisOptions
	if r.URL != "" {
		var err error
		if o, err = store.ParseRedisURL(r.URL); err != nil {
			return o, fmt.Errorf("store.redis.url: %w", err)
		}
	} else {
		o.Addrs, o.Cluster, o.MasterName = r.Addrs, r.Cluster, r.MasterName
		o.Username, o.DB = r.Username, r.DB
	}
	if r.PasswordFile != "" {
		pw, err := os.ReadFile(r.PasswordFile)
		if err != nil {
			return o, fmt.Errorf("store.redis.password_file: %w", err)
		}
		o.Password = strings.TrimSpace(string(pw))
	}
	if r.PoolSize > 0 {
		o.PoolSize = r.PoolSize
	}
	if r.TLS.Enabled || r.TLS.CAFile != "" || r.TLS.CertFile != "" {
		o.TLS = &store.TLSOptions{CAFile: r.TLS.CAFile, CertFile: r.TLS.CertFile, KeyFile: r.TLS.KeyFile, ServerName: r.TLS.ServerName}
	}
	return o, nil
}
