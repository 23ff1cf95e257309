// Package mtaclient drives a milter the way Postfix does, with
// github.com/d--j/go-milter's client: connect, HELO, MAIL, RCPT, header
// fields, body chunks and end of message, with the macros Postfix sends.
// A raw message is cut into fields and body by detect.Split, the split
// the daemon's offline commands use and that TestSplitAsPostfix holds to
// a real Postfix's. Tests, the benchmark command and the soak command use
// it; the daemon never does. It imports detect alone (Split).
package mtaclient

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/d--j/go-milter"

	"github.com/bulkmilter/bulkmilter/detect"
)

// Envelope is the SMTP side of one message.
type Envelope struct {
	ClientAddr string // SMTP client address; default 192.0.2.1
	Helo       string // default "client.example"
	AuthUser   string // SASL login, empty when not authenticated
	From       string
	Rcpts      []string
	QueueID    string // default: generated
}

// Result is what the milter answered at end of message.
type Result struct {
	Action *milter.Action
	Mods   []milter.ModifyAction
	// Wait is how long the MTA waited for the reply after the end of the
	// message, the time a milter adds to the SMTP transaction.
	Wait time.Duration
}

// Header returns the value of the first added header with the name, and
// whether there was one.
func (r Result) Header(name string) (string, bool) {
	for _, m := range r.Mods {
		if (m.Type == milter.ActionAddHeader || m.Type == milter.ActionInsertHeader) && strings.EqualFold(m.HeaderName, name) {
			return m.HeaderValue, true
		}
	}
	return "", false
}

// ErrNoReply marks a message sent whole, end of message included, that
// got no reply: the one failure a milter must never cause (an MTA applies
// its default action, usually tempfail). Failures before the end of the
// message (a refused connection, a closed session) are not marked.
var ErrNoReply = errors.New("no reply to end of message")

// ReplyTimeout bounds each read and write on a milter connection:
// Postfix's milter_content_timeout.
const ReplyTimeout = 300 * time.Second

// Client connects to one milter.
type Client struct {
	c   *milter.Client
	seq atomic.Int64 // queue IDs; sessions of one client may run concurrently
}

// New returns a client for the milter at network/addr ("tcp",
// "127.0.0.1:7357"; "unix", "/path").
//
// A reply is waited for as long as Postfix waits at end of message
// (milter_content_timeout, 300 s): a stricter client failed tests whose
// milter was only slow on a busy machine (a 100,000-recipient message
// under the race detector took more than 30 s).
func New(network, addr string, opts ...milter.Option) *Client {
	o := append([]milter.Option{
		milter.WithReadTimeout(ReplyTimeout),
		milter.WithWriteTimeout(ReplyTimeout),
	}, opts...)
	return &Client{c: milter.NewClient(network, addr, o...)}
}

// Session is one MTA connection, over which several messages can be sent
// as Postfix does for one SMTP session.
type Session struct {
	cl     *Client
	s      *milter.ClientSession
	macros *milter.MacroBag
	env    Envelope
	sent   int
}

