// Package mtaclient drives a milter the way Postfix does, with
// github.com/d--j/go-milter's client: connect, HELO, MAIL, RCPT, header
// fields, body chunks and end of message, with the macros Postfix sends.
// Tests, the benchmark command and the soak command use it.
package mtaclient

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/d--j/go-milter"
	"github.com/emersion/go-message/textproto"
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

// Client connects to one milter.
type Client struct {
	c   *milter.Client
	seq int
}

// New returns a client for the milter at network/addr ("tcp",
// "127.0.0.1:7357"; "unix", "/path").
func New(network, addr string, opts ...milter.Option) *Client {
	o := append([]milter.Option{
		milter.WithReadTimeout(30 * time.Second),
		milter.WithWriteTimeout(30 * time.Second),
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

// Send sends one message with the session's envelope and the given
// sender and recipients (empty values keep the envelope's).
func (s *Session) Send(from string, rcpts []string, msg []byte) (Result, error) {
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
	s.cl.seq++
	qid := s.env.QueueID
	if qid == "" {
		qid = fmt.Sprintf("Q%08X", s.cl.seq)
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
	hdr, body, err := split(msg)
	if err != nil {
		return Result{}, err
	}
	for f := hdr.Fields(); f.Next(); {
		raw, err := f.Raw()
		if err != nil {
			return Result{}, err
		}
		// The MTA passes the value as it appears after the colon, folding
		// kept, without the final line break and the leading space.
		_, value, _ := bytes.Cut(raw, []byte(":"))
		value = bytes.TrimSuffix(value, []byte("\r\n"))
		value = bytes.TrimPrefix(value, []byte(" "))
		if err := check(s.s.HeaderField(f.Key(), string(value), nil)); err != nil {
			return Result{}, fmt.Errorf("header %s: %w", f.Key(), err)
		}
	}
	if err := check(s.s.HeaderEnd()); err != nil {
		return Result{}, fmt.Errorf("end of header: %w", err)
	}
	mods, act, err := s.s.BodyReadFrom(bytes.NewReader(toCRLF(body)))
	if err != nil {
		return Result{}, fmt.Errorf("body: %w", err)
	}
	return Result{Action: act, Mods: mods}, nil
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

// split parses a raw message into its header and body.
func split(msg []byte) (textproto.Header, []byte, error) {
	br := bufio.NewReader(bytes.NewReader(toCRLF(msg)))
	h, err := textproto.ReadHeader(br)
	if err != nil && !errors.Is(err, io.EOF) {
		return h, nil, fmt.Errorf("parse message header: %w", err)
	}
	body, _ := io.ReadAll(br)
	return h, body, nil
}

// toCRLF turns LF line ends into CRLF, as on the wire.
func toCRLF(b []byte) []byte {
	if !bytes.Contains(b, []byte("\n")) || bytes.Contains(b, []byte("\r\n")) {
		return b
	}
	return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))
}
