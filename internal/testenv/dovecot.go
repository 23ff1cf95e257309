package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
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

// DovecotOptions configures StartDovecot. The zero value is a Dovecot with
// three users (DefaultDovecotUsers, password DovecotPassword), maildirs under
// the test's temp dir, LMTP and IMAP on free loopback ports, the Sieve plugin
// loaded for LMTP (recipient_delimiter "+") and no scripts.
type DovecotOptions struct {
	// Users are the mail users, as full addresses; LMTP recipients and IMAP
	// logins use these names. Empty means DefaultDovecotUsers.
	Users []string
	// Password is every user's password; empty means DovecotPassword.
	Password string
	// SieveBefore is a Sieve script run for every LMTP delivery before the
	// user's own script (sieve_before). Empty means none.
	SieveBefore string
	// UserSieve maps a user to the text of that user's active Sieve script.
	UserSieve map[string]string
	// UserFields maps a user to userdb fields ("sieve_env_bulk_level=5"),
	// which override plugin settings for that user.
	UserFields map[string][]string
	// SaveToDetailMailbox sets lmtp_save_to_detail_mailbox = yes: mail for
	// user+Detail@domain goes to the mailbox Detail (created on demand).
	SaveToDetailMailbox bool
	// DisableSieve leaves the Sieve plugin out of LMTP entirely.
	DisableSieve bool
	// IMAPSieve loads imap_sieve for IMAP and sieve_imapsieve (and
	// sieve_extprograms, for vnd.dovecot.pipe) for Sieve; the rules come
	// from Plugin, e.g. imapsieve_mailbox1_name = Junk.
	IMAPSieve bool
	// Plugin holds extra settings of the plugin {} section. In every value,
	// "{{files}}" stands for FilesDir().
	Plugin map[string]string
	// Files are written into FilesDir() before Dovecot starts, readable by
	// the mail user (name → content); a name ending in ".sh" is made
	// executable. Use them for imapsieve scripts and pipe programs.
	Files map[string]string
	// Config is appended to dovecot.conf as is ("{{files}}" replaced).
	Config string
}

// DefaultDovecotUsers are the users of a Dovecot started without Users.
var DefaultDovecotUsers = []string{"alice@example.test", "bob@example.test", "carol@example.test"}

// DovecotPassword is the users' password unless DovecotOptions.Password is
// set. IMAP allows plaintext logins: everything is on loopback.
const DovecotPassword = "testenv-secret"

// Dovecot is a real Dovecot (master in the foreground, LMTP, IMAP, Sieve)
// with its own configuration, base_dir, state and mail directories, owned
// by one test.
type Dovecot struct {
	t         testing.TB
	opts      DovecotOptions
	dir       string // config, users, logs, files, mail
	baseDir   string // sockets: short path, unix sockets are limited to 108 bytes
	lmtpPort  int
	imapPort  int
	proc      *process
	bin       string
	doveadm   string
	mailUID   int
	mailGID   int
	usersList []string
}

// dovecotStartTimeout bounds the wait for the LMTP and IMAP greetings.
const dovecotStartTimeout = 20 * time.Second

// dovecotMailUser owns every mailbox: a system user that exists on every
// Debian system. Dovecot refuses uids below first_valid_uid, which the
// configuration lowers to 1.
const dovecotMailUser = "mail"