// Open opens an MTA connection for an SMTP client.
func (c *Client) Open(env Envelope) (*Session, error) {
	if env.ClientAddr == "" {
		env.ClientAddr = "192.0.2.1"
	}
	if env.Helo == "" {
		env.Helo = "client.example"
	}
	macros := milter.NewMacroBag()
	macros.Set(milter.MacroMTAFQDN, "mx.example.test")
	macros.Set(milter.MacroDaemonName, "smtpd")
	macros.Set(milter.MacroClientAddr, env.ClientAddr)
	macros.Set(milter.MacroClientName, env.Helo)
	s, err := c.c.Session(macros)
	if err != nil {
		return nil, fmt.Errorf("milter session: %w", err)
	}
	sess := &Session{cl: c, s: s, macros: macros, env: env}
	if err := check(s.Conn(env.Helo, milter.FamilyInet, 25, env.ClientAddr)); err != nil {
		s.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := check(s.Helo(env.Helo)); err != nil {
		s.Close()
		return nil, fmt.Errorf("helo: %w", err)
	}
	return sess, nil
}

func check(act *milter.Action, err error) error {
	if err != nil {
		return err
	}
	if act != nil && act.StopProcessing() {
		return fmt.Errorf("milter stopped the transaction: %v", act)
	}
	return nil
}

// head sends a message's envelope and header fields: everything up to the
// body.
func (s *Session) head(from string, rcpts []string, msg []byte) (Result, error) {
	if from == "" {
		from = s.env.From
	}
	if rcpts == nil {
		rcpts = s.env.Rcpts
	}
	if s.sent > 0 {
		// Postfix aborts the previous transaction before the next MAIL.
		if err := s.s.Abort(nil); err != nil {
			return Result{}, fmt.Errorf("abort: %w", err)
		}
	}
	s.sent++
	seq := s.cl.seq.Add(1)
	qid := s.env.QueueID
	if qid == "" {
		qid = fmt.Sprintf("Q%08X", seq)
	}
	s.macros.Set(milter.MacroAuthAuthen, s.env.AuthUser)
	if s.env.AuthUser != "" {
		s.macros.Set(milter.MacroAuthType, "PLAIN")
	} else {
		s.macros.Set(milter.MacroAuthType, "")
	}
	s.macros.Set(milter.MacroMailAddr, from)
	s.macros.Set(milter.MacroQueueId, qid)
	if err := check(s.s.Mail(from, "")); err != nil {
		return Result{}, fmt.Errorf("mail: %w", err)
	}
	for _, r := range rcpts {
		s.macros.Set(milter.MacroRcptAddr, r)
		if err := check(s.s.Rcpt(r, "")); err != nil {
			return Result{}, fmt.Errorf("rcpt: %w", err)
		}
	}
	if err := check(s.s.DataStart()); err != nil {
		return Result{}, fmt.Errorf("data: %w", err)
	}
	fields, _ := detect.Split(msg)
	for _, f := range fields {
		if err := check(s.s.HeaderField(f.Name, f.Value, nil)); err != nil {
			return Result{}, fmt.Errorf("header %s: %w", f.Name, err)
		}
	}
	if err := check(s.s.HeaderEnd()); err != nil {
		return Result{}, fmt.Errorf("end of header: %w", err)
	}
	return Result{}, nil
}

// bodyChunk is the largest body packet a milter must accept (64 KiB, less
// the command byte), the size Postfix sends.
const bodyChunk = 65535

// Send sends one message with the session's envelope and the given
// sender and recipients (empty values keep the envelope's).
func (s *Session) Send(from string, rcpts []string, msg []byte) (Result, error) {
	_, body := detect.Split(msg)
	if _, err := s.head(from, rcpts, msg); err != nil {
		return Result{}, err
	}
	for len(body) > 0 {
		n := min(len(body), bodyChunk)
		if err := check(s.s.BodyChunk(body[:n])); err != nil {
			return Result{}, fmt.Errorf("body: %w", err)
		}
		body = body[n:]
	}
	start := time.Now()
	mods, act, err := s.s.End()
	if err != nil {
		return Result{}, fmt.Errorf("end of message: %w: %w", ErrNoReply, err)
	}
	return Result{Action: act, Mods: mods, Wait: time.Since(start)}, nil
}

// SendCut starts a message like Send but sends only the first bodyBytes
// of its body, then closes the connection without end of message, as an
// MTA whose SMTP client vanished mid-DATA, or that crashed, would. The
// session cannot be used afterwards.
func (s *Session) SendCut(from string, rcpts []string, msg []byte, bodyBytes int) error {
	defer s.Close()
	_, body := detect.Split(msg)
	if _, err := s.head(from, rcpts, msg); err != nil {
		return err
	}
	body = body[:min(bodyBytes, len(body))]
	for len(body) > 0 {
		n := min(len(body), bodyChunk)
		if err := check(s.s.BodyChunk(body[:n])); err != nil {
			return fmt.Errorf("body: %w", err)
		}
		body = body[n:]
	}
	return nil
}

// Close ends the MTA connection.
func (s *Session) Close() error { return s.s.Close() }

// Send sends one message over a new connection and closes it.
func (c *Client) Send(env Envelope, msg []byte) (Result, error) {
	s, err := c.Open(env)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	return s.Send("", nil, msg)
}
