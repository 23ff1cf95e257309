//go:build linux

package deploy_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// packageFiles are where the package puts deploy/'s files, besides the
// examples: installed path → repository path.
var packageFiles = map[string]string{
	"/etc/bulkmilter/bulkmilter.yml":          "bulkmilter.yml",
	"/lib/systemd/system/bulkmilter.service":  "systemd/bulkmilter.service",
	"/usr/lib/sysusers.d/bulkmilter.conf":     "systemd/bulkmilter.sysusers",
	"/usr/lib/tmpfiles.d/bulkmilter.conf":     "systemd/bulkmilter.tmpfiles",
	"/usr/share/doc/bulkmilter/README.md":     "../README.md",
	"/usr/share/doc/bulkmilter/operations.md": "../docs/operations.md",
	"/usr/share/doc/bulkmilter/feedback.md":   "../docs/feedback.md",
	"/usr/share/doc/bulkmilter/metrics.md":    "../docs/metrics.md",
	"/usr/share/doc/bulkmilter/levels.md":     "../docs/levels.md",
	"/usr/share/doc/bulkmilter/refile.md":     "../docs/refile.md",
}

// machineState is what installing and purging the package may touch: the
// account databases' contents, and the name, mode, owner and link target
// of every path under the package's directories and the systemd state
// that deb-systemd-helper keeps.
func machineState(t *testing.T) map[string]string {
	t.Helper()
	state := map[string]string{}
	for _, f := range []string{"/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		state[f] = fmt.Sprintf("sha256 %x", sha256.Sum256(b))
	}
	roots := []string{
		"/etc/bulkmilter", "/etc/systemd/system", "/var/lib/bulkmilter", "/run/bulkmilter",
		"/var/lib/systemd/deb-systemd-helper-enabled", "/var/lib/systemd/deb-systemd-helper-masked",
		"/usr/share/doc/bulkmilter", "/usr/bin/milterd",
	}
	for f := range packageFiles {
		roots = append(roots, f)
	}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			fi, err := os.Lstat(path)
			if err != nil {
				return err
			}
			st := fi.Sys().(*syscall.Stat_t)
			v := fmt.Sprintf("%v %d:%d", fi.Mode(), st.Uid, st.Gid)
			if fi.Mode()&fs.ModeSymlink != 0 {
				target, _ := os.Readlink(path)
				v += " -> " + target
			}
			state[path] = v
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", root, err)
		}
	}
	return state
}

func diffState(before, after map[string]string) []string {
	var diffs []string
	for k, v := range after {
		if b, ok := before[k]; !ok {
			diffs = append(diffs, "left behind: "+k+" "+v)
		} else if b != v {
			diffs = append(diffs, fmt.Sprintf("changed: %s: %s, was %s", k, v, b))
		}
	}
	for k, v := range before {
		if _, ok := after[k]; !ok {
			diffs = append(diffs, "gone: "+k+" "+v)
		}
	}
	sort.Strings(diffs)
	return diffs
}

func command(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// lockMachine makes the test the only one on this machine that installs
// the package, until its cleanup (registered first, so it runs after the
// purge): the package, its user and /var/lib/bulkmilter are the machine's,
// and two runs of `go test ./deploy` at once (two engineers, or a
// developer beside CI) installed and purged each other's package and
// failed both. It waits for the holder; the test binary's -timeout bounds
// the wait.
func lockMachine(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "bulkmilter-test-debian.lock"), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		t.Logf("waiting for another test process that installs the package (%s)", f.Name())
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatalf("flock %s: %v", f.Name(), err)
		}
	}
	t.Cleanup(func() { f.Close() })
}

