package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bulkmilter/bulkmilter/bundled"
	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/feedback"
	"github.com/bulkmilter/bulkmilter/mailtext"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/milter"
	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// backend is what the daemon and the offline commands need of a store.
type backend interface {
	store.Store
	store.Admin
}

// runtime is everything built from one configuration: the signature set,
// the store, the pipeline and the milter state. The daemon swaps runtimes
// on reload.
type runtime struct {
	cfg       *config.Config
	set       *signature.Set
	engine    *detect.Engine
	store     backend
	storeName string
	storeKey  string // what the store was opened with, to reuse it on reload
	state     *milter.State
	ownsStore bool
	// limiter holds the voters' rate limits; reloads keep it.
	limiter *feedback.Limiter
	// adminToken authorises the votes admin endpoint (votes.go).
	adminToken string
}

// newRuntime builds a runtime. When prev uses the same store settings its
// store is taken over instead of opened twice (the embedded store's file
// must have one owner).
func newRuntime(cfg *config.Config, log *slog.Logger, met *metrics.Metrics, prev ...*runtime) (*runtime, error) {
	secret, created, err := loadSecret(cfg.SecretKeyPath())
	if err != nil {
		return nil, err
	}
	if created {
		log.Info("created a new secret key", "file", cfg.SecretKeyPath())
	}
	set, err := newSet(cfg, secret)
	if err != nil {
		return nil, err
	}
	rt := &runtime{cfg: cfg, set: set, storeKey: storeKey(cfg, secret), adminToken: adminToken(secret)}
	if len(prev) > 0 && prev[0] != nil {
		rt.limiter = prev[0].limiter
	}
	if rt.limiter == nil {
		rt.limiter = feedback.NewLimiter(cfg.Feedback.RateLimit, 0)
	}
	// The previous runtime's store is borrowed, and only taken over once
	// this runtime is complete: a failed reload must leave it running.
	var from *runtime
	if len(prev) > 0 && prev[0] != nil && prev[0].storeKey == rt.storeKey && prev[0].ownsStore {
		from = prev[0]
		rt.store, rt.storeName = from.store, from.storeName
	} else if rt.store, rt.storeName, err = openStore(cfg, secret, log, met); err != nil {
		return nil, err
	} else {
		rt.ownsStore = true
	}

	thresholds := map[signature.Family]int{}
	for _, s := range set.Signers() {
		thresholds[s.Family()] = cfg.ThresholdFor(s.Family().String())
	}
	lim := limitsOf(cfg)
	rt.engine, err = detect.New(detect.Options{
		Limits:         lim,
		Set:            set,
		Store:          rt.store,
		Thresholds:     thresholds,
		StoreTimeout:   cfg.Policy.StoreTimeout.D(),
		SlowAnalysis:   cfg.Limits.MaxAnalysisTime.D(),
		StripRecipient: cfg.Signatures.StripRecipient,
		GlobalVoters:   cfg.Feedback.GlobalVoters,
		Observer:       met, // nil-safe
	})
	if err != nil {
		rt.close()
		return nil, err
	}
	rt.state = &milter.State{Pipeline: rt.engine, Limits: lim, MaxHeldBytes: int64(cfg.Limits.MaxHeldBytes), Actions: actionsOf(cfg)}
	if cfg.Feedback.Enabled {
		fb, err := newFeedback(cfg, lim, rt, met)
		if err != nil {
			rt.close()
			return nil, err
		}
		rt.state.Feedback = fb
	}
	if from != nil {
		from.ownsStore, rt.ownsStore = false, true
	}
	return rt, nil
}

// limitsOf returns the per-message limits of a configuration.
func limitsOf(cfg *config.Config) detect.Limits {
	l := detect.DefaultLimits
	l.BodyBytes = int(cfg.Limits.MaxMessageBytes)
	l.HeaderFields = cfg.Limits.MaxHeaders
	l.HeaderBytes = int(cfg.Limits.MaxHeaderBytes)
	l.Recipients = cfg.Limits.MaxRecipients
	l.Text = mailtext.Limits{
		MaxDepth:     cfg.Limits.MaxMIMEDepth,
		MaxParts:     cfg.Limits.MaxMIMEParts,
		MaxTextBytes: int(cfg.Limits.MaxTextBytes),
	}
	return l
}

// actionsOf returns what the milter does, from a configuration.
func actionsOf(cfg *config.Config) milter.Actions {
	a := cfg.Actions
	return milter.Actions{
		Header:               a.Header,
		FeedbackHeader:       cfg.Feedback.Header,
		SubjectTag:           a.SubjectTag,
		RecipientDetail:      a.RecipientDetail,
		Quarantine:           a.Quarantine,
		RevealKeys:           a.RevealKeys,
		Except:               milter.NewRecipients(a.ExceptRecipients, a.ExceptDomains),
		HeaderOnly:           milter.NewRecipients(a.HeaderOnlyRecipients, a.HeaderOnlyDomains),
		TempfailOnStoreError: cfg.Policy.OnStoreError == "tempfail",
		DiscardFeedback:      cfg.Feedback.Keep == "discard",
		LogAddresses:         cfg.Log.Addresses,
	}
}

