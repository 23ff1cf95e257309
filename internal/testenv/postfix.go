package testenv

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/smtp"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// PostfixOptions configures StartPostfix. The zero value is a Postfix with no
// milter that accepts mail from 127.0.0.0/8 for any domain and delivers all of
// it over LMTP to a Sink started for it.
type PostfixOptions struct {
	// MilterAddr is the "host:port" of the milter smtpd talks to
	// (smtpd_milters = inet:MilterAddr). Empty means no milter.
	MilterAddr string
	// MilterDefaultAction is milter_default_action: what smtpd does when the
	// milter cannot be reached or misbehaves. Empty means "tempfail", so a
	// broken milter shows up as a failed SMTP transaction.
	MilterDefaultAction string
	// Transport is where every accepted message goes; it becomes
	// local_transport, default_transport and relay_transport, e.g.
	// "lmtp:unix:/path/dovecot-lmtp" or "lmtp:inet:127.0.0.1:2424". Empty
	// means "lmtp:inet:" + the address of a Sink started for this instance.
	Transport string
	// Domain is the local test domain in mydestination (with "localhost").
	// Empty means "example.test"; other domains are relayed from 127.0.0.0/8
	// and, by default, also end up at Transport.
	Domain string
	// Main sets or overrides main.cf parameters, e.g.
	// {"milter_mail_macros": "i {mail_addr}"}. Applied last.
	Main map[string]string
	// MasterCF holds extra master.cf lines, appended after the defaults.
	MasterCF []string
	// Chroot runs smtpd chrooted in queue_directory, as Debian's master.cf
	// does: a unix milter socket must then be given by its path inside
	// the queue directory ("unix:/bulkmilter/milter.sock" for
	// QueueDir()+"/bulkmilter/milter.sock"). Local submissions (pickup,
	// cleanup) are not chrooted.
	Chroot bool
}

// Postfix is a real Postfix instance with its own configuration, queue and
// data directories under t.TempDir(), its master running in the foreground as
// a child of the test, and one smtpd on a free 127.0.0.1 port (no port 25).
type Postfix struct {
	t         testing.TB
	base      string
	confDir   string
	queueDir  string
	logPath   string
	port      int
	sink      *Sink
	proc      *process
	postqueue string
}

// postfixStartTimeout bounds the wait for the first SMTP banner.
const postfixStartTimeout = 20 * time.Second

// postfixQueues are the queue subdirectories that hold messages.
var postfixQueues = []string{"maildrop", "incoming", "active", "deferred", "hold"}

// StartPostfix writes main.cf and master.cf into a fresh directory, creates
// the queue directories with the ownership Postfix expects, starts
// `master -c DIR -d`, waits for an SMTP banner, and stops Postfix in
// t.Cleanup. It needs root (master drops to the postfix user itself) and
// the postfix user and postdrop group.
func StartPostfix(t testing.TB, opts PostfixOptions) *Postfix {
	t.Helper()
	master := Program(t, "master") // /usr/lib/postfix/sbin on Debian
	postqueue := Program(t, "postqueue")
	Program(t, "smtpd")
	RequireRoot(t, "the Postfix harness")
	owner, err := user.Lookup("postfix")
	if err != nil {
		unavailable(t, "user postfix missing (%v); is Postfix installed?", err)
	}
	drop, err := user.LookupGroup("postdrop")
	if err != nil {
		unavailable(t, "group postdrop missing (%v); is Postfix installed?", err)
	}
	uid, _ := strconv.Atoi(owner.Uid)
	gid, _ := strconv.Atoi(drop.Gid)

	p := &Postfix{t: t, base: t.TempDir(), postqueue: postqueue}
	p.confDir = filepath.Join(p.base, "conf")
	p.queueDir = filepath.Join(p.base, "queue")
	p.logPath = filepath.Join(p.base, "maillog")
	if err := preparePostfixDirs(p.base, uid, gid); err != nil {
		t.Fatalf("testenv: postfix: %v", err)
	}
	if opts.Transport == "" {
		p.sink = StartSink(t)
	}

	startOnFreePort(t, "postfix", func() error {
		p.port, err = freePort(t)
		if err != nil {
			t.Fatalf("testenv: postfix: %v", err)
		}
		if err := p.writeConfig(opts); err != nil {
			t.Fatalf("testenv: postfix: %v", err)
		}
		return p.start(master)
	})
	t.Cleanup(p.Stop)
	return p
}

