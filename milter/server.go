// Package milter is bulkmilter's protocol adapter: it speaks the milter
// protocol (version 6, through github.com/d--j/go-milter's low-level
// Server) to Postfix and Sendmail, collects each message through a
// detect.Builder (within the state's limits and a memory budget shared by
// all sessions), hands it to the detection pipeline at end of message, and
// turns the verdict into actions: the verdict header, and for bulk mail an
// optional Subject tag, recipient detail or quarantine. Each message gets
// one info log line. It is configured by typed fields (State, Actions),
// imports detect and feedback for their types, internal/gopool and
// internal/ratelog (never config or metrics), and reports through its
// Observer.
//
// It owns the failure policy: a store failure gives the configured safe
// verdict, a panic in any callback is recovered into a safe reply and a
// metric, and no callback ever blocks beyond the store budget. Nothing
// else in bulkmilter knows about the milter protocol.
//
// Why d--j/go-milter and not emersion/go-milter v0.5.0: the latter drops the
// session when Postfix sends an unknown-command event, replaces macros
// instead of accumulating them across stages, ignores negotiated no-reply
// flags (a reject came back as continue) and has no graceful shutdown.
// Known traps of the fork, handled here: it does not recover panics (every
// callback recovers), it trusts packet framing and panics or allocates up
// to 512 MiB on a malformed packet (guard.go checks every packet first),
// its Serve returns on the first failed Accept (the guard retries), it
// clears HELO-stage macros on ABORT (connection facts are kept in session
// state), and when a milter requests any macro list Postfix sends only the
// macros listed (every macro used is requested, for every stage). It is
// built from third_party/go-milter, a copy of v0.10.2 with seven small
// patches (its README): header values with nothing to convert are not
// converted, packets are read in place from the guard (NextPacket), a
// session's modifier is made once per state, sessions run on the
// goroutines the server is given (WithSpawn), header fields are handed
// over as the packet's bytes (HeaderBytesMilter), a stage's macros are
// kept as one string, and the negotiation reply and header modifications
// are built in one buffer.
package milter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gomilter "github.com/d--j/go-milter"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/feedback"
	"github.com/bulkmilter/bulkmilter/internal/gopool"
	"github.com/bulkmilter/bulkmilter/internal/ratelog"
)

// Pipeline is what the milter needs from detection.
type Pipeline interface {
	Check(ctx context.Context, msg *detect.Message) detect.Verdict
}

// FeedbackHandler records the vote a message carrying the feedback header
// brings; its outcome says what happens to the message.
type FeedbackHandler interface {
	Handle(ctx context.Context, r *feedback.Report) feedback.Outcome
}

// State is everything a message is processed with. The daemon replaces it
// atomically on reload; a message in progress keeps the state it started
// with.
type State struct {
	Pipeline Pipeline
	// Feedback handles feedback messages; nil disables feedback (the
	// feedback header is still removed).
	Feedback FeedbackHandler
	// Limits bound what a message keeps (detect.Builder).
	Limits detect.Limits
	// MaxHeldBytes bounds the bytes all sessions keep of their messages
	// together (limits.max_held_bytes); 0 means no bound. Past it a
	// message keeps only what every message may (256 KiB) and is analysed
	// on that: an early verdict rather than memory without end.
	MaxHeldBytes int64
	Actions      Actions
}

// Actions are what the milter does with messages: the configuration's
// actions, policy and feedback settings, parsed once.
type Actions struct {
	// Header is the verdict header (actions.header), always added;
	// incoming copies are removed. FeedbackHeader (feedback.header) is
	// removed from every message.
	Header, FeedbackHeader string
	// LevelHeader carries the bulk level on every message; incoming
	// copies are removed.
	LevelHeader string
	// AuthservID is the site's own authserv-id: Authentication-Results
	// fields of it that came with the message are removed as forged
	// (detect.Builder.AuthservID).
	AuthservID string
	// SubjectTag is prefixed to the Subject of bulk messages.
	SubjectTag string
	// RecipientDetail rewrites recipients of bulk messages to
	// user+DETAIL@domain.
	RecipientDetail string
	// Quarantine holds bulk messages in the MTA's hold queue.
	Quarantine bool
	// RevealKeys adds the message's keys to the verdict header.
	RevealKeys bool
	// Except are never tagged or routed; HeaderOnly get the verdict
	// header but no routing.
	Except, HeaderOnly Recipients
	// TempfailOnStoreError asks the MTA to retry when the store fails
	// (policy.on_store_error: tempfail); otherwise the message passes.
	TempfailOnStoreError bool
	// DiscardFeedback discards a consumed feedback message
	// (feedback.keep: discard); otherwise it is delivered.
	DiscardFeedback bool
	// LogAddresses adds the envelope sender and recipients to the log
	// line of each message (log.addresses).
	LogAddresses bool
}

