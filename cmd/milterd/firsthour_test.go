package main

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
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
