package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// extraDirs are searched after PATH: Debian keeps redis-server in /usr/bin,
// postfix in /usr/sbin and the Postfix daemons (master, smtpd, ...) in
// /usr/lib/postfix/sbin, and CI users often lack the sbin dirs in PATH.
var extraDirs = []string{"/usr/sbin", "/usr/lib/postfix/sbin", "/usr/bin", "/sbin", "/bin"}

// installHint is repeated in every skip and failure so the fix is obvious.
const installHint = "install the test dependencies with scripts/install-test-deps.sh"

// InCI reports whether the environment variable CI is "true". Under CI a
// missing external program is a test failure instead of a skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Program returns the absolute path of the external program name, looked up
// in PATH and then in /usr/sbin, /usr/lib/postfix/sbin and /usr/bin. If it is
// not found the test fails under CI=true and is skipped otherwise.
func Program(t testing.TB, name string) string {
	t.Helper()
	if p, ok := lookProgram(name); ok {
		return p
	}
	unavailable(t, "program %q not found in PATH or %v", name, extraDirs)
	return ""
}

func lookProgram(name string) (string, bool) {
	if p, err := exec.LookPath(name); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs, true
		}
		return p, true
	}
	for _, dir := range extraDirs {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// unavailable ends the test because a prerequisite is missing: t.Fatalf under
// CI=true (a missing tool must never look like a pass there), t.Skipf with a
// loud message otherwise.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := "testenv: " + fmt.Sprintf(format, args...) + "; " + installHint
	if InCI() {
		t.Fatalf("%s (CI=true: missing prerequisites are failures)", msg)
	}
	t.Skipf("SKIPPED, NOT TESTED: %s", msg)
}

// RequireRoot ends the test (failure under CI=true, skip otherwise) unless
// the process runs as root. Postfix's master must start as root.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "%s needs root (euid is %d)", why, os.Geteuid())
	}
}

// Run runs the program at path and returns its exit code, stdout and
// stderr; a program that cannot be run fails the test.
func Run(t testing.TB, path string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}