// Recipients is a set of addresses and domains, matched without case.
type Recipients struct {
	addrs   map[string]bool
	domains map[string]bool
	subs    []string // ".example.com": its subdomains
}

// NewRecipients returns the set of the given addresses and domains; a
// domain with a leading dot matches its subdomains.
func NewRecipients(addrs, domains []string) Recipients {
	r := Recipients{addrs: map[string]bool{}, domains: map[string]bool{}}
	for _, a := range addrs {
		r.addrs[detect.NormaliseAddress(a)] = true
	}
	for _, d := range domains {
		d = strings.ToLower(strings.TrimSpace(d))
		if sub, ok := strings.CutPrefix(d, "."); ok {
			r.subs = append(r.subs, "."+sub)
			continue
		}
		r.domains[d] = true
	}
	return r
}

// Match reports whether a normalised address is in the set. An address
// with a +detail matches its base address too.
func (r Recipients) Match(addr string) bool {
	local, domain, _ := strings.Cut(addr, "@")
	if r.addrs[addr] {
		return true
	}
	if base, _, ok := strings.Cut(local, "+"); ok && r.addrs[base+"@"+domain] {
		return true
	}
	if r.domains[domain] {
		return true
	}
	for _, s := range r.subs {
		if len(domain) > len(s) && strings.HasSuffix(domain, s) {
			return true
		}
	}
	return false
}

// Observer is told what the milter does; the daemon's metrics implement
// it (see detect.Observer for why each package defines its own).
type Observer interface {
	Message(verdict string, d time.Duration) // a verdict the milter gave itself (VerdictFeedback)
	Action(action string)                    // an action taken
	Error(stage string)                      // StageAction, StageProtocol
	Panic(callback string)                   // a panic recovered in a callback
	SessionOpened()
	SessionClosed()
	MessageStarted()
	MessageDone()
	Held(bytes int64) // the bytes all sessions keep of their messages
	MemoryLimited()   // a message cut short because the sessions held State.MaxHeldBytes
}

// Labels the milter gives its Observer.
const (
	VerdictFeedback = "feedback" // the message was a feedback report
	StageAction     = "action"   // the MTA refused a modification
	StageProtocol   = "protocol" // a malformed packet or a failed accept
)

type nop struct{}

func (nop) Message(string, time.Duration) {}
func (nop) Action(string)                 {}
func (nop) Error(string)                  {}
func (nop) Panic(string)                  {}
func (nop) SessionOpened()                {}
func (nop) SessionClosed()                {}
func (nop) MessageStarted()               {}
func (nop) MessageDone()                  {}
func (nop) Held(int64)                    {}
func (nop) MemoryLimited()                {}

// Options configure a Server.
type Options struct {
	// State returns the current state; it is called once per message.
	State    func() *State
	Logger   *slog.Logger
	Observer Observer // nil observes nothing
	// ReadTimeout closes MTA connections idle for longer (default 15m).
	ReadTimeout time.Duration
}

// Server is a milter server.
type Server struct {
	opt  Options
	ms   *gomilter.Server
	busy atomic.Int64 // sessions between MAIL and the end-of-message reply
	// draining is set by Shutdown: each MTA connection closes after the
	// reply to its current message (session.go).
	draining atomic.Bool
	// storeFailures samples the warning logged when the store fails, so an
	// outage gives one line a minute rather than one per message.
	storeFailures ratelog.Sampler
	// held is what all sessions keep of their messages (State.MaxHeldBytes).
	held atomic.Int64
	// builders keeps the message builders of closed sessions (*pooledBuilder)
	// for the next: most MTA connections carry one message, and a new
	// builder grew its body buffer again by doubling for every message (a
	// tenth of the milter path's allocations).
	builders sync.Pool
}

// pooledBuilder is a reset builder and the state it was made for.
type pooledBuilder struct {
	b     *detect.Builder
	state *State
}

// builder returns a reset builder for messages of the state: a pooled one
// made for the same state, or a new one.
func (s *Server) builder(st *State) *pooledBuilder {
	for {
		p, ok := s.builders.Get().(*pooledBuilder)
		if !ok {
			break
		}
		if p.state == st {
			return p
		}
		// Made for a state since replaced (a reload): let it go.
	}
	b := detect.NewBuilder(st.Limits, st.Actions.Header, st.Actions.FeedbackHeader)
	b.LevelHeader, b.AuthservID = st.Actions.LevelHeader, st.Actions.AuthservID
	return &pooledBuilder{b: b, state: st}
}

