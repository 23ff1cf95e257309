package milter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	gomilter "github.com/d--j/go-milter"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/feedback"
)

// session is one MTA connection. Connection facts live here, not in the
// library's macros, which are cleared on ABORT. The message itself is
// kept by a detect.Builder, within the state's limits and the server's
// memory budget: the same code turns a raw file into a message offline.
type session struct {
	srv *Server
	log *slog.Logger

	clientAddr, clientName string

	// Per message; reset by MailFrom and Abort.
	state     *State
	inMessage bool
	started   time.Time
	authUser  string
	b         *detect.Builder
	bState    *State         // the state b was made for
	pb        *pooledBuilder // b and bState, for the server's pool
	limited   bool           // the server's memory budget cut this message
}

func newSession(s *Server) *session {
	return &session{srv: s, log: s.opt.Logger}
}

// guard recovers a panic in a callback into a safe reply and a metric. The
// message is then delivered untagged: a bulk tagger must never lose mail.
func (s *session) guard(callback string, resp **gomilter.Response, err *error) {
	r := recover()
	if r == nil {
		return
	}
	s.srv.opt.Observer.Panic(callback)
	s.log.Error("panic in milter callback; message passed untagged", "callback", callback,
		"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	s.endMessage()
	if resp != nil {
		*resp = gomilter.RespContinue
	}
	if err != nil {
		*err = nil
	}
}

func (s *session) NewConnection(m gomilter.Modifier) (err error) {
	defer s.guard("NewConnection", nil, &err)
	s.srv.opt.Observer.SessionOpened()
	return nil
}

func (s *session) Connect(host, family string, port uint16, addr string, m gomilter.Modifier) (resp *gomilter.Response, err error) {
	defer s.guard("Connect", &resp, &err)
	s.clientAddr, s.clientName = addr, host
	if a := m.Get(gomilter.MacroClientAddr); a != "" {
		s.clientAddr = a
	}
	return gomilter.RespContinue, nil
}

func (s *session) Helo(name string, m gomilter.Modifier) (resp *gomilter.Response, err error) {
	return gomilter.RespContinue, nil
}

func (s *session) MailFrom(from, esmtpArgs string, m gomilter.Modifier) (resp *gomilter.Response, err error) {
	defer s.guard("MailFrom", &resp, &err)
	s.endMessage()
	s.inMessage = true
	s.srv.busy.Add(1)
	s.srv.opt.Observer.MessageStarted()
	s.started = time.Now()
	s.state = s.srv.opt.State()
	if s.b == nil || s.bState != s.state {
		s.pb = s.srv.builder(s.state)
		s.b, s.bState = s.pb.b, s.state
		s.b.Grant = s.grant
	}
	s.authUser = m.Get(gomilter.MacroAuthAuthen)
	if s.clientAddr == "" {
		s.clientAddr = m.Get(gomilter.MacroClientAddr)
	}
	s.b.Sender(from)
	s.b.Client(s.clientAddr)
	return gomilter.RespContinue, nil
}

// grant asks the server for bytes beyond what every message may keep.
func (s *session) grant(n int, must bool) bool {
	if s.srv.grant(n, must, s.state.MaxHeldBytes) {
		return true
	}
	if !s.limited {
		s.limited = true
		s.srv.opt.Observer.MemoryLimited()
	}
	return false
}

func (s *session) RcptTo(rcptTo, esmtpArgs string, m gomilter.Modifier) (resp *gomilter.Response, err error) {
	defer s.guard("RcptTo", &resp, &err)
	if s.state != nil {
		s.b.Recipient(rcptTo)
	}
	return gomilter.RespContinue, nil
}

func (s *session) Data(m gomilter.Modifier) (*gomilter.Response, error) {
	return gomilter.RespContinue, nil
}

// Header is never called: our go-milter fork calls HeaderBytes instead.
func (s *session) Header(name, value string, m gomilter.Modifier) (*gomilter.Response, error) {
	return s.HeaderBytes([]byte(name), []byte(value), m)
}

// HeaderBytes takes a field as the packet's bytes (go-milter fork patch
// 5): the Builder copies them into one buffer a message.
func (s *session) HeaderBytes(name, value []byte, m gomilter.Modifier) (resp *gomilter.Response, err error) {
	defer s.guard("Header", &resp, &err)
	if s.state != nil {
		// Every copy of our own headers is counted, even past the
		// limits, so that all of them are removed.
		s.b.HeaderBytes(name, value)
	}
	return gomilter.RespContinue, nil
}

func (s *session) Headers(m gomilter.Modifier) (*gomilter.Response, error) {
	return gomilter.RespContinue, nil
}

func (s *session) BodyChunk(chunk []byte, m gomilter.Modifier) (resp *gomilter.Response, err error) {
	defer s.guard("BodyChunk", &resp, &err)
	if s.state != nil {
		s.b.Body(chunk)
	}
	return gomilter.RespContinue, nil
}

func (s *session) EndOfMessage(m gomilter.Modifier) (resp *gomilter.Response, err error) {
	defer s.guard("EndOfMessage", &resp, &err)
	defer func() {
		// While draining, the connection closes once this reply is
		// written (go-milter writes the reply of a callback that returns
		// an error, then ends the session), so that an MTA connection
		// carrying message after message cannot hold the drain until its
		// deadline cuts messages off. The MTA's next message on it gets
		// its default action, before its end.
		if err == nil && resp != nil && s.srv.draining.Load() {
			err = errDraining
		}
	}()
	defer s.endMessage()
	if s.state == nil { // no MAIL event: nothing to judge
		return gomilter.RespContinue, nil
	}
	log := &msgLogger{base: s.log, queueID: m.Get(gomilter.MacroQueueId)}
	act := &s.state.Actions
	obs := s.srv.opt.Observer
	msg := s.b.Message()
	// No deadline here: the pipeline bounds its store call by
	// policy.store_timeout from the moment the analysis is done, and the
	// limits bound the analysis, so a large message is never taken for a
	// store failure.
	ctx := context.Background()

	if n, value := s.b.FeedbackHeaders(); n > 0 && s.state.Feedback != nil {
		r := &feedback.Report{Value: value, AuthUser: s.authUser, Message: msg, Logger: log.get()}
		out := s.state.Feedback.Handle(ctx, r)
		fbArgs := []slog.Attr{slog.String("outcome", out.String())}
		for _, kv := range [][2]string{{"voter", r.Voter}, {"trusted_by", r.TrustedBy}, {"kind", r.Kind}, {"rejected", r.Rejected}} {
			if kv[1] != "" {
				fbArgs = append(fbArgs, slog.String(kv[0], kv[1]))
			}
		}
		switch out {
		case feedback.Consumed:
			obs.Message(VerdictFeedback, time.Since(s.started))
			action := "deliver"
			if act.DiscardFeedback {
				obs.Action("discard")
				action = "discard"
				resp = gomilter.RespDiscard
			} else {
				if err := errors.Join(s.removeIncoming(m, log)...); err != nil {
					obs.Error(StageAction)
					log.get().Error("remove feedback header", "err", err)
				}
				resp = gomilter.RespContinue
			}
			s.logMessage(log, VerdictFeedback, append(fbArgs, slog.String("action", action))...)
			return resp, nil
		case feedback.Retry:
			obs.Message(VerdictFeedback, time.Since(s.started))
			obs.Action("tempfail")
			s.logMessage(log, VerdictFeedback, append(fbArgs, slog.String("action", "tempfail"))...)
			return gomilter.RespTempFail, nil
		}
	}

	v := s.state.Pipeline.Check(ctx, msg)
	if v.Err != nil {
		if skipped, ok := s.srv.storeFailures.Allow(time.Now()); ok {
			log.get().Warn("store failed; failure policy applied", "tempfail", act.TempfailOnStoreError,
				"err", v.Err, "similar_failures_not_logged", skipped)
		}
		if act.TempfailOnStoreError {
			obs.Action("tempfail")
			s.logMessage(log, v.Outcome(), slog.String("action", "tempfail"))
			return gomilter.RespTempFail, nil
		}
	}
	if err := s.apply(m, msg, v, log); err != nil {
		// A failed modification leaves the message as the MTA has it:
		// delivered, possibly untagged. Never lose it.
		obs.Error(StageAction)
		log.get().Error("apply verdict", "err", err)
	}
	if log.base.Enabled(ctx, slog.LevelInfo) {
		s.logMessage(log, v.Outcome(), verdictAttrs(&v)...)
	}
	return gomilter.RespContinue, nil
}

// verdictAttrs are what the log line says of a verdict.
func verdictAttrs(v *detect.Verdict) []slog.Attr {
	var args []slog.Attr
	if !v.Unsigned && v.Err == nil {
		args = append(args, slog.String("family", v.Family.String()), slog.Int64("volume", v.Volume))
		if c := v.CampaignID(); c != "" {
			args = append(args, slog.String("campaign", c))
		}
		args = append(args, slog.Int("bulk_level", v.LevelAs(v.Tagged())), slog.String("bulk_kind", v.Kind()))
	}
	if v.Override != "" {
		args = append(args, slog.String("feedback", v.Override))
	}
	if v.Slow {
		args = append(args, slog.Bool("slow", true))
	}
	if v.ExemptSender != "" {
		args = append(args, slog.String("exempt_sender", v.ExemptSender))
	}
	return args
}

// maxLoggedRecipients bounds the addresses one log line names.
const maxLoggedRecipients = 10

// logMessage writes the one info line each message gets: its verdict,
// what it was, how long it took; the addresses only when configured.
func (s *session) logMessage(log *msgLogger, verdict string, args ...slog.Attr) {
	if !log.base.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	msg := s.b.Message()
	// The queue id first, where the logger's With would have put it.
	attrs := make([]slog.Attr, 0, len(args)+8)
	attrs = append(attrs, slog.String("queue_id", log.queueID), slog.String("verdict", verdict))
	attrs = append(attrs, args...)
	attrs = append(attrs, slog.Int("recipients", len(msg.Recipients)))
	if msg.Truncated {
		attrs = append(attrs, slog.Bool("truncated", true))
	}
	if n := s.b.VerdictHeaders() + s.b.LevelHeaders() + len(s.b.ForgedResults()); n > 0 {
		attrs = append(attrs, slog.Int("forged_headers", n))
	}
	if s.state.Actions.LogAddresses {
		rcpts := msg.Recipients[:min(len(msg.Recipients), maxLoggedRecipients)]
		attrs = append(attrs, slog.String("from", msg.Sender), slog.Any("to", rcpts))
	}
	attrs = append(attrs, slog.Duration("took", time.Since(s.started).Round(10*time.Microsecond)))
	log.base.LogAttrs(context.Background(), slog.LevelInfo, "message", attrs...)
}

// msgLogger is a message's logger: the session's with the message's queue
// id, made at its first use. slog's With formats its attributes at once,
// a tenth of the session's own CPU outside the pipeline, while most
// messages log only their info line, which names the queue id itself.
type msgLogger struct {
	base    *slog.Logger
	queueID string
	l       *slog.Logger
}

func (l *msgLogger) get() *slog.Logger {
	if l.l == nil {
		l.l = l.base.With("queue_id", l.queueID)
	}
	return l.l
}

// debug logs at debug level with the queue id, when that level is on.
func (l *msgLogger) debug(msg string, args ...any) {
	if l.base.Enabled(context.Background(), slog.LevelDebug) {
		l.get().Debug(msg, args...)
	}
}

func (s *session) Abort(m gomilter.Modifier) (err error) {
	defer s.guard("Abort", nil, &err)
	s.endMessage()
	return nil
}

func (s *session) Unknown(cmd string, m gomilter.Modifier) (*gomilter.Response, error) {
	return gomilter.RespContinue, nil
}

func (s *session) Cleanup(m gomilter.Modifier) {
	defer s.guard("Cleanup", nil, nil)
	s.endMessage()
	if s.b != nil {
		s.b.Grant = nil
		s.srv.builders.Put(s.pb)
		s.b, s.bState, s.pb = nil, nil, nil
	}
	s.srv.opt.Observer.SessionClosed()
}

// endMessage forgets the current message and returns its bytes to the
// server's budget.
func (s *session) endMessage() {
	if s.inMessage {
		s.inMessage = false
		s.srv.busy.Add(-1)
		s.srv.opt.Observer.MessageDone()
	}
	s.state = nil
	s.authUser = ""
	s.limited = false
	if s.b != nil {
		s.srv.release(s.b.Held())
		s.b.Reset()
	}
}