// dpkg runs dpkg as apt does: holding dpkg's frontend lock, waited for
// (an apt-get elsewhere on the machine holds it for minutes; dpkg alone
// fails at once), and telling dpkg so with DPKG_FRONTEND_LOCKED.
func dpkg(t *testing.T, args ...string) (string, error) {
	t.Helper()
	f, err := os.OpenFile("/var/lib/dpkg/lock-frontend", os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return "", err
	}
	defer f.Close() // drops the lock
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLKW, &syscall.Flock_t{Type: syscall.F_WRLCK}); err != nil {
		return "", fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	cmd := exec.Command("dpkg", args...)
	cmd.Env = append(os.Environ(), "DPKG_FRONTEND_LOCKED=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The Debian package, as an admin gets it: scripts/build-deb.sh builds it,
// dpkg -i installs it on this machine, the installed files are the
// repository's, the user exists and the unit is enabled; the installed
// binary checks the installed configuration and, started from it as the
// bulkmilter user (on free ports, state where systemd's StateDirectory
// puts it), answers a milter client with a verdict. dpkg --purge then
// leaves the machine as it was.
func TestDebianPackage(t *testing.T) {
	testenv.RequireRoot(t, "dpkg -i installs on this machine")
	testenv.Program(t, "dpkg")
	lockMachine(t)
	testenv.Program(t, "systemd-sysusers")
	testenv.Program(t, "deb-systemd-helper")
	if out, err := command(t, "dpkg-query", "-W", "-f=${Status}", "bulkmilter"); err == nil && strings.TrimSpace(out) != "" && !strings.Contains(out, "not-installed") {
		t.Fatalf("the package bulkmilter is on this machine (%s); the test installs and purges its own", out)
	}
	if _, err := user.Lookup("bulkmilter"); err == nil {
		t.Fatal("a user bulkmilter exists on this machine; the test would remove it")
	}
	for _, d := range []string{"/etc/bulkmilter", "/var/lib/bulkmilter"} {
		if _, err := os.Stat(d); err == nil {
			t.Fatalf("%s exists on this machine; the test would remove it", d)
		}
	}
	before := machineState(t)

	dist := t.TempDir()
	build := exec.Command("scripts/build-deb.sh")
	build.Dir = ".."
	build.Env = append(os.Environ(), "DIST="+dist, "VERSION=0.0~test1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build-deb.sh: %v\n%s", err, out)
	}
	deb := filepath.Join(dist, "bulkmilter_0.0~test1_"+goarch(t)+".deb")

	t.Cleanup(func() {
		if out, err := dpkg(t, "--purge", "bulkmilter"); err != nil {
			t.Errorf("dpkg --purge bulkmilter: %v\n%s", err, out)
		}
		if out, err := command(t, "dpkg-query", "-W", "-f=${Status}", "bulkmilter"); err == nil && !strings.Contains(out, "not-installed") {
			t.Errorf("after purge, dpkg-query says %q", out)
		}
		if diffs := diffState(before, machineState(t)); len(diffs) > 0 {
			t.Errorf("the machine is not as it was after dpkg --purge:\n%s", strings.Join(diffs, "\n"))
		}
	})
	if out, err := dpkg(t, "-i", deb); err != nil {
		t.Fatalf("dpkg -i: %v\n%s", err, out)
	}

	// The files, as the repository has them.
	for installed, repo := range packageFiles {
		checkSame(t, installed, repo)
	}
	for _, dir := range []string{"postfix", "sendmail", "dovecot", "prometheus", "grafana", "redis", "systemd"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			checkSame(t, filepath.Join("/usr/share/doc/bulkmilter/examples", dir, e.Name()), filepath.Join(dir, e.Name()))
		}
	}
	if out, _ := command(t, "dpkg-query", "-W", "-f=${Conffiles}", "bulkmilter"); !strings.Contains(out, "/etc/bulkmilter/bulkmilter.yml ") {
		t.Errorf("conffiles %q lack /etc/bulkmilter/bulkmilter.yml", out)
	}

	// The user, and what sysusers and tmpfiles made for it.
	u, err := user.Lookup("bulkmilter")
	if err != nil {
		t.Fatalf("no user bulkmilter after install: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 || uid >= 1000 || u.HomeDir != "/var/lib/bulkmilter" {
		t.Errorf("user bulkmilter: uid %d, home %s; want a system user with home /var/lib/bulkmilter", uid, u.HomeDir)
	}
	for path, want := range map[string]string{
		"/etc/bulkmilter":                fmt.Sprintf("drwxr-x--- 0:%d", gid),
		"/etc/bulkmilter/bulkmilter.yml": fmt.Sprintf("-rw-r----- 0:%d", gid),
		"/usr/bin/milterd":               "-rwxr-xr-x 0:0",
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Error(err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if got := fmt.Sprintf("%v %d:%d", fi.Mode(), st.Uid, st.Gid); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
	// Enabled as systemctl enable would (WantedBy=multi-user.target).
	if target, err := os.Readlink("/etc/systemd/system/multi-user.target.wants/bulkmilter.service"); err != nil || target != "/lib/systemd/system/bulkmilter.service" {
		t.Errorf("bulkmilter.service is not enabled after install: %q, %v", target, err)
	}
	if out, err := command(t, testenv.Program(t, "systemd-analyze"), "verify", "/lib/systemd/system/bulkmilter.service"); err != nil || strings.Contains(out, "bulkmilter.service") {
		t.Errorf("systemd-analyze verify of the installed unit: %v\n%s", err, out)
	}

	// The installed binary, as the unit runs it: check-config, then the
	// daemon.
	asUser := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, Pdeathsig: syscall.SIGKILL}
	check := exec.Command("/usr/bin/milterd", "check-config", "-config", "/etc/bulkmilter/bulkmilter.yml")
	check.SysProcAttr = asUser
	if out, err := check.CombinedOutput(); err != nil || !strings.Contains(string(out), "/etc/bulkmilter/bulkmilter.yml: OK") {
		t.Fatalf("installed check-config: %v\n%s", err, out)
	}
	// The package's version, not "(devel)": a build from a clone stamps
	// none (-buildvcs=false, or no tag), and bulkmilter_build_info shows it.
	if out, err := command(t, "/usr/bin/milterd", "version"); err != nil || strings.TrimSpace(out) != "milterd 0.0~test1" {
		t.Errorf("installed milterd version: %q, %v; want %q", out, err, "milterd 0.0~test1")
	}
	// systemd would create the StateDirectory and set $STATE_DIRECTORY.
	if err := os.Mkdir("/var/lib/bulkmilter", 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown("/var/lib/bulkmilter", uid, gid); err != nil {
		t.Fatal(err)
	}
	milterAddr, metricsAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	var logs testenv.SyncBuffer
	daemon := exec.Command("/usr/bin/milterd", "run", "-config", "/etc/bulkmilter/bulkmilter.yml", "-listen", "inet:"+milterAddr, "-metrics-listen", metricsAddr)
	daemon.Env = append(os.Environ(), "STATE_DIRECTORY=/var/lib/bulkmilter")
	daemon.SysProcAttr = asUser
	daemon.Stdout, daemon.Stderr = &logs, &logs
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = daemon.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = daemon.Process.Kill()
				<-exited
			}
		}
	}
	t.Cleanup(stop) // before the purge, which runs after it

	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + metricsAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the installed daemon is not ready after 30s: %v\n%s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	res, err := mtaclient.New("tcp", milterAddr).Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{"ann@example.test"}}, testMessage("pkg", "ann@example.test"))
	if err != nil {
		t.Fatalf("milter client: %v\n%s", err, logs.String())
	}
	if v, ok := res.Header("X-Bulk"); !ok || !strings.HasPrefix(v, "no; ") {
		t.Errorf("the installed daemon answered %v with X-Bulk %q, want a verdict", res.Action, v)
	}
	stop()
	fi, err := os.Stat("/var/lib/bulkmilter/secret.key")
	if err != nil {
		t.Fatalf("no secret key in the state directory: %v\n%s", err, logs.String())
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o600 || int(st.Uid) != uid {
		t.Errorf("secret.key: mode %v, owner %d; want 0600, bulkmilter", fi.Mode(), st.Uid)
	}
}

// checkSame fails unless the installed file holds the repository file.
func checkSame(t *testing.T, installed, repo string) {
	t.Helper()
	got, err := os.ReadFile(installed)
	if err != nil {
		t.Errorf("installed file: %v", err)
		return
	}
	want, err := os.ReadFile(repo)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from deploy/%s", installed, repo)
	}
}

func goarch(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOARCH").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
