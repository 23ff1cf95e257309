package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// The start errors of the first hour's mistakes, as an admin reads them:
// each names the setting and what to do, and the daemon exits non-zero.
// Before, a busy port said "listen 127.0.0.1:N: listen tcp …: bind: address
// already in use" for either address, and a missing socket directory only
// "bind: no such file or directory".
func TestStartErrorsNameTheSetting(t *testing.T) {
	dir := t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	sock := filepath.Join(dir, "missing", "milter.sock")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"milter port in use", []string{"-listen", "inet:" + addr, "-metrics-listen", "off"},
			"milterd run: listen inet:" + addr + ": listen tcp " + addr + ": bind: address already in use (another process holds it, perhaps a milterd already running (ss -ltnp names it): stop it or set listen to a free port)\n"},
		{"metrics port in use", []string{"-listen", "inet:127.0.0.1:0", "-metrics-listen", addr},
			"milterd run: metrics_listen " + addr + ": listen tcp " + addr + ": bind: address already in use (another process holds it, perhaps a milterd already running (ss -ltnp names it): stop it or set metrics_listen to a free port)\n"},
		{"socket directory missing", []string{"-listen", "unix:" + sock, "-metrics-listen", "off"},
			"milterd run: listen unix:" + sock + ": listen unix " + sock + ": bind: no such file or directory (the socket's directory does not exist: create it for the daemon's user, or use /run/bulkmilter (the unit's RuntimeDirectory); with a chrooted Postfix see docs/operations.md \"The milter socket\")\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(dir, "c.yml")
			writeFile(t, cfg, "data_dir: "+dir+"\n")
			code, _, stderr := runMilterd(t, append([]string{"run", "-config", cfg}, tc.args...)...)
			if code != 1 || !strings.HasSuffix(stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and stderr ending in:\n%s", code, stderr, tc.want)
			}
		})
	}
}

// The start line says what runs (threshold, lexicon), and a Redis that is
// down at start is said at once, with what mail gets meanwhile; before, the
// daemon started silently and the first message's verdict told.
func TestStartLogSaysWhatRuns(t *testing.T) {
	down := testenv.FreeAddr(t) // nothing listens there
	dir := t.TempDir()
	cmd := exec.Command(milterdBinary(t), "run", "-listen", "inet:127.0.0.1:0", "-metrics-listen", "off",
		"-data-dir", dir, "-redis", "redis://"+down+"/0")
	var logs testenv.SyncBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("milterd exit: %v\n%s", err, logs.String())
		}
	}()
	const warn = `level=WARN msg="store not reachable: mail passes with the policy.on_store_error verdict and /readyz answers 503 until it answers" store=redis:` + "%s on_store_error=accept err="
	want := fmt.Sprintf(warn, down)
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(logs.String(), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no warning %q in 20s:\n%s", want, logs.String())
		}
	}
	if started := " store=redis:" + down + " threshold=10 adaptive=false lexicon=bundled signatures="; !strings.Contains(logs.String(), started) {
		t.Errorf("start line lacks %q:\n%s", started, logs.String())
	}
}

// A Redis that refuses the password stops the start with the settings to
// check; Redis's "WRONGPASS invalid username-password pair" named none.
func TestRedisWrongPasswordNamesTheSetting(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{Password: "right"})
	code, _, stderr := runMilterd(t, "run", "-listen", "inet:127.0.0.1:0", "-metrics-listen", "off",
		"-data-dir", t.TempDir(), "-redis", "redis://:wrong@"+r.Addr()+"/0")
	const hint = `(Redis refused the login: check the user and password in store.redis.url or store.redis.password_file, and the user's ACL: docs/operations.md "Redis")`
	if code != 1 || !strings.Contains(stderr, "WRONGPASS") || !strings.HasSuffix(stderr, hint+"\n") {
		t.Errorf("exit %d, stderr %q; want 1 and WRONGPASS with the hint %s", code, stderr, hint)
	}
}

var updateHelp = flag.Bool("update-help", false, "rewrite testdata/help.golden")

