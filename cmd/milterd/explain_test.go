package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/explain"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

var updateExplain = flag.Bool("update-explain", false, "rewrite testdata/explain/*.golden")

// explainFiles cover every normalisation explain names: hidden HTML text
// and comments (hidden.eml), zero-width characters, homoglyphs and
// leetspeak, spaced-out letters and digit runs (homoglyph.eml), the
// recipient's name (personal.eml, with -rcpt), and a declared newsletter
// whose forged Authentication-Results below the trusted one is ignored
// (declared.eml), and image spam signed only by its remote images, its
// words hidden in the title and an unclosed style (remote.eml).
var explainFiles = []string{
	"testdata/explain/declared.eml", "testdata/explain/hidden.eml",
	"testdata/explain/homoglyph.eml", "testdata/explain/personal.eml",
	"testdata/explain/remote.eml",
}

// explainSetup makes a data directory with a fixed secret (so that the
// keys in the golden files hold) and a store that counted 12 copies of
// hidden.eml and 3 of homoglyph.eml, through milterd scan.
func explainSetup(t *testing.T) (dir, cfg string) {
	dir = t.TempDir()
	sum := sha256.Sum256([]byte("bulkmilter explain golden"))
	if err := os.WriteFile(filepath.Join(dir, "secret.key"), []byte(hex.EncodeToString(sum[:])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg = writeConfig(t, "policy:\n  authserv_id: mx.example.test\n")
	copies := t.TempDir()
	for name, n := range map[string]int{"hidden.eml": 12, "homoglyph.eml": 3} {
		raw, err := os.ReadFile(filepath.Join("testdata/explain", name))
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := os.WriteFile(filepath.Join(copies, strings.TrimSuffix(name, ".eml")+string(rune('a'+i))), raw, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if code, out, errOut := runMilterd(t, "scan", "-q", "-config", cfg, "-data-dir", dir, "-time", "now", copies); code != 0 {
		t.Fatalf("scan: exit %d\n%s\n%s", code, out, errOut)
	}
	return dir, cfg
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// firstSeen matches the campaigns' first-seen times, which are the test's.
var firstSeen = regexp.MustCompile(`(first seen |"first_seen":")[0-9T:.Z+-]+`)

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	got = firstSeen.ReplaceAll(got, []byte("${1}TIME"))
	path := filepath.Join("testdata/explain", name)
	want := testenv.Golden(t, path, got, *updateExplain)
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test ./cmd/milterd -run TestExplain -update-explain rewrites it):\n%s", name, got)
	}
}

// milterd explain, offline: golden text and JSON, and the store file is
// the same, byte for byte, afterwards.
func TestExplainGolden(t *testing.T) {
	dir, cfg := explainSetup(t)
	storeFile := filepath.Join(dir, "store.db")
	before := fileSum(t, storeFile)
	args := append([]string{"explain", "-config", cfg, "-data-dir", dir, "-rcpt", "annabel.quist@example.test"}, explainFiles...)
	code, text, errOut := runMilterd(t, args...)
	if code != 0 {
		t.Fatalf("explain: exit %d: %s", code, errOut)
	}
	checkGolden(t, "explain.golden", []byte(text))
	code, js, errOut := runMilterd(t, append([]string{"explain", "-json"}, args[1:]...)...)
	if code != 0 {
		t.Fatalf("explain -json: exit %d: %s", code, errOut)
	}
	checkGolden(t, "explain.json.golden", []byte(js))
	if after := fileSum(t, storeFile); after != before {
		t.Error("explain changed the store file")
	}

	// What the JSON says, read back.
	levels := map[string]int{}
	dec := json.NewDecoder(strings.NewReader(js))
	for dec.More() {
		var r explain.Report
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		levels[filepath.Base(r.Name)] = r.Verdict.Level
		if r.Name == "testdata/explain/declared.eml" && r.Verdict.Kind != "declared" {
			t.Errorf("declared.eml: kind %s", r.Verdict.Kind)
		}
	}
	// hidden.eml: 1.2× the threshold, undeclared, and its campaign reached
	// the threshold within the hour (the scan just now): 5+1+1.
	want := map[string]int{"declared.eml": 0, "hidden.eml": 7, "homoglyph.eml": 2, "personal.eml": 0}
	for name, l := range want {
		if levels[name] != l {
			t.Errorf("%s: level %d, want %d", name, levels[name], l)
		}
	}
}

// While a daemon holds the embedded store, explain asks it at
// /admin/explain and prints the same; asking twice counts nothing.
func TestExplainThroughDaemon(t *testing.T) {
	dir, cfg := explainSetup(t)
	d := startDaemon(t, "-config", cfg, "-data-dir", dir)
	args := append([]string{"explain", "-config", cfg, "-data-dir", dir, "-metrics-listen", d.httpAddr, "-rcpt", "annabel.quist@example.test"}, explainFiles...)
	for range 2 {
		code, text, errOut := runMilterd(t, args...)
		if code != 0 {
			t.Fatalf("explain: exit %d: %s\n%s", code, errOut, d.Logs())
		}
		checkGolden(t, "explain.golden", []byte(text))
	}
	// Without the token the endpoint explains nothing.
	resp, err := http.Post("http://"+d.httpAddr+"/admin/explain", "message/rfc822", strings.NewReader("Subject: x\n\nhello\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /admin/explain without the token: %s, want 401", resp.Status)
	}
	if n := d.metric(t, `bulkmilter_messages_total{verdict="not_bulk"}`) + d.metric(t, `bulkmilter_messages_total{verdict="bulk"}`); n != 0 {
		t.Errorf("explaining counted %v messages", n)
	}
}
