package daemon

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"

	"github.com/bulkmilter/bulkmilter/admin"
	"github.com/bulkmilter/bulkmilter/bundled"
	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/declared"
	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/feedback"
	"github.com/bulkmilter/bulkmilter/mailtext"
	"github.com/bulkmilter/bulkmilter/metrics"
	"github.com/bulkmilter/bulkmilter/milter"
	"github.com/bulkmilter/bulkmilter/refile"
	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// Backend is what the daemon and the offline commands need of a store.
type Backend interface {
	store.Store
	store.Admin
}

// Runtime is everything built from one configuration: the signature set,
// the store, the pipeline and the milter state. The daemon swaps runtimes
// on reload; scan, eval and bench build one the same way.
type Runtime struct {
	cfg       *config.Config
	set       *signature.Set
	engine    *detect.Engine
	store     Backend
	storeName string
	storeKey  string // what the store was opened with, to reuse it on reload
	state     *milter.State
	ownsStore bool
	// limiter holds the voters' rate limits; reloads keep it.
	limiter *feedback.Limiter
	// site counts the site's recipients for the adaptive threshold when
	// the store is embedded (in memory); reloads with the same store keep
	// it. With Redis the count is in Redis.
	site *store.Site
	// adminToken authorises the votes admin endpoint (package admin).
	adminToken string
	// refiler moves a campaign's early copies to Bulk (refile.enabled,
	// the daemon only); reloads keep it, as they keep the store.
	refiler     *refile.Refiler
	votes       *votesOf // the refiler's view of the store
	refilerKey  string
	ownsRefiler bool
	// builders are Check's builders between messages (replay.go).
	builders chan *detect.Builder
}

// NewRuntime builds a runtime. When prev (may be nil) uses the same store
// settings its store is taken over instead of opened twice (the embedded
// store's file must have one owner). met may be nil. It never refiles:
// replays (scan, eval, bench) must not move anyone's mail.
func NewRuntime(cfg *config.Config, log *slog.Logger, met *metrics.Metrics, prev *Runtime) (*Runtime, error) {
	return newRuntime(cfg, log, met, prev, false)
}

// newRuntime builds a runtime; the daemon's refiles when refile.enabled.
func newRuntime(cfg *config.Config, log *slog.Logger, met *metrics.Metrics, prev *Runtime, refiles bool) (*Runtime, error) {
	secret, created, err := LoadSecret(cfg.SecretKeyPath())
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
	rt := &Runtime{cfg: cfg, set: set, storeKey: storeKey(cfg, secret), adminToken: admin.Token(secret),
		builders: make(chan *detect.Builder, 4*runtime.GOMAXPROCS(0))}
	if prev != nil {
		rt.limiter = prev.limiter
	}
	if rt.limiter == nil {
		rt.limiter = feedback.NewLimiter(cfg.Feedback.RateLimit, 0)
	}
	// The previous runtime's store is borrowed, and only taken over once
	// this runtime is complete: a failed reload must leave it running.
	var from *Runtime
	if prev != nil && prev.storeKey == rt.storeKey && prev.ownsStore {
		from = prev
		rt.store, rt.storeName = from.store, from.storeName
	} else if rt.store, rt.storeName, err = OpenStore(cfg, secret, log, met); err != nil {
		return nil, err
	} else {
		rt.ownsStore = true
	}

	adaptive, err := rt.adaptive(cfg, secret, from)
	if err != nil {
		rt.Close()
		return nil, err
	}
	thresholds := map[signature.Family]int{}
	for _, s := range set.Signers() {
		thresholds[s.Family()] = cfg.ThresholdFor(s.Family().String())
	}
	lim := LimitsOf(cfg)
	relays, err := config.ParseNetworks("policy.relays", cfg.Policy.Relays)
	if err != nil {
		rt.Close()
		return nil, err
	}
	rt.engine, err = detect.New(detect.Options{
		Limits:         lim,
		Set:            set,
		Store:          rt.store,
		Thresholds:     thresholds,
		Adaptive:       adaptive,
		StoreTimeout:   cfg.Policy.StoreTimeout.D(),
		SlowAnalysis:   cfg.Limits.MaxAnalysisTime.D(),
		StripRecipient: cfg.Signatures.StripRecipient,
		GlobalVoters:   cfg.Feedback.GlobalVoters,
		Relays:         relays,
		ExceptSenders:  declared.NewSenders(cfg.Actions.ExceptSenders),
		Observer:       met, // nil-safe
	})
	if err != nil {
		rt.Close()
		return nil, err
	}
	rt.state = &milter.State{Pipeline: rt.engine, Limits: lim, MaxHeldBytes: int64(cfg.Limits.MaxHeldBytes), Actions: actionsOf(cfg)}
	if cfg.Feedback.Enabled {
		fb, err := newFeedback(cfg, lim, rt, met)
		if err != nil {
			rt.Close()
			return nil, err
		}
		rt.state.Feedback = fb
	}
	var refileFrom *Runtime
	if refiles && cfg.Refile.Enabled {
		rt.refilerKey = refileKey(cfg)
		if prev != nil && prev.refiler != nil && prev.ownsRefiler {
			// One refiler owns the state file: settings changed on a
			// reload wait for a restart.
			refileFrom, rt.refiler, rt.votes = prev, prev.refiler, prev.votes
			if prev.refilerKey != rt.refilerKey {
				log.Warn("refile settings changed; they apply after a restart")
			}
		} else {
			rt.votes = new(votesOf)
			if rt.refiler, err = newRefiler(cfg, rt.votes, log, met); err != nil {
				rt.Close()
				return nil, err
			}
			rt.ownsRefiler = true
		}
		rt.votes.use(rt.store)
		except := milter.NewRecipients(slices.Concat(cfg.Actions.ExceptRecipients, cfg.Actions.HeaderOnlyRecipients),
			slices.Concat(cfg.Actions.ExceptDomains, cfg.Actions.HeaderOnlyDomains))
		rt.state.Pipeline = &refiling{Pipeline: rt.engine, r: rt.refiler, except: except,
			domains: milter.NewRecipients(nil, cfg.Refile.Domains), anyDomain: len(cfg.Refile.Domains) == 0}
	}
	if from != nil {
		from.ownsStore, rt.ownsStore = false, true
	}
	if refileFrom != nil {
		refileFrom.ownsRefiler, rt.ownsRefiler = false, true
	}
	return rt, nil
}