// Every command's -h, as an admin reads it, is a document: testdata/
// help.golden. Each exits 0 and names its flags with a placeholder. Before,
// "lexicon info -h" read a file named -h, "votes list -h" began "Usage of",
// and -listen's placeholder was "string".
func TestHelpGolden(t *testing.T) {
	var doc strings.Builder
	for _, args := range [][]string{
		{"-h"}, {"run", "-h"}, {"check-config", "-h"}, {"scan", "-h"}, {"explain", "-h"},
		{"votes", "-h"}, {"votes", "list", "-h"}, {"votes", "remove", "-h"},
		{"lexicon", "-h"}, {"lexicon", "info", "-h"},
	} {
		var stdout, stderr bytes.Buffer
		code := mainExit(args, &stdout, &stderr)
		fmt.Fprintf(&doc, "$ milterd %s\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
		if code != 0 {
			t.Errorf("milterd %s: exit %d, want 0", strings.Join(args, " "), code)
		}
	}
	const golden = "testdata/help.golden"
	if want := testenv.Golden(t, golden, []byte(doc.String()), *updateHelp); doc.String() != string(want) {
		t.Errorf("help differs from %s (go test -run TestHelpGolden -update-help rewrites it):\n%s", golden, doc.String())
	}
	if strings.Contains(doc.String(), " string\n") {
		t.Errorf("a flag without a placeholder (backquote one word of its usage):\n%s", doc.String())
	}
}

// check-config alone checks the built-in defaults: it says so and names
// the file an admin meant; two files are refused, not ignored.
func TestCheckConfigNamesNoFile(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := mainExit([]string{"check-config", "-data-dir", dir}, &stdout, &stderr); code != 0 ||
		stdout.String() != "built-in defaults: OK (no file named: milterd check-config /etc/bulkmilter/bulkmilter.yml checks the package's)\n" {
		t.Errorf("check-config alone: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	a := filepath.Join(dir, "a.yml")
	writeFile(t, a, "data_dir: "+dir+"\n")
	stdout.Reset()
	stderr.Reset()
	if code := mainExit([]string{"check-config", a, a}, &stdout, &stderr); code != 2 || stdout.Len() != 0 ||
		!strings.Contains(stderr.String(), "unexpected arguments") {
		t.Errorf("check-config with two files: exit %d, stdout %q, stderr %q; want 2 and no OK", code, stdout.String(), stderr.String())
	}
}

// Run as a user who may not write the state directory (the package's
// /var/lib/bulkmilter belongs to bulkmilter), run and check-config name the
// user and what to do; before, only "permission denied" on the file.
func TestPermissionDeniedSaysWhoRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to run milterd as nobody")
		}
		t.Skip("needs root to run milterd as nobody")
	}
	// Directories nobody may enter but not write, as root's 0755 state.
	binDir, err := os.MkdirTemp("", "milterd-nobody")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(binDir)
	bin := filepath.Join(binDir, "milterd")
	data, err := os.ReadFile(milterdBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(binDir, "state")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	const hint = "this runs as nobody, who may not use that file: run it as the file's owner (the package's state belongs to bulkmilter: sudo -u bulkmilter milterd …), or give nobody the data directory (chown -R nobody DIR)\n"
	asNobody := func(args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stderr.String()
	}
	key := filepath.Join(state, "secret.key")
	code, stderr := asNobody("run", "-data-dir", state, "-listen", "inet:127.0.0.1:0", "-metrics-listen", "off")
	if want := "milterd run: create secret key: open " + key + ": permission denied\nmilterd run: " + hint; code != 1 || stderr != want {
		t.Errorf("run: exit %d, stderr:\n%s\nwant 1 and:\n%s", code, stderr, want)
	}
	// A key nobody may not read, as check-config finds it.
	writeFile(t, key, strings.Repeat("ab", 32)+"\n")
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	code, stderr = asNobody("check-config", "-data-dir", state)
	if want := "milterd check-config: read secret key: open " + key + ": permission denied\nmilterd check-config: " + hint; code != 1 || stderr != want {
		t.Errorf("check-config: exit %d, stderr:\n%s\nwant 1 and:\n%s", code, stderr, want)
	}
}

// check-config says what run would fail on: a unix socket in a directory
// that does not exist (the Postfix chroot's, before it is made). Before, it
// said OK and run exited.
func TestCheckConfigSocketDir(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "spool", "bulkmilter")
	cfg := filepath.Join(dir, "c.yml")
	writeFile(t, cfg, "data_dir: "+dir+"\nlisten: unix:"+missing+"/milter.sock\n")
	code, stdout, stderr := runMilterd(t, "check-config", cfg)
	want := "milterd check-config: listen unix:" + missing + "/milter.sock: stat " + missing + ": no such file or directory (the socket's directory does not exist: create it for the daemon's user, or use /run/bulkmilter (the unit's RuntimeDirectory); with a chrooted Postfix see docs/operations.md \"The milter socket\")\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant 1 and:\n%s", code, stdout, stderr, want)
	}
	if err := os.MkdirAll(missing, 0o750); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := runMilterd(t, "check-config", cfg); code != 0 || !strings.HasSuffix(stdout, ": OK\n") {
		t.Errorf("with the directory: exit %d, stdout %q, stderr %q; want OK", code, stdout, stderr)
	}
}