// grant accounts for n more bytes kept by a session, up to limit; within
// the floor every message may keep (must), they are always granted.
func (s *Server) grant(n int, must bool, limit int64) bool {
	total := s.held.Add(int64(n))
	if !must && limit > 0 && total > limit {
		s.held.Add(-int64(n))
		return false
	}
	s.opt.Observer.Held(total)
	return true
}

// release returns the bytes a session kept.
func (s *Server) release(n int) {
	if n > 0 {
		s.opt.Observer.Held(s.held.Add(-int64(n)))
	}
}

// Held returns the bytes all sessions keep of their messages now.
func (s *Server) Held() int64 { return s.held.Load() }

// The macros the milter uses, requested for every stage: Postfix sends only
// the macros a milter lists once it lists any.
var macroRequests = map[gomilter.MacroStage][]gomilter.MacroName{
	gomilter.StageConnect: {gomilter.MacroClientAddr, gomilter.MacroClientName, gomilter.MacroMTAFQDN, gomilter.MacroDaemonName},
	gomilter.StageMail:    {gomilter.MacroAuthAuthen, gomilter.MacroAuthType, gomilter.MacroMailAddr, gomilter.MacroQueueId},
	gomilter.StageRcpt:    {gomilter.MacroRcptAddr},
	gomilter.StageEOM:     {gomilter.MacroQueueId},
}

// Macros returns the macros the milter asks the MTA for, by stage
// ("connect", "helo", "mail", "rcpt", "eoh", "eom"); the deploy snippets
// for Postfix and Sendmail are checked against it.
func Macros() map[string][]string {
	names := map[gomilter.MacroStage]string{
		gomilter.StageConnect: "connect", gomilter.StageHelo: "helo", gomilter.StageMail: "mail",
		gomilter.StageRcpt: "rcpt", gomilter.StageEOH: "eoh", gomilter.StageEOM: "eom",
	}
	out := map[string][]string{}
	for stage, macros := range macroRequests {
		for _, m := range macros {
			out[names[stage]] = append(out[names[stage]], string(m))
		}
	}
	return out
}

// The actions the milter may take. Postfix and Sendmail offer all of them.
const actions = gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptAddRcpt |
	gomilter.OptRemoveRcpt | gomilter.OptQuarantine

// protocol asks the MTA not to wait for replies the milter never uses: the
// verdict is only decided at end of message, so every earlier event is sent
// without a reply (twice the throughput of a milter that answers each
// header), and unknown commands, the DATA event, HELO and the end of the
// header, which it ignores, are not sent at all (two packets and their
// macros fewer a message).
const protocol = gomilter.OptNoUnknown | gomilter.OptNoData | gomilter.OptNoHelo | gomilter.OptNoEOH |
	gomilter.OptNoConnReply | gomilter.OptNoHeloReply | gomilter.OptNoMailReply |
	gomilter.OptNoRcptReply | gomilter.OptNoHeaderReply | gomilter.OptNoEOHReply |
	gomilter.OptNoBodyReply

// NewServer returns a server; call Serve to start it.
func NewServer(opt Options) *Server {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.ReadTimeout == 0 {
		opt.ReadTimeout = 15 * time.Minute
	}
	if opt.Observer == nil {
		opt.Observer = nop{}
	}
	s := &Server{opt: opt, storeFailures: ratelog.Sampler{Every: time.Minute}}
	o := append(ProtocolOptions(),
		gomilter.WithMilter(func() gomilter.Milter { return newSession(s) }),
		gomilter.WithReadTimeout(opt.ReadTimeout),
		// As long as Postfix waits for a reply (milter_content_timeout):
		// an MTA that stops reading gives up on its own by then, and a
		// shorter bound cut off replies the MTA was waiting for when this
		// host was busy (the 200,000 modifications of a 100,000-recipient
		// message, under the race detector on a loaded machine).
		gomilter.WithWriteTimeout(300*time.Second),
		gomilter.WithSpawn(func(f func()) { sessions.Go(nil, f) }),
	)
	sessions.Start()
	s.ms = gomilter.NewServer(o...)
	return s
}

// sessions runs MTA connections on long-lived goroutines, whose stacks
// have grown to a session's depth already: an MTA opens a connection a
// message or a few, and a new goroutine grew its stack by copying each
// time (runtime.copystack, ~8 µs a message, 2 % of the milter process's
// CPU in the bench's profile), besides starting and ending. Past the
// pool's size a connection gets a goroutine of its own, as before.
var sessions = gopool.New(sessionGoroutines())