// adaptive returns the adaptive threshold's options: the site count is
// the Redis store's, or one in memory beside the embedded store, taken
// over from the previous runtime when it keeps the store.
func (rt *Runtime) adaptive(cfg *config.Config, secret []byte, from *Runtime) (detect.Adaptive, error) {
	a := cfg.Policy.Adaptive
	if !a.Enabled && !a.Networks {
		return detect.Adaptive{}, nil
	}
	out := detect.Adaptive{Floor: a.Floor, PerStep: a.RecipientsPerStep, Window: cfg.Store.Window.D(), NetworksOnly: !a.Enabled}
	if r, ok := rt.store.(*store.Redis); ok {
		out.Site = r
		return out, nil
	}
	if from != nil && from.site != nil {
		rt.site = from.site
	} else {
		s, err := store.NewSite(storeParams(cfg, secret))
		if err != nil {
			return detect.Adaptive{}, err
		}
		rt.site = s
	}
	out.Site = rt.site
	return out, nil
}

// LimitsOf returns the per-message limits of a configuration.
func LimitsOf(cfg *config.Config) detect.Limits {
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
		LevelHeader:          a.LevelHeader,
		AuthservID:           cfg.Policy.AuthservID,
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
func newFeedback(cfg *config.Config, lim detect.Limits, rt *Runtime, met *metrics.Metrics) (*feedback.Handler, error) {
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
	var err error
	if o.TrustedNetworks, err = config.ParseNetworks("feedback.trusted_networks", f.TrustedNetworks); err != nil {
		return nil, err
	}
	return feedback.New(o)
}

// The daemon's metrics are what every package reports to.
var (
	_ detect.Observer   = (*metrics.Metrics)(nil)
	_ milter.Observer   = (*metrics.Metrics)(nil)
	_ feedback.Observer = (*metrics.Metrics)(nil)
)

// Config is the configuration the runtime was built from.
func (rt *Runtime) Config() *config.Config { return rt.cfg }

// Set is the signature set.
func (rt *Runtime) Set() *signature.Set { return rt.set }

// Engine is the detection pipeline.
func (rt *Runtime) Engine() *detect.Engine { return rt.engine }

// Store is the volume and vote store.
func (rt *Runtime) Store() Backend { return rt.store }

// StoreName says which store this is, for logs and reports
// ("embedded:FILE", "redis:ADDR,...").
func (rt *Runtime) StoreName() string { return rt.storeName }

// State is what a milter session takes at MAIL.
func (rt *Runtime) State() *milter.State { return rt.state }

// Ping checks that the store answers.
func (rt *Runtime) Ping(ctx context.Context) error { return rt.store.Ping(ctx) }

// Close stops the refiler and releases the store if this runtime still
// owns them.
func (rt *Runtime) Close() error {
	var err error
	if rt.ownsRefiler && rt.refiler != nil {
		rt.ownsRefiler = false
		if cerr := rt.refiler.Close(); cerr != nil {
			err = fmt.Errorf("close refiler: %w", cerr) // the store still closes
		}
	}
	return errors.Join(err, rt.closeStore())
}

func (rt *Runtime) closeStore() error {
	if !rt.ownsStore || rt.store == nil {
		return nil
	}
	rt.ownsStore = false
	if err := rt.store.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// LoadLexicon loads the configured lexicon file, or the bundled one.
func LoadLexicon(cfg *config.Config) (*signature.Lexicon, error) {
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
	lex, err := LoadLexicon(cfg)
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