// newFeedback returns the feedback handler of a runtime.
func newFeedback(cfg *config.Config, lim detect.Limits, rt *runtime, met *metrics.Metrics) (*feedback.Handler, error) {
	f := cfg.Feedback
	o := feedback.Options{
		TrustAuthenticated: f.TrustAuthenticated,
		LoginDomain:        f.LoginDomain,
		RateLimit:          f.RateLimit,
		SubjectTag:         cfg.Actions.SubjectTag,
		StoreTimeout:       cfg.Policy.StoreTimeout.D(),
		Limits:             lim,
		VerdictHeader:      cfg.Actions.Header,
		FeedbackHeader:     f.Header,
		Engine:             rt.engine,
		Store:              rt.store,
		Limiter:            rt.limiter,
		Observer:           met, // nil-safe
	}
	for i, n := range f.TrustedNetworks {
		p, err := config.ParseNetwork(n)
		if err != nil {
			return nil, fmt.Errorf("feedback.trusted_networks[%d]: %w", i, err)
		}
		o.TrustedNetworks = append(o.TrustedNetworks, p)
	}
	return feedback.New(o)
}

// The daemon's metrics are what every package reports to.
var (
	_ detect.Observer   = (*metrics.Metrics)(nil)
	_ milter.Observer   = (*metrics.Metrics)(nil)
	_ feedback.Observer = (*metrics.Metrics)(nil)
)

// adminToken derives the credential of the votes admin endpoint from the
// secret: whoever can read the secret file may administer votes (and
// could open the store anyway), and the token does not reveal the secret.
func adminToken(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("bulkmilter votes admin"))
	return hex.EncodeToString(m.Sum(nil))
}

// close releases the store if this runtime still owns it.
func (rt *runtime) close() {
	if rt.ownsStore && rt.store != nil {
		rt.ownsStore = false
		if err := rt.store.Close(); err != nil {
			slog.Error("close store", "err", err)
		}
	}
}

func (rt *runtime) ping(ctx context.Context) error { return rt.store.Ping(ctx) }

// loadLexicon loads the configured lexicon file, or the bundled one.
func loadLexicon(cfg *config.Config) (*signature.Lexicon, error) {
	if cfg.Signatures.Lexicon == "" {
		return bundled.Lexicon()
	}
	data, err := os.ReadFile(cfg.Signatures.Lexicon)
	if err != nil {
		return nil, fmt.Errorf("read lexicon: %w", err)
	}
	lex, err := signature.LoadLexicon(data)
	if err != nil {
		return nil, fmt.Errorf("lexicon %s: %w", cfg.Signatures.Lexicon, err)
	}
	return lex, nil
}

// newSet builds the signature families from the configuration.
func newSet(cfg *config.Config, secret []byte) (*signature.Set, error) {
	lex, err := loadLexicon(cfg)
	if err != nil {
		return nil, err
	}
	p := cfg.Signatures.SetParams()
	p.Lexicon = lex
	if p.Secret, err = signature.NewSecret(secret); err != nil {
		return nil, err
	}
	return signature.NewSet(p)
}

// storeSecret derives the key of the store's recipient pseudonyms from the
// signature secret, so one secret file serves both and neither key reveals
// the other.
func storeSecret(secret []byte) []byte {
	h := sha256.Sum256(append([]byte("bulkmilter store pseudonyms\x00"), secret...))
	return h[:]
}

func storeParams(cfg *config.Config, secret []byte) store.Params {
	return store.Params{
		Window:      cfg.Store.Window.D(),
		VoteHorizon: cfg.Feedback.VoteTTL.D(),
		Secret:      storeSecret(secret),
	}
}

// storeKey identifies a store configuration, to tell whether a reload may
// keep the open store.
func storeKey(cfg *config.Config, secret []byte) string {
	return fmt.Sprintf("%+v|%s|%d|%s|%s|%x", cfg.Store.Redis, cfg.StoreFile(), cfg.Store.MaxEntries,
		cfg.Store.Window.D(), cfg.Feedback.VoteTTL.D(), sha256.Sum256(secret))
}

// errStoreBusy means another process holds the embedded store's file.
var errStoreBusy = errors.New("the embedded store is in use by another process")

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
				return nil, fmt.Errorf("%s (lock %s): %w", path, name, errStoreBusy)
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

// lockedStore is an embedded store that releases its file lock on Close.
type lockedStore struct {
	*store.Embedded
	unlock func()
}

func (s *lockedStore) Close() error {
	err := s.Embedded.Close()
	s.unlock()
	return err
}

// openStore opens Redis when configured, else the embedded store.
func openStore(cfg *config.Config, secret []byte, log *slog.Logger, met *metrics.Metrics) (backend, string, error) {
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
			Observer:   met,
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
	o, err := redisOptions(cfg)
	if err != nil {
		return nil, "", err
	}
	o.Params = params
	o.Observer = met
	// A timeout in the URL may be tighter; never looser than the
	// per-message budget.
	if budget := cfg.Policy.StoreTimeout.D(); o.Timeout == 0 || o.Timeout > budget {
		o.Timeout = budget
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := store.NewRedis(ctx, o)
	if err != nil {
		return nil, "", fmt.Errorf("open redis store: %w", err)
	}
	return r, "redis:" + strings.Join(o.Addrs, ","), nil
}

func redisOptions(cfg *config.Config) (store.RedisOptions, error) {
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
