package main

import (
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// The daemon refuses to start with a secret key that others can read or
// that group or others can write, with a message saying what to do; a
// key readable by its group (the daemon's) is accepted.
func TestDaemonRefusesExposedSecret(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o604, 0o620, 0o666} {
		dir := t.TempDir()
		key := filepath.Join(dir, "secret.key")
		writeFile(t, key, hex.EncodeToString(randBytes(32))+"\n")
		if err := os.Chmod(key, mode); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runMilterd(t, "run", "-data-dir", dir, "-listen", "inet:"+testenv.FreeAddr(t), "-metrics-listen", "off")
		if code == 0 || !strings.Contains(stderr, "chmod 600 "+key) {
			t.Errorf("secret key mode %04o: exit %d, stderr %q; want a refusal naming chmod 600", mode, code, stderr)
		}
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "secret.key")
	writeFile(t, key, hex.EncodeToString(randBytes(32))+"\n")
	if err := os.Chmod(key, 0o640); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, "-data-dir", dir) // fails the test unless it becomes ready
}

var hexKeyRE = regexp.MustCompile(`[0-9a-f]{12,}`)

// The verdict header names the family and volume, never the signature
// keys (they would tell a sender what to change), unless reveal_keys is
// configured.
func TestVerdictHeaderRevealsKeysOnlyWhenConfigured(t *testing.T) {
	for _, reveal := range []bool{false, true} {
		cfg := filepath.Join(t.TempDir(), "bulkmilter.yml")
		if reveal {
			writeFile(t, cfg, "actions:\n  reveal_keys: true\n")
		} else {
			writeFile(t, cfg, "actions:\n  reveal_keys: false\n")
		}
		d := startDaemon(t, "-config", cfg)
		rcpt := "reader@example.test"
		res, err := mtaclient.New("tcp", d.milterAddr).Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{rcpt}},
			campaign(1, rcpt, "Reader", rand.New(rand.NewPCG(4, 4))))
		if err != nil {
			t.Fatal(err)
		}
		v := verdictOf(t, res)
		hasKeys := strings.Contains(v, "keys=") || hexKeyRE.MatchString(v)
		if hasKeys != reveal {
			t.Errorf("reveal_keys %v: X-Bulk %q", reveal, v)
		}
	}
}
