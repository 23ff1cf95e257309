package milter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	gomilter "github.com/d--j/go-milter"
	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/metrics"
)

// maxHeaderValue bounds the bytes of one header field kept for analysis;
// the MTA still gets the whole field.
const maxHeaderValue = 64 << 10

// session is one MTA connection. Connection facts live here, not in the
// library's macros, which are cleared on ABORT.
type session struct {
	srv *Server
	log *slog.Logger

	clientAddr, clientName string

	// Per message; reset by MailFrom and Abort.
	state      *State
	inMessage  bool
	started    time.Time
	sender     string
	authUser   string
	rcpts      []string
	header     textproto.Header
	headers    int
	ownHeaders int // copies of the verdict header in the message
	fbHeaders  int // copies of the feedback header
	fbValue    string
	subject    int // Subject fields seen
	body       bytes.Buffer
	truncated  bool
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
	s.srv.opt.Metrics.Panic(callback)
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
	s.srv.opt.Metrics.SessionOpened()
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
	s.srv.opt.Metrics.MessageStarted()
	s.started = time.Now()
	s.state = s.srv.opt.State()
	s.sender = from
	s.authUser = m.Get(gomilter.MacroAuthAuthen)
	if s.clientAddr == "" {
		s.clientAddr = m.Get(gomilter.MacroClientAddr)
	}
	return gomilter.RespContinue, nil
}

func (s *session) RcptTo(rcptTo, esmtpArgs string, m gomilter.Modifier) (resp *gomilter.Response, err error) {
	defer s.guard("RcptTo", &resp, &err)
	if len(s.rcpts) < 100_000 {
		s.rcpts = append(s.rcpts, rcptTo)
	}
	return gomilter.RespContinue, nil
}

func (s *session) Data(m gomilter.Modifier) (*gomilter.Response, error) {
	return gomilter.RespContinue, nil
}

func (s *session) Header(name, value string, m gomilter.Modifier) (resp *gomilter.Response, err error) {
	defer s.guard("Header", &resp, &err)
	if s.state == nil {
		return gomilter.RespContinue, nil
	}
	cfg := s.state.Config
	// Every copy of our own headers is counted, even past the analysis
	// limit, so that all of them are removed.
	switch {
	case strings.EqualFold(name, cfg.Actions.Header):
		s.ownHeaders++
		return gomilter.RespContinue, nil
	case strings.EqualFold(name, cfg.Feedback.Header):
		s.fbHeaders++
		if s.fbValue == "" {
			s.fbValue = strings.TrimSpace(value)
		}
		return gomilter.RespContinue, nil
	case strings.EqualFold(name, "Subject"):
		s.subject++
	}
	if s.headers >= cfg.Limits.MaxHeaders {
		s.truncated = true
		return gomilter.RespContinue, nil
	}
	s.headers++
	if len(value) > maxHeaderValue {
		value, s.truncated = value[:maxHeaderValue], true
	}
	s.header.Add(name, unfold(value))
	return gomilter.RespContinue, nil
}

// unfold joins a folded header value into one line (RFC 5322 §2.2.3).
func unfold(v string) string {
	if !strings.ContainsAny(v, "\r\n") {
		return v
	}
	v = strings.ReplaceAll(v, "\r\n", "")
	return strings.ReplaceAll(v, "\n", "")
}

func (s *session) Headers(m gomilter.Modifier) (*gomilter.Response, error) {
	return gomilter.RespContinue, nil
}

func (s *session) BodyChunk(chunk []byte, m gomilter.Modifier) (resp *gomilter.Response, err error) {
	defer s.guard("BodyChunk", &resp, &err)
	if s.state == nil {
		return gomilter.RespContinue, nil
	}
	limit := int(s.state.Config.Limits.MaxMessageBytes)
	if room := limit - s.body.Len(); room < len(chunk) {
		chunk, s.truncated = chunk[:max(room, 0)], true
	}
	s.body.Write(chunk)
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
	log := s.log.With("queue_id", m.Get(gomilter.MacroQueueId))
	cfg := s.state.Config
	msg := &detect.Message{
		Header:     s.header,
		Body:       bytes.NewReader(s.body.Bytes()),
		Recipients: s.rcpts,
		Truncated:  s.truncated,
	}
	// The store budget bounds Check; the extra second covers extraction of
	// a large message, and keeps us far below Postfix's 30 s timeout.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Policy.StoreTimeout.D()+time.Second)
	defer cancel()

	if s.fbHeaders > 0 {
		switch s.feedback(ctx, msg, log) {
		case FeedbackConsumed:
			s.srv.opt.Metrics.Message(metrics.VerdictFeedback, time.Since(s.started))
			if cfg.Feedback.Keep == "discard" {
				s.srv.opt.Metrics.Action("discard")
				return gomilter.RespDiscard, nil
			}
			if err := errors.Join(s.removeIncoming(m, log)...); err != nil {
				s.srv.opt.Metrics.Error(metrics.StageAction)
				log.Error("remove feedback header", "err", err)
			}
			return gomilter.RespContinue, nil
		case FeedbackRetry:
			s.srv.opt.Metrics.Message(metrics.VerdictFeedback, time.Since(s.started))
			s.srv.opt.Metrics.Action("tempfail")
			return gomilter.RespTempFail, nil
		}
	}

	v := s.state.Pipeline.Check(ctx, msg)
	if v.Err != nil {
		if skipped, ok := s.srv.storeFailures.Allow(time.Now()); ok {
			log.Warn("store failed; failure policy applied", "policy", cfg.Policy.OnStoreError,
				"err", v.Err, "similar_failures_not_logged", skipped)
		}
		if cfg.Policy.OnStoreError == "tempfail" {
			s.srv.opt.Metrics.Action("tempfail")
			return gomilter.RespTempFail, nil
		}
	}
	if err := s.apply(m, v, log); err != nil {
		// A failed modification leaves the message as the MTA has it:
		// delivered, possibly untagged. Never lose it.
		s.srv.opt.Metrics.Error(metrics.StageAction)
		log.Error("apply verdict", "err", err)
	}
	log.Debug("verdict", "bulk", v.Bulk, "family", v.Family.String(), "volume", v.Volume,
		"override", v.Override, "recipients", len(s.rcpts), "truncated", s.truncated)
	return gomilter.RespContinue, nil
}

// feedback hands a message carrying the feedback header to the feedback
// handler. The header itself is removed from the message in any case.
func (s *session) feedback(ctx context.Context, msg *detect.Message, log *slog.Logger) FeedbackOutcome {
	if s.state.Feedback == nil || !s.state.Config.Feedback.Enabled {
		return FeedbackIgnored
	}
	return s.state.Feedback.HandleFeedback(ctx, &Feedback{
		Value:      s.fbValue,
		ClientAddr: s.clientAddr,
		AuthUser:   s.authUser,
		Sender:     s.sender,
		Message:    msg,
		Logger:     log,
	})
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
	s.srv.opt.Metrics.SessionClosed()
}

// endMessage forgets the current message.
func (s *session) endMessage() {
	if s.inMessage {
		s.inMessage = false
		s.srv.busy.Add(-1)
		s.srv.opt.Metrics.MessageDone()
	}
	s.state = nil
	s.sender, s.authUser, s.fbValue = "", "", ""
	s.rcpts = s.rcpts[:0]
	s.header = textproto.Header{}
	s.headers, s.ownHeaders, s.fbHeaders, s.subject = 0, 0, 0, 0
	s.body.Reset()
	if s.body.Cap() > 1<<20 {
		s.body = bytes.Buffer{} // don't keep a huge buffer for the next message
	}
	s.truncated = false
}