// preparePostfixDirs creates what `postfix check` (post-install
// create-missing) would, with the modes and owners of Debian's postfix-files,
// much faster than running it (about 2s per instance).
func preparePostfixDirs(base string, postfixUID, postdropGID int) error {
	// t.TempDir() and its parent are 0700; the postfix user must traverse
	// them to reach data_directory and unix sockets given by absolute path.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			return fmt.Errorf("chmod %s: %w", d, err)
		}
	}
	type dir struct {
		path     string
		mode     os.FileMode
		uid, gid int
	}
	queue := filepath.Join(base, "queue")
	dirs := []dir{
		{filepath.Join(base, "conf"), 0o755, 0, 0},
		{queue, 0o755, 0, 0},
		{filepath.Join(queue, "pid"), 0o755, 0, 0},
		{filepath.Join(base, "data"), 0o700, postfixUID, 0},
		{filepath.Join(queue, "maildrop"), 0o730, postfixUID, postdropGID},
		{filepath.Join(queue, "public"), 0o710, postfixUID, postdropGID},
	}
	for _, name := range []string{"active", "bounce", "corrupt", "defer", "deferred", "flush", "hold", "incoming", "private", "saved", "trace"} {
		dirs = append(dirs, dir{filepath.Join(queue, name), 0o700, postfixUID, 0})
	}
	for _, d := range dirs {
		if err := os.Mkdir(d.path, d.mode); err != nil {
			return fmt.Errorf("mkdir %s: %w", d.path, err)
		}
		// Mkdir applies the umask; Chmod sets the exact mode.
		if err := os.Chmod(d.path, d.mode); err != nil {
			return fmt.Errorf("chmod %s: %w", d.path, err)
		}
		if err := os.Chown(d.path, d.uid, d.gid); err != nil {
			return fmt.Errorf("chown %s: %w", d.path, err)
		}
	}
	return nil
}

// writeConfig renders main.cf and master.cf for the current port.
func (p *Postfix) writeConfig(opts PostfixOptions) error {
	domain := opts.Domain
	if domain == "" {
		domain = "example.test"
	}
	transport := opts.Transport
	if transport == "" {
		transport = "lmtp:inet:" + p.sink.Addr()
	}
	milters := ""
	if opts.MilterAddr != "" {
		milters = "inet:" + opts.MilterAddr
	}
	action := opts.MilterDefaultAction
	if action == "" {
		action = "tempfail"
	}
	main := map[string]string{
		"compatibility_level":   "3.6",
		"queue_directory":       p.queueDir,
		"data_directory":        filepath.Join(p.base, "data"),
		"maillog_file":          p.logPath,
		"maillog_file_prefixes": p.base,
		"mail_owner":            "postfix",
		"setgid_group":          "postdrop",
		"myhostname":            "mx." + domain,
		"mydomain":              domain,
		"myorigin":              domain,
		"mydestination":         domain + ", localhost",
		"inet_interfaces":       "loopback-only",
		"inet_protocols":        "ipv4",
		"mynetworks":            "127.0.0.0/8",
		// Nothing from /etc: no aliases, no local user lookups, no DNS.
		"alias_maps":             "",
		"alias_database":         "",
		"local_recipient_maps":   "",
		"smtpd_peername_lookup":  "no",
		"smtp_dns_support_level": "disabled",
		"lmtp_host_lookup":       "native",
		"biff":                   "no",
		"append_dot_mydomain":    "no",
		"local_transport":        transport,
		"default_transport":      transport,
		"relay_transport":        transport,
		// Fast feedback: no error sleeps, no inflow throttling, quick retries
		// of deferred mail.
		"smtpd_error_sleep_time": "0",
		"in_flow_delay":          "0",
		"queue_run_delay":        "1s",
		"minimal_backoff_time":   "1s",
		"maximal_backoff_time":   "5s",
		"smtpd_milters":          milters,
		"non_smtpd_milters":      "",
		"milter_protocol":        "6",
		"milter_default_action":  action,
		// Shorter than Postfix's 30s/30s/300s so a hung milter fails a test
		// quickly; still far above what a healthy milter needs.
		"milter_connect_timeout": "5s",
		"milter_command_timeout": "10s",
		"milter_content_timeout": "30s",
	}
	for k, v := range opts.Main {
		main[k] = v
	}
	keys := make([]string, 0, len(main))
	for k := range main {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var mb strings.Builder
	mb.WriteString("# Generated by internal/testenv.\n")
	for _, k := range keys {
		fmt.Fprintf(&mb, "%s = %s\n", k, main[k])
	}

	var cb strings.Builder
	chroot := "n"
	if opts.Chroot {
		chroot = "y"
	}
	cb.WriteString("# Generated by internal/testenv. Only smtpd may be chrooted (Chroot); paths are absolute temp dirs.\n")
	fmt.Fprintf(&cb, "127.0.0.1:%d inet n - %s - - smtpd\n", p.port, chroot)
	cb.WriteString(postfixMasterCF)
	for _, l := range opts.MasterCF {
		cb.WriteString(l + "\n")
	}
	if err := os.WriteFile(filepath.Join(p.confDir, "main.cf"), []byte(mb.String()), 0o644); err != nil {
		return fmt.Errorf("write main.cf: %w", err)
	}
	if err := os.WriteFile(filepath.Join(p.confDir, "master.cf"), []byte(cb.String()), 0o644); err != nil {
		return fmt.Errorf("write master.cf: %w", err)
	}
	// Every Postfix program re-reads main.cf in 300ms steps until its mtime
	// is 2s old (dict_load_file_xt: "pausing to let main.cf settle"), which
	// made each start take ~2s. Backdate the files instead.
	old := time.Now().Add(-time.Minute)
	for _, f := range []string{"main.cf", "master.cf"} {
		if err := os.Chtimes(filepath.Join(p.confDir, f), old, old); err != nil {
			return fmt.Errorf("backdate %s: %w", f, err)
		}
	}
	return nil
}

// postfixMasterCF is Debian's master.cf minus the smtp inet listener, the
// pipe transports and chroot.
const postfixMasterCF = `pickup     unix  n - n 60    1 pickup
cleanup    unix  n - n -     0 cleanup
qmgr       unix  n - n 300   1 qmgr
tlsmgr     unix  - - n 1000? 1 tlsmgr
rewrite    unix  - - n -     - trivial-rewrite
bounce     unix  - - n -     0 bounce
defer      unix  - - n -     0 bounce
trace      unix  - - n -     0 bounce
verify     unix  - - n -     1 verify
flush      unix  n - n 1000? 0 flush
proxymap   unix  - - n -     - proxymap
proxywrite unix  - - n -     1 proxymap
smtp       unix  - - n -     - smtp
relay      unix  - - n -     - smtp
showq      unix  n - n -     - showq
error      unix  - - n -     - error
retry      unix  - - n -     - error
discard    unix  - - n -     - discard
local      unix  - n n -     - local
virtual    unix  - n n -     - virtual
lmtp       unix  - - n -     - lmtp
anvil      unix  - - n -     1 anvil
scache     unix  - - n -     1 scache
postlog    unix-dgram n - n - 1 postlogd
`

// start runs master in the foreground and waits for the SMTP banner.
func (p *Postfix) start(master string) error {
	outPath := filepath.Join(p.base, "master.out")
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", outPath, err)
	}
	defer out.Close()
	// -d keeps master in the foreground as our child, so Pdeathsig and
	// Wait work and no pid-file dance is needed.
	cmd := exec.Command(master, "-c", p.confDir, "-d")
	cmd.Dir = p.queueDir
	cmd.Stdout, cmd.Stderr = out, out
	proc, err := startProcess(cmd)
	if err != nil {
		return err
	}
	if err := p.waitBanner(proc); err != nil {
		proc.stop(5 * time.Second)
		return fmt.Errorf("%w\n--- master output ---\n%s\n--- maillog ---\n%s", err, readTail(outPath, 4000), readTail(p.logPath, 8000))
	}
	p.proc = proc
	return nil
}

