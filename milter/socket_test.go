package milter

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// socket.group sets the unix socket's group, by name or number, so that
// the MTA's user can reach a socket of mode 0660; an unknown group is an
// error, and the socket is not left behind half-configured.
func TestListenUnixSocketGroup(t *testing.T) {
	// A group the test may give files to: any group as root, else the
	// user's own primary group.
	gid := os.Getgid()
	if os.Geteuid() == 0 {
		for _, name := range []string{"nogroup", "daemon", "users", "bin"} {
			if g, err := user.LookupGroup(name); err == nil {
				gid, _ = strconv.Atoi(g.Gid)
				break
			}
		}
	}
	g, err := user.LookupGroupId(strconv.Itoa(gid))
	if err != nil {
		t.Skipf("no name for group %d: %v", gid, err)
	}
	for _, spec := range []string{g.Name, g.Gid} {
		path := filepath.Join(t.TempDir(), "milter.sock")
		ln, err := Listen("unix", path, SocketAccess{Mode: 0o660, Group: spec})
		if err != nil {
			t.Fatalf("group %q: %v", spec, err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Sys().(*syscall.Stat_t).Gid; int(got) != gid || fi.Mode().Perm() != 0o660 {
			t.Errorf("group %q: socket gid %d mode %o, want %d and 660", spec, got, fi.Mode().Perm(), gid)
		}
		ln.Close()
	}
	path := filepath.Join(t.TempDir(), "milter.sock")
	if ln, err := Listen("unix", path, SocketAccess{Group: "no-such-group-bulkmilter"}); err == nil {
		ln.Close()
		t.Fatal("an unknown socket group was accepted")
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("socket left behind after a failed Listen")
	}
}