// sessionGoroutines is the size of the sessions' pool: more than cores,
// since a session mostly waits for its MTA.
func sessionGoroutines() int { return max(32, 8*runtime.GOMAXPROCS(0)) }

// ProtocolOptions returns the go-milter server options that decide what
// the MTA sends and waits for: the actions, the no-reply and no-send
// flags and the macro requests. The benchmark's do-nothing milter uses
// them too, so that it negotiates exactly what the server does and the
// difference between the two is the cost of filtering alone.
func ProtocolOptions() []gomilter.Option {
	o := []gomilter.Option{
		gomilter.WithActions(actions),
		gomilter.WithProtocols(protocol),
	}
	for stage, names := range macroRequests {
		o = append(o, gomilter.WithMacroRequest(stage, names))
	}
	return o
}

// Serve accepts MTA connections on ln until Shutdown or Close.
func (s *Server) Serve(ln net.Listener) error {
	err := s.ms.Serve(guardListener{Listener: ln, met: s.opt.Observer, log: s.opt.Logger})
	if errors.Is(err, gomilter.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections, closes each MTA connection after
// the reply to its current message, and waits until no message is in
// progress, so every message received gets its reply; then it closes the
// remaining (idle) MTA connections. If ctx ends first, it closes them all.
// Postfix applies milter_default_action to later messages of SMTP sessions
// that were still open.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	go s.ms.Shutdown(ctx) //nolint:errcheck // stops listeners; sessions are closed below
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	// A message counts as done just before its reply is written, so idle
	// must hold for a short grace before connections are closed.
	const grace = 200 * time.Millisecond
	var idleSince time.Time
	for {
		if s.busy.Load() > 0 {
			idleSince = time.Time{}
		} else if idleSince.IsZero() {
			idleSince = time.Now()
		} else if time.Since(idleSince) >= grace {
			return s.ms.Close()
		}
		select {
		case <-ctx.Done():
			_ = s.ms.Close()
			return fmt.Errorf("drain: %d messages still in progress: %w", s.busy.Load(), ctx.Err())
		case <-tick.C:
		}
	}
}

// InProgress returns the number of messages between MAIL and their reply.
func (s *Server) InProgress() int64 { return s.busy.Load() }

// Close closes every listener and connection at once.
func (s *Server) Close() error { return s.ms.Close() }

// SocketAccess is who may connect to a new unix socket.
type SocketAccess struct {
	Mode  os.FileMode // permission bits; 0 leaves the process's default
	Group string      // group name or id; "" leaves the process's group
}

// Listen opens the milter socket (network "tcp" or "unix", as
// config.ParseListen gives them). A unix socket left over from an earlier
// run is removed first; access applies to a new unix socket.
func Listen(network, addr string, access SocketAccess) (net.Listener, error) {
	if network != "unix" {
		return net.Listen(network, addr)
	}
	if fi, err := os.Lstat(addr); err == nil && fi.Mode()&os.ModeSocket != 0 {
		// A live daemon would still answer; a stale socket does not.
		if c, err := net.DialTimeout("unix", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen %s: another process is serving this socket", addr)
		}
		if err := os.Remove(addr); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	ln, err := net.Listen("unix", addr)
	if err != nil {
		return nil, err
	}
	if err := setSocketAccess(addr, access); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

func setSocketAccess(path string, sock SocketAccess) error {
	if sock.Mode != 0 {
		if err := os.Chmod(path, sock.Mode); err != nil {
			return fmt.Errorf("chmod socket: %w", err)
		}
	}
	if sock.Group != "" {
		gid, err := strconv.Atoi(sock.Group)
		if err != nil {
			g, lerr := user.LookupGroup(sock.Group)
			if lerr != nil {
				return fmt.Errorf("socket group: %w", lerr)
			}
			gid, _ = strconv.Atoi(g.Gid)
		}
		if err := os.Chown(path, -1, gid); err != nil {
			return fmt.Errorf("chgrp socket: %w", err)
		}
	}
	return nil
}

// errDraining ends an MTA connection after a reply during a drain.
var errDraining = errors.New("draining: connection closed after the reply")

func init() {
	// The library's warnings (broken MTA connections, protocol errors) go to
	// slog instead of the standard logger; a connection closed by the drain
	// is no warning.
	gomilter.LogWarning = func(format string, v ...any) {
		for _, a := range v {
			if e, ok := a.(error); ok && errors.Is(e, errDraining) {
				return
			}
		}
		slog.Warn("milter protocol", "detail", fmt.Sprintf(format, v...))
	}
}