// waitBanner connects until smtpd greets with 220 or master exits.
func (p *Postfix) waitBanner(proc *process) error {
	deadline := time.Now().Add(postfixStartTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		if proc.exited() {
			return fmt.Errorf("postfix master exited during start-up: %v", proc.err)
		}
		lastErr = probeSMTP(p.SMTPAddr())
		if lastErr == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("no SMTP banner on %s within %v: %v", p.SMTPAddr(), postfixStartTimeout, lastErr)
}

func probeSMTP(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read banner: %w", err)
	}
	if !strings.HasPrefix(line, "220") {
		return fmt.Errorf("banner %q", strings.TrimSpace(line))
	}
	_, _ = c.Write([]byte("QUIT\r\n"))
	return nil
}

// SMTPAddr returns the smtpd listener, "127.0.0.1:PORT".
func (p *Postfix) SMTPAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// Sink returns the sink receiving all mail, or nil if Transport was set.
func (p *Postfix) Sink() *Sink { return p.sink }

// ConfigDir returns the directory holding main.cf and master.cf, for
// `postconf -c` or `postqueue -c`.
func (p *Postfix) ConfigDir() string { return p.confDir }

// QueueDir returns queue_directory.
func (p *Postfix) QueueDir() string { return p.queueDir }

// Send submits one message over SMTP to smtpd (EHLO client.example.test)
// and returns the first error; SMTP replies come back as *textproto.Error,
// so callers can check the code (e.g. 451 from milter_default_action).
func (p *Postfix) Send(from string, to []string, msg []byte) error {
	return sendSMTP(p.SMTPAddr(), from, to, msg)
}