// StartDovecot writes dovecot.conf, a passwd-file with the users and their
// Sieve scripts into fresh directories, starts `dovecot -F -c FILE`, waits
// until LMTP and IMAP greet, and stops Dovecot in t.Cleanup. It needs root
// (the master switches to the mail and dovecot users itself). Without
// dovecot (and its lmtp, imap and sieve parts) the test fails under CI=true
// and is skipped otherwise.
func StartDovecot(t testing.TB, opts DovecotOptions) *Dovecot {
	t.Helper()
	bin := Program(t, "dovecot")
	doveadm := Program(t, "doveadm")
	for _, p := range []string{"/usr/lib/dovecot/lmtp", "/usr/lib/dovecot/imap", "/usr/lib/dovecot/modules/lib90_sieve_plugin.so"} {
		if _, err := os.Stat(p); err != nil {
			unavailable(t, "%s missing (dovecot-lmtpd, dovecot-imapd, dovecot-sieve)", p)
		}
	}
	RequireRoot(t, "the Dovecot harness")
	mu, err := user.Lookup(dovecotMailUser)
	if err != nil {
		unavailable(t, "user %s missing: %v", dovecotMailUser, err)
	}
	d := &Dovecot{t: t, opts: opts, dir: t.TempDir(), bin: bin, doveadm: doveadm}
	d.mailUID, _ = strconv.Atoi(mu.Uid)
	d.mailGID, _ = strconv.Atoi(mu.Gid)
	d.usersList = opts.Users
	if len(d.usersList) == 0 {
		d.usersList = DefaultDovecotUsers
	}
	if d.opts.Password == "" {
		d.opts.Password = DovecotPassword
	}
	d.baseDir, err = os.MkdirTemp("", "dovecot")
	if err != nil {
		t.Fatalf("testenv: dovecot: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d.baseDir) })
	if err := d.prepare(); err != nil {
		t.Fatalf("testenv: dovecot: %v", err)
	}

	startOnFreePort(t, "dovecot", func() error {
		if d.lmtpPort, err = freePort(t); err == nil {
			d.imapPort, err = freePort(t)
		}
		if err != nil {
			t.Fatalf("testenv: dovecot: %v", err)
		}
		if err := d.writeConfig(); err != nil {
			t.Fatalf("testenv: dovecot: %v", err)
		}
		return d.start(bin)
	})
	t.Cleanup(d.Stop)
	return d
}

// prepare creates the directories and files Dovecot reads, with owners
// that let the mail user read scripts and write maildirs.
func (d *Dovecot) prepare() error {
	// t.TempDir() and its parent are 0700; the mail user must traverse them.
	for _, p := range []string{filepath.Dir(d.dir), d.dir, d.baseDir} {
		if err := os.Chmod(p, 0o755); err != nil {
			return fmt.Errorf("chmod %s: %w", p, err)
		}
	}
	for _, sub := range []string{"state", "mail", "files", "sieve"} {
		p := filepath.Join(d.dir, sub)
		if err := os.Mkdir(p, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", p, err)
		}
		if sub != "state" {
			// Sieve compiles scripts next to them, as the mail user.
			if err := os.Chown(p, d.mailUID, d.mailGID); err != nil {
				return fmt.Errorf("chown %s: %w", p, err)
			}
		}
	}
	write := func(path, content string, mode os.FileMode) error {
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		if err := os.Chmod(path, mode); err != nil {
			return err
		}
		return os.Chown(path, d.mailUID, d.mailGID)
	}
	for name, content := range d.opts.Files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if strings.ContainsAny(name, "/\\") {
			return fmt.Errorf("file name %q: no directories allowed", name)
		}
		if err := write(filepath.Join(d.FilesDir(), name), d.expand(content), mode); err != nil {
			return err
		}
	}
	if d.opts.SieveBefore != "" {
		if err := write(filepath.Join(d.dir, "sieve", "before.sieve"), d.opts.SieveBefore, 0o644); err != nil {
			return err
		}
	}

	known := map[string]bool{}
	var users strings.Builder
	for _, u := range d.usersList {
		if !strings.Contains(u, "@") || strings.ContainsAny(u, ": \t\n+") {
			return fmt.Errorf("user %q: use a plain address such as alice@example.test", u)
		}
		known[u] = true
		home := d.home(u)
		if err := os.MkdirAll(home, 0o700); err != nil {
			return err
		}
		if err := os.Chown(home, d.mailUID, d.mailGID); err != nil {
			return err
		}
		// passwd-file: user:password:uid:gid:gecos:home:shell:extra
		var extra []string
		for _, f := range d.opts.UserFields[u] {
			extra = append(extra, "userdb_"+f)
		}
		fmt.Fprintf(&users, "%s:{PLAIN}%s:%d:%d::%s::%s\n", u, d.opts.Password, d.mailUID, d.mailGID, home, strings.Join(extra, " "))
	}
	for u, script := range d.opts.UserSieve {
		if !known[u] {
			return fmt.Errorf("UserSieve for unknown user %q", u)
		}
		if err := os.Mkdir(filepath.Join(d.home(u), "sieve"), 0o700); err != nil {
			return err
		}
		if err := os.Chown(filepath.Join(d.home(u), "sieve"), d.mailUID, d.mailGID); err != nil {
			return err
		}
		if err := write(filepath.Join(d.home(u), "sieve", "main.sieve"), script, 0o600); err != nil {
			return err
		}
		if err := os.Symlink("sieve/main.sieve", filepath.Join(d.home(u), ".dovecot.sieve")); err != nil {
			return err
		}
		if err := os.Lchown(filepath.Join(d.home(u), ".dovecot.sieve"), d.mailUID, d.mailGID); err != nil {
			return err
		}
	}
	// The auth process reads it as the dovecot user; test passwords are no
	// secret, but keep them from everyone else anyway.
	usersFile := filepath.Join(d.dir, "users")
	if err := os.WriteFile(usersFile, []byte(users.String()), 0o640); err != nil {
		return fmt.Errorf("write users: %w", err)
	}
	mode := os.FileMode(0o644)
	if g, err := user.LookupGroup("dovecot"); err == nil {
		gid, _ := strconv.Atoi(g.Gid)
		if err := os.Chown(usersFile, 0, gid); err == nil {
			mode = 0o640
		}
	}
	return os.Chmod(usersFile, mode)
}

func (d *Dovecot) home(u string) string { return filepath.Join(d.dir, "mail", u) }

func (d *Dovecot) expand(s string) string { return strings.ReplaceAll(s, "{{files}}", d.FilesDir()) }

// writeConfig renders dovecot.conf for the current ports.
func (d *Dovecot) writeConfig() error {
	var b strings.Builder
	set := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, v) }
	b.WriteString("# Generated by internal/testenv. Nothing from /etc/dovecot.\n")
	set("base_dir", d.baseDir)
	set("state_dir", filepath.Join(d.dir, "state"))
	set("instance_name", "testenv-"+filepath.Base(d.baseDir))
	set("log_path", d.logPath())
	set("protocols", "lmtp imap")
	set("listen", "127.0.0.1")
	set("ssl", "no")
	set("disable_plaintext_auth", "no")
	set("auth_mechanisms", "plain login")
	set("first_valid_uid", "1")
	set("first_valid_gid", "1")
	set("mail_location", "maildir:~/Maildir")
	set("recipient_delimiter", "+")
	// Sieve's fileinto and the detail mailbox create what is missing.
	set("lda_mailbox_autocreate", "yes")
	set("lda_mailbox_autosubscribe", "yes")
	set("lmtp_save_to_detail_mailbox", yesNo(d.opts.SaveToDetailMailbox))
	set("postmaster_address", "postmaster@example.test")
	set("hostname", "dovecot.testenv.invalid")
	users := filepath.Join(d.dir, "users")
	fmt.Fprintf(&b, "passdb {\n  driver = passwd-file\n  args = %s\n}\n", users)
	fmt.Fprintf(&b, "userdb {\n  driver = passwd-file\n  args = %s\n}\n", users)
	fmt.Fprintf(&b, "service lmtp {\n  inet_listener lmtp {\n    address = 127.0.0.1\n    port = %d\n  }\n}\n", d.lmtpPort)
	fmt.Fprintf(&b, "service imap-login {\n  inet_listener imap {\n    address = 127.0.0.1\n    port = %d\n  }\n  inet_listener imaps {\n    port = 0\n  }\n}\n", d.imapPort)
	// No stats or anvil surprises from the system: everything under base_dir.
	if !d.opts.DisableSieve {
		b.WriteString("protocol lmtp {\n  mail_plugins = $mail_plugins sieve\n}\n")
	}
	if d.opts.IMAPSieve {
		b.WriteString("protocol imap {\n  mail_plugins = $mail_plugins imap_sieve\n}\n")
	}
	plugin := map[string]string{}
	if !d.opts.DisableSieve || d.opts.IMAPSieve {
		plugin["sieve"] = "file:~/sieve;active=~/.dovecot.sieve"
	}
	if d.opts.SieveBefore != "" {
		plugin["sieve_before"] = filepath.Join(d.dir, "sieve", "before.sieve")
	}
	if d.opts.IMAPSieve {
		plugin["sieve_plugins"] = "sieve_imapsieve sieve_extprograms"
	}
	for k, v := range d.opts.Plugin {
		plugin[k] = d.expand(v)
	}
	if len(plugin) > 0 {
		keys := make([]string, 0, len(plugin))
		for k := range plugin {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("plugin {\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s = %s\n", k, plugin[k])
		}
		b.WriteString("}\n")
	}
	if d.opts.Config != "" {
		b.WriteString(d.expand(d.opts.Config) + "\n")
	}
	return os.WriteFile(d.ConfigFile(), []byte(b.String()), 0o644)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func (d *Dovecot) logPath() string { return filepath.Join(d.dir, "dovecot.log") }

