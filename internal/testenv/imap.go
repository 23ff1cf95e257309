package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// IMAPClient is a minimal IMAP4rev1 client for tests that log in to Dovecot
// and move messages (for example to trigger imapsieve rules). It sends one
// command at a time and returns the untagged response lines; literals in
// responses are read and appended to their line. It is not safe for
// concurrent use.
type IMAPClient struct {
	conn net.Conn
	r    *bufio.Reader
	seq  int
}

// DialIMAP connects to an IMAP server and reads its greeting.
func DialIMAP(addr string) (*IMAPClient, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("dial imap %s: %w", addr, err)
	}
	c := &IMAPClient{conn: conn, r: bufio.NewReader(conn)}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	greeting, err := c.readLine()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("imap greeting: %w", err)
	}
	if !strings.HasPrefix(greeting, "* OK") {
		conn.Close()
		return nil, fmt.Errorf("imap greeting %q", greeting)
	}
	return c, nil
}

// IMAP logs user in over IMAP and closes the connection in t.Cleanup.
func (d *Dovecot) IMAP(t testing.TB, user string) *IMAPClient {
	t.Helper()
	c, err := DialIMAP(d.IMAPAddr())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Cmd("LOGIN %s %s", Quote(user), Quote(d.opts.Password)); err != nil {
		t.Fatalf("testenv: imap login %s: %v", user, err)
	}
	return c
}

// Quote returns s as an IMAP quoted string.
func Quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// Cmd sends one command (without tag) and returns the untagged responses;
// a NO or BAD completion is an error carrying the server's text.
func (c *IMAPClient) Cmd(format string, args ...any) ([]string, error) {
	c.seq++
	tag := "t" + strconv.Itoa(c.seq)
	cmd := fmt.Sprintf(format, args...)
	_ = c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(c.conn, "%s %s\r\n", tag, cmd); err != nil {
		return nil, fmt.Errorf("imap %s: %w", cmd, err)
	}
	var untagged []string
	for {
		line, err := c.readLine()
		if err != nil {
			return untagged, fmt.Errorf("imap %s: %w", cmd, err)
		}
		rest, ok := strings.CutPrefix(line, tag+" ")
		if !ok {
			untagged = append(untagged, line)
			continue
		}
		if strings.HasPrefix(rest, "OK") {
			return untagged, nil
		}
		return untagged, fmt.Errorf("imap %s: %s", cmd, rest)
	}
}

var literalRE = regexp.MustCompile(`\{(\d+)\}$`)

// readLine reads one response line, with any literals it announces.
func (c *IMAPClient) readLine() (string, error) {
	var b strings.Builder
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		b.WriteString(line)
		m := literalRE.FindStringSubmatch(line)
		if m == nil {
			return b.String(), nil
		}
		n, _ := strconv.Atoi(m[1])
		if n > 64<<20 {
			return "", fmt.Errorf("literal of %d bytes", n)
		}
		lit := make([]byte, n)
		if _, err := io.ReadFull(c.r, lit); err != nil {
			return "", err
		}
		b.WriteString("\r\n")
		b.Write(lit)
	}
}

var existsRE = regexp.MustCompile(`^\* (\d+) EXISTS`)

// Select opens a mailbox read-write and returns how many messages it holds.
func (c *IMAPClient) Select(mailbox string) (int, error) {
	lines, err := c.Cmd("SELECT %s", Quote(mailbox))
	if err != nil {
		return 0, err
	}
	for _, l := range lines {
		if m := existsRE.FindStringSubmatch(l); m != nil {
			return strconv.Atoi(m[1])
		}
	}
	return 0, fmt.Errorf("imap SELECT %s: no EXISTS response", mailbox)
}

// Move moves the messages of a sequence set ("1", "1:*") of the selected
// mailbox to another mailbox (RFC 6851 MOVE).
func (c *IMAPClient) Move(seqset, mailbox string) error {
	_, err := c.Cmd("MOVE %s %s", seqset, Quote(mailbox))
	return err
}

// Copy copies the messages of a sequence set to another mailbox.
func (c *IMAPClient) Copy(seqset, mailbox string) error {
	_, err := c.Cmd("COPY %s %s", seqset, Quote(mailbox))
	return err
}

// Close logs out and closes the connection.
func (c *IMAPClient) Close() error {
	_, _ = c.Cmd("LOGOUT")
	return c.conn.Close()
}
