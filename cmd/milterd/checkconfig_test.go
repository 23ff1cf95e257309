package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check-config reports every problem of a file in one run, and run refuses
// the same file with the same lines: config/testdata/ten-mistakes.yml holds
// ten different mistakes (config's TestTenMistakes checks the words).
func TestCheckConfigAndRunAgree(t *testing.T) {
	const file = "../../config/testdata/ten-mistakes.yml"
	problems := func(stderr string) []string {
		var out []string
		for _, l := range strings.Split(stderr, "\n") {
			if strings.HasPrefix(l, file+":") {
				out = append(out, l)
			}
		}
		return out
	}
	code, _, stderr := runMilterd(t, "check-config", "-config", file)
	checked := problems(stderr)
	if code == 0 || len(checked) != 10 || !strings.HasPrefix(stderr, "milterd check-config: 10 configuration problems:\n") {
		t.Fatalf("check-config: exit %d, %d problem lines, want non-zero and 10:\n%s", code, len(checked), stderr)
	}
	code, _, stderr = runMilterd(t, "run", "-config", file, "-listen", "inet:127.0.0.1:0", "-metrics-listen", "off")
	if got := problems(stderr); code == 0 || strings.Join(got, "\n") != strings.Join(checked, "\n") {
		t.Errorf("run: exit %d, want non-zero and the lines check-config printed:\n%s", code, stderr)
	}

	// The URL is checked with its line, not only when run opens the store.
	dir := t.TempDir()
	path := filepath.Join(dir, "redis.yml")
	if err := os.WriteFile(path, []byte("data_dir: "+dir+"\nstore:\n  redis:\n    url: http://localhost:6379\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runMilterd(t, "check-config", "-config", path)
	if want := path + `:4: store.redis.url: invalid Redis URL: unknown scheme "http"`; code == 0 || !strings.Contains(stderr, want) {
		t.Errorf("check-config: exit %d, stderr %q, want %q", code, stderr, want)
	}
}

// actions.except_senders without policy.authserv_id: check-config and run
// both refuse it, naming both settings; with it, check-config accepts.
func TestCheckConfigExceptSenders(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "senders.yml")
	write := func(yaml string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("data_dir: "+dir+"\n"+yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("actions:\n  except_senders: [partner.example]\n")
	want := path + ":3: actions.except_senders: needs policy.authserv_id"
	for _, args := range [][]string{{"check-config", "-config", path}, {"run", "-config", path, "-listen", "inet:127.0.0.1:0", "-metrics-listen", "off"}} {
		if code, _, stderr := runMilterd(t, args...); code == 0 || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, stderr %q, want non-zero and %q", args[0], code, stderr, want)
		}
	}
	write("policy:\n  authserv_id: mx.example.com\nactions:\n  except_senders: [partner.example, .corp.example]\n")
	if code, _, stderr := runMilterd(t, "check-config", "-config", path); code != 0 {
		t.Errorf("check-config with authserv_id: exit %d, stderr %q, want 0", code, stderr)
	}
}