// start runs the master in the foreground and waits for both greetings.
func (d *Dovecot) start(bin string) error {
	outPath := filepath.Join(d.dir, "dovecot.out")
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(bin, "-F", "-c", d.ConfigFile())
	cmd.Dir = d.dir
	cmd.Stdout, cmd.Stderr = out, out
	proc, err := startProcess(cmd)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(dovecotStartTimeout)
	var lastErr error
	for _, probe := range []struct{ addr, banner string }{{d.LMTPAddr(), "220 "}, {d.IMAPAddr(), "* OK"}} {
		for {
			if proc.exited() {
				lastErr = fmt.Errorf("dovecot exited during start-up: %v", proc.err)
				break
			}
			if lastErr = probeBanner(probe.addr, probe.banner); lastErr == nil {
				break
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if lastErr != nil {
			break
		}
	}
	if lastErr != nil {
		proc.stop(5 * time.Second)
		return fmt.Errorf("%w\n--- dovecot output ---\n%s\n--- dovecot log ---\n%s", lastErr, readTail(outPath, 4000), readTail(d.logPath(), 8000))
	}
	d.proc = proc
	return nil
}

// probeBanner connects to addr and checks the first line starts with want.
func probeBanner(addr, want string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read banner from %s: %w", addr, err)
	}
	if !strings.HasPrefix(line, want) {
		return fmt.Errorf("banner %q from %s", strings.TrimSpace(line), addr)
	}
	if want == "220 " {
		_, _ = c.Write([]byte("QUIT\r\n"))
	} else {
		_, _ = c.Write([]byte("a LOGOUT\r\n"))
	}
	return nil
}

// LMTPAddr returns the LMTP listener, "127.0.0.1:PORT"; hand it to Postfix
// as PostfixOptions.Transport "lmtp:inet:" + LMTPAddr().
func (d *Dovecot) LMTPAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(d.lmtpPort)) }

