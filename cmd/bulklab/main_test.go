package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// The commands run as built binaries, the way the lab runs them: bulklab
// and milterd built into one directory (bulklab soak spawns the milterd
// beside it), with the race detector when this test binary has it, and a
// plain bulklab for the evaluation, a measurement ten times slower under
// -race.

type built struct {
	once sync.Once
	dir  string
	err  error
}

var raced, plain built

func (b *built) build(t testing.TB, race bool, pkgs ...string) string {
	t.Helper()
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "bulklab-bin"); b.err != nil {
			return
		}
		args := []string{"build", "-o", b.dir + "/"}
		if race {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, pkgs...)...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.dir
}

// binDir returns the directory holding bulklab and milterd.
func binDir(t testing.TB) string {
	return raced.build(t, testenv.RaceEnabled, ".", "../milterd")
}

// plainBinary returns a bulklab built without the race detector.
func plainBinary(t testing.TB) string {
	return filepath.Join(plain.build(t, false, "."), "bulklab")
}

func TestMain(m *testing.M) {
	// "bulklab bench" run by a test starts this test binary again to serve
	// a milter.
	if os.Getenv(benchMilterEnv) != "" {
		os.Exit(benchMilterMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	code := m.Run()
	for _, b := range []*built{&raced, &plain} {
		if b.dir != "" {
			os.RemoveAll(b.dir)
		}
	}
	os.Exit(code)
}

// runBulklab runs the binary and returns its exit code, stdout and stderr.
func runBulklab(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return testenv.Run(t, filepath.Join(binDir(t), "bulklab"), args...)
}