// sendSMTP submits one message over SMTP to addr (EHLO
// client.example.test) and returns the first error.
func sendSMTP(addr, from string, to []string, msg []byte) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	// Generous: covers a milter's content timeout with margin.
	_ = conn.SetDeadline(time.Now().Add(2 * time.Minute))
	c, err := smtp.NewClient(conn, "127.0.0.1")
	if err != nil {
		conn.Close()
		return fmt.Errorf("smtp greeting from %s: %w", addr, err)
	}
	defer c.Close()
	if err := c.Hello("client.example.test"); err != nil {
		return fmt.Errorf("smtp EHLO: %w", err)
	}
	if err := c.Mail(from); err != nil {
		return fmt.Errorf("smtp MAIL FROM:<%s>: %w", from, err)
	}
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt); err != nil {
			return fmt.Errorf("smtp RCPT TO:<%s>: %w", rcpt, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("smtp write message: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp end of data: %w", err)
	}
	return c.Quit()
}

// Log returns the Postfix log (maillog_file). postlogd writes it
// asynchronously, so the newest lines may lag; see WaitLog.
func (p *Postfix) Log() string { return readTail(p.logPath, 4<<20) }

// WaitLog waits until the log contains substr and returns the log; on
// timeout it returns the log and an error.
func (p *Postfix) WaitLog(substr string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		l := p.Log()
		if strings.Contains(l, substr) {
			return l, nil
		}
		if time.Now().After(deadline) {
			return l, fmt.Errorf("postfix log has no %q after %v", substr, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Submit hands one message to Postfix's sendmail(1) as a local user would:
// postdrop, pickup and cleanup, so non_smtpd_milters applies, not
// smtpd_milters.
func (p *Postfix) Submit(from string, to []string, msg []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "postconf", "-c", p.confDir, "-h", "sendmail_path").Output()
	if err != nil {
		return fmt.Errorf("postconf sendmail_path: %w", err)
	}
	cmd := exec.CommandContext(ctx, strings.TrimSpace(string(out)), append([]string{"-C", p.confDir, "-f", from, "--"}, to...)...)
	cmd.Stdin = strings.NewReader(string(msg))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sendmail -C %s: %w: %s", p.confDir, err, out)
	}
	return nil
}

// Flush asks Postfix to retry deferred mail now (postqueue -f).
func (p *Postfix) Flush() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, p.postqueue, "-c", p.confDir, "-f").CombinedOutput()
	if err != nil {
		return fmt.Errorf("postqueue -c %s -f: %w: %s", p.confDir, err, out)
	}
	return nil
}

// QueueLen returns how many messages sit in the queue (maildrop, incoming,
// active, deferred, hold). A queue file is named by its queue id and moves
// between these directories by rename while the walk runs (qmgr moves a
// deferred message from active/ to deferred/ after the delivery agent has
// logged status=deferred), so the walk counts distinct ids: a file seen in
// two directories is one message.
func (p *Postfix) QueueLen() (int, error) {
	ids := make(map[string]bool)
	for _, q := range postfixQueues {
		err := filepath.WalkDir(filepath.Join(p.queueDir, q), func(_ string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				ids[d.Name()] = true
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("count queue %s: %w", q, err)
		}
	}
	return len(ids), nil
}

// WaitQueueEmpty waits until the queue is empty, i.e. every accepted
// message was delivered or bounced. One walk can miss a file renamed back
// into a directory already walked (deferred/ to active/ on a queue run), so
// the queue counts as empty only when two walks in a row find nothing. On
// timeout the error carries the queue listing (postqueue -p) and the tail
// of the log.
func (p *Postfix) WaitQueueEmpty(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	empty := 0
	for {
		n, err := p.QueueLen()
		if err == nil && n == 0 {
			if empty++; empty == 2 {
				return nil
			}
		} else {
			empty = 0
		}
		if empty == 0 && time.Now().After(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			listing, _ := exec.CommandContext(ctx, p.postqueue, "-c", p.confDir, "-p").CombinedOutput()
			return fmt.Errorf("postfix queue not empty after %v (%d files, err %v):\n%s\n--- maillog tail ---\n%s",
				timeout, n, err, listing, readTail(p.logPath, 4000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Running reports whether master is still running.
func (p *Postfix) Running() bool { return p.proc != nil && !p.proc.exited() }

// Stop terminates master with SIGTERM (master stops its daemons) and waits,
// SIGKILLing the process group after 10s. It runs in t.Cleanup; calling it
// earlier is fine.
func (p *Postfix) Stop() {
	if p.proc != nil && !p.proc.stop(10*time.Second) {
		p.t.Logf("testenv: postfix master ignored SIGTERM for 10s and was killed")
	}
}