// IMAPAddr returns the plaintext IMAP listener, "127.0.0.1:PORT".
func (d *Dovecot) IMAPAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(d.imapPort)) }

// Users returns the mail users.
func (d *Dovecot) Users() []string { return append([]string(nil), d.usersList...) }

// Password returns the users' password.
func (d *Dovecot) Password() string { return d.opts.Password }

// ConfigFile returns the path of dovecot.conf.
func (d *Dovecot) ConfigFile() string { return filepath.Join(d.dir, "dovecot.conf") }

// FilesDir returns the directory holding DovecotOptions.Files.
func (d *Dovecot) FilesDir() string { return filepath.Join(d.dir, "files") }

// Maildir returns a user's maildir (Maildir++ layout: INBOX at the top,
// folder F in .F).
func (d *Dovecot) Maildir(u string) string { return filepath.Join(d.home(u), "Maildir") }

// Log returns Dovecot's log.
func (d *Dovecot) Log() string { return readTail(d.logPath(), 4<<20) }

// Folders returns a user's mailboxes, INBOX first, then the others sorted;
// a user who got no mail yet has none.
func (d *Dovecot) Folders(u string) ([]string, error) {
	root := d.Maildir(u)
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), ".") && e.Name() != "." && e.Name() != ".." {
			out = append(out, e.Name()[1:])
		}
	}
	sort.Strings(out)
	return append([]string{"INBOX"}, out...), nil
}

// MaildirMessage is one message file in a maildir.
type MaildirMessage struct {
	Folder string
	Path   string
	Data   []byte
	Flags  string // maildir info flags after ":2,", e.g. "S" for seen
}

// Messages returns the messages of a user's folder ("INBOX", "Bulk", ...)
// in delivery order (maildir file names start with the delivery time);
// a folder that does not exist has none.
//
// Dovecot renames a message's file while the listing runs: from new/ to
// cur/ when a session first sees it, and within cur/ when its flags (the
// ":2,..." suffix) change. The name before ":" is the message's own and
// never changes, so the listing keeps one file for each such name (a file
// moved from new/ to cur/ between the two walks is one message), and a file
// renamed between its walk and its read is looked for in a fresh listing.
// A directory read is no snapshot either: a file renamed within cur/ while
// it is read can be missed by that read (POSIX leaves it unspecified; seen
// once in ~10⁵ listings here). So a listing counts only when the one after
// it lists the same messages: a file is then lost only if two reads in a
// row miss it.
func (d *Dovecot) Messages(u, folder string) ([]MaildirMessage, error) {
	dir := d.Maildir(u)
	if !strings.EqualFold(folder, "INBOX") {
		dir = filepath.Join(dir, "."+folder)
	}
	var prev []MaildirMessage
	settled := false
	for range 1000 {
		out, moved, err := readMaildir(dir, folder)
		if err != nil {
			return nil, err
		}
		if !moved && settled && sameMessages(prev, out) {
			return out, nil
		}
		prev, settled = out, !moved
	}
	return nil, fmt.Errorf("maildir %s: files kept moving during 1000 listings", dir)
}

// sameMessages reports whether a and b list the same messages (names
// before ":"), flags aside.
func sameMessages(a, b []MaildirMessage) bool {
	if len(a) != len(b) {
		return false
	}
	names := make(map[string]bool, len(a))
	for _, m := range a {
		base, _, _ := strings.Cut(filepath.Base(m.Path), ":")
		names[base] = true
	}
	for _, m := range b {
		base, _, _ := strings.Cut(filepath.Base(m.Path), ":")
		if !names[base] {
			return false
		}
	}
	return true
}

// readMaildir lists a maildir folder once; moved reports a file that was
// renamed or removed between the directory read and the file read.
func readMaildir(dir, folder string) (out []MaildirMessage, moved bool, err error) {
	seen := map[string]bool{}
	for _, sub := range []string{"new", "cur"} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		for _, e := range entries {
			base, _, _ := strings.Cut(e.Name(), ":")
			if e.IsDir() || seen[base] {
				continue
			}
			p := filepath.Join(dir, sub, e.Name())
			data, err := os.ReadFile(p)
			if errors.Is(err, os.ErrNotExist) {
				moved = true
				continue
			}
			if err != nil {
				return nil, false, err
			}
			seen[base] = true
			_, flags, _ := strings.Cut(e.Name(), ":2,")
			out = append(out, MaildirMessage{Folder: folder, Path: p, Data: data, Flags: flags})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return deliveredBefore(filepath.Base(out[i].Path), filepath.Base(out[j].Path))
	})
	return out, moved, nil
}

// deliveredBefore orders Dovecot maildir file names,
// "<seconds>.M<microseconds>P<pid>.<host>…": the microseconds are not
// zero-padded, so names do not sort as strings.
func deliveredBefore(a, b string) bool {
	as, au, aok := maildirTime(a)
	bs, bu, bok := maildirTime(b)
	if !aok || !bok {
		return a < b
	}
	if as != bs {
		return as < bs
	}
	if au != bu {
		return au < bu
	}
	return a < b
}

func maildirTime(name string) (sec, usec int64, ok bool) {
	secs, rest, found := strings.Cut(name, ".M")
	if !found {
		return 0, 0, false
	}
	us, _, found := strings.Cut(rest, "P")
	if !found {
		return 0, 0, false
	}
	s, err1 := strconv.ParseInt(secs, 10, 64)
	u, err2 := strconv.ParseInt(us, 10, 64)
	return s, u, err1 == nil && err2 == nil
}

// Count returns how many messages each of a user's folders holds.
func (d *Dovecot) Count(u string) (map[string]int, error) {
	folders, err := d.Folders(u)
	if err != nil {
		return nil, err
	}
	n := map[string]int{}
	for _, f := range folders {
		msgs, err := d.Messages(u, f)
		if err != nil {
			return nil, err
		}
		n[f] = len(msgs)
	}
	return n, nil
}

// WaitMessages waits until a user's folder holds at least n messages and
// returns them; on timeout it returns what is there and an error with the
// tail of Dovecot's log.
func (d *Dovecot) WaitMessages(u, folder string, n int, timeout time.Duration) ([]MaildirMessage, error) {
	deadline := time.Now().Add(timeout)
	for {
		msgs, err := d.Messages(u, folder)
		if err == nil && len(msgs) >= n {
			return msgs, nil
		}
		if time.Now().After(deadline) {
			return msgs, fmt.Errorf("%s/%s holds %d messages after %v, want %d (err %v)\n--- dovecot log ---\n%s",
				u, folder, len(msgs), timeout, n, err, readTail(d.logPath(), 4000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Doveadm runs doveadm against this instance, e.g. Doveadm("mailbox",
// "list", "-u", "alice@example.test"), and returns its output.
func (d *Dovecot) Doveadm(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, d.doveadm, append([]string{"-c", d.ConfigFile()}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("doveadm %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// LogTail returns the last max bytes of Dovecot's log, for a failing
// test to show.
func (d *Dovecot) LogTail(max int) string { return readTail(d.logPath(), max) }

// Running reports whether the master is still running.
func (d *Dovecot) Running() bool { return d.proc != nil && !d.proc.exited() }

// Stop terminates Dovecot (the master stops its services) and waits,
// killing the process group after 10s. It runs in t.Cleanup; calling it
// earlier is fine.
func (d *Dovecot) Stop() {
	if d.proc != nil && !d.proc.stop(10*time.Second) {
		d.t.Logf("testenv: dovecot ignored SIGTERM for 10s and was killed")
	}
}

// Restart starts Dovecot again after Stop, on the same ports, with the
// same configuration and mail: an outage and a recovery.
func (d *Dovecot) Restart() error {
	d.Stop()
	return d.start(d.bin)
}

// Deliver hands one message to Dovecot over LMTP (RFC 2033) and returns an
// error naming every recipient Dovecot refused; the others got the message.
func (d *Dovecot) Deliver(from string, to []string, msg []byte) error {
	conn, err := net.DialTimeout("tcp", d.LMTPAddr(), 5*time.Second)
	if err != nil {
		return fmt.Errorf("dial lmtp: %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(conn)
	reply := func() (string, error) {
		var last string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return "", err
			}
			last = strings.TrimRight(line, "\r\n")
			if len(last) < 4 || last[3] != '-' {
				return last, nil
			}
		}
	}
	expect := func(cmd, code string) error {
		if cmd != "" {
			if _, err := conn.Write([]byte(cmd + "\r\n")); err != nil {
				return err
			}
		}
		l, err := reply()
		if err != nil {
			return fmt.Errorf("lmtp %q: %w", cmd, err)
		}
		if !strings.HasPrefix(l, code) {
			return fmt.Errorf("lmtp %q: %s", cmd, l)
		}
		return nil
	}
	if err := expect("", "220"); err != nil {
		return err
	}
	if err := expect("LHLO testenv.invalid", "250"); err != nil {
		return err
	}
	if err := expect("MAIL FROM:<"+from+">", "250"); err != nil {
		return err
	}
	var accepted []string
	var errs []error
	for _, rc := range to {
		if err := expect("RCPT TO:<"+rc+">", "250"); err != nil {
			errs = append(errs, err)
			continue
		}
		accepted = append(accepted, rc)
	}
	if len(accepted) == 0 {
		_ = expect("QUIT", "221")
		return errors.Join(errs...)
	}
	if err := expect("DATA", "354"); err != nil {
		return err
	}
	if _, err := conn.Write(dotStuff(msg)); err != nil {
		return err
	}
	// LMTP answers once per accepted recipient.
	for _, rc := range accepted {
		if err := expect("", "250"); err != nil {
			errs = append(errs, fmt.Errorf("deliver to %s: %w", rc, err))
		}
	}
	_ = expect("QUIT", "221")
	return errors.Join(errs...)
}

// dotStuff turns msg into DATA content: CRLF line ends, leading dots
// doubled, the final "." line appended.
func dotStuff(msg []byte) []byte {
	var b strings.Builder
	text := strings.ReplaceAll(string(msg), "\r\n", "\n")
	text = strings.TrimSuffix(text, "\n")
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, ".") {
			b.WriteString(".")
		}
		b.WriteString(line + "\r\n")
	}
	b.WriteString(".\r\n")
	return []byte(b.String())
}
