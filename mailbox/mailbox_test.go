package mailbox

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

type got struct {
	Name string
	Data string
}

// collect walks path and returns the delivered messages and the skipped names.
func collect(t *testing.T, path string, opts Options) ([]got, []string, error) {
	t.Helper()
	var msgs []got
	var skips []string
	if opts.OnSkip == nil {
		opts.OnSkip = func(name string, reason error) error {
			if !errors.Is(reason, ErrNotMessage) && !errors.Is(reason, ErrTooLarge) {
				t.Errorf("skip %s: reason %v wraps neither ErrNotMessage nor ErrTooLarge", name, reason)
			}
			skips = append(skips, name)
			return nil
		}
	}
	err := opts.Walk(path, func(m *Message) error {
		msgs = append(msgs, got{m.Name, string(m.Data)})
		return nil
	})
	return msgs, skips, err
}

var (
	mboxWant = []got{
		{"#2", "From: alice@example.org\nSubject: one\n\nFrom the escaped line\n>From a doubly escaped line\nFrom the desk of an unescaped body line\nend of one\n"},
		{"#3", "From: bob@example.org\nSubject: two\n\nno blank line before the next postmark\n"},
		{"#4", "Subject: three\n\nlast\n"},
	}
)

func prefixed(prefix string, in []got) []got {
	out := make([]got, len(in))
	for i, g := range in {
		out[i] = got{prefix + g.Name, g.Data}
	}
	return out
}

// writeFile writes data to a file in a fresh temporary directory.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func tarGz(t *testing.T, files ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for i := 0; i < len(files); i += 2 {
		if err := tw.WriteHeader(&tar.Header{Name: files[i], Mode: 0o644, Size: int64(len(files[i+1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestWalk(t *testing.T) {
	archive := writeFile(t, "box.tar.gz", tarGz(t,
		"./box/README", "Subject: not a message either\n\n",
		"box/cur/1:2,S", "From x@y Thu Aug 22 13:17:22 2002\nSubject: in a tar\n\nbody\n",
		"box/inner.mbox", "From a@b Thu Aug 22 13:17:22 2002\nSubject: one\n\n1\n\nFrom a@b Thu Aug 22 13:17:22 2002\nSubject: two\n\n2\n",
		"box/notes", "just some text\n",
	))
	tests := []struct {
		name      string
		path      string
		opts      Options
		want      []got
		wantSkips []string
	}{
		{
			name:      "mbox",
			path:      "testdata/tiny.mbox",
			want:      prefixed("tiny.mbox", mboxWant),
			wantSkips: []string{"tiny.mbox#1"},
		},
		{
			name:      "mbox xz",
			path:      "testdata/tiny.mbox.xz",
			want:      prefixed("tiny.mbox.xz", mboxWant),
			wantSkips: []string{"tiny.mbox.xz#1"},
		},
		{
			name: "maildir",
			path: "testdata/maildir",
			want: []got{
				{"maildir/cur/1000.M1.host:2,S", "Subject: cur a\r\n\r\nA\r\n"},
				{"maildir/cur/1000.M2.host:2,S", "Subject: cur b\n\nB\n"},
				{"maildir/new/1001.M3.host", "Subject: new\n\nN\n"},
			},
			wantSkips: []string{"maildir/dovecot-uidlist"},
		},
		{
			// A top-level .eml is one message even though it starts with "From ".
			name: "single message file",
			path: "testdata/single.eml",
			want: []got{{"single.eml", "Subject: single\n\nFrom the body.\n"}},
		},
		{
			name: "filter on mbox names",
			path: "testdata/tiny.mbox",
			opts: Options{Filter: func(n string) bool { return n == "tiny.mbox#3" }},
			want: prefixed("tiny.mbox", mboxWant[1:2]),
		},
		{
			name: "limit",
			path: "testdata/tiny.mbox",
			opts: Options{Limit: 2},
			want: prefixed("tiny.mbox", mboxWant[:2]),
			// The folder-data message is skipped before the limit is reached.
			wantSkips: []string{"tiny.mbox#1"},
		},
		{
			name:      "max size in mbox",
			path:      "testdata/tiny.mbox",
			opts:      Options{MaxSize: 30},
			want:      prefixed("tiny.mbox", mboxWant[2:]),
			wantSkips: []string{"tiny.mbox#1", "tiny.mbox#2", "tiny.mbox#3"},
		},
		{
			// Members in archive order; an mbox member is split; a leading
			// "From " line is removed from a message file.
			name: "tar.gz",
			path: archive,
			want: []got{
				{"box/cur/1:2,S", "Subject: in a tar\n\nbody\n"},
				{"box/inner.mbox#1", "Subject: one\n\n1\n"},
				{"box/inner.mbox#2", "Subject: two\n\n2\n"},
			},
			wantSkips: []string{"box/README", "box/notes"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, skips, err := collect(t, tt.path, tt.opts)
			if err != nil {
				t.Fatalf("Walk(%s): %v", tt.path, err)
			}
			if !reflect.DeepEqual(msgs, tt.want) {
				t.Errorf("got messages\n%q\nwant\n%q", msgs, tt.want)
			}
			if !reflect.DeepEqual(skips, tt.wantSkips) {
				t.Errorf("got skips %q, want %q", skips, tt.wantSkips)
			}
		})
	}
}

func TestWalkTooLargeWithoutOnSkip(t *testing.T) {
	err := Options{MaxSize: 30}.Walk("testdata/tiny.mbox", func(*Message) error { return nil })
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want an error wrapping ErrTooLarge", err)
	}
	if !strings.Contains(err.Error(), "tiny.mbox#1") {
		t.Errorf("error %q does not name the message", err)
	}
}

func TestWalkCallbackErrors(t *testing.T) {
	boom := errors.New("boom")
	n := 0
	err := Walk("testdata/maildir", func(*Message) error { n++; return boom })
	if err != boom {
		t.Errorf("got %v, want the callback's error unchanged", err)
	}
	if n != 1 {
		t.Errorf("callback called %d times after an error, want 1", n)
	}
	n = 0
	err = Walk("testdata/tiny.mbox", func(*Message) error { n++; return fs.SkipAll })
	if err != nil || n != 1 {
		t.Errorf("fs.SkipAll: got err %v after %d calls, want nil after 1", err, n)
	}
	err = Options{OnSkip: func(string, error) error { return boom }}.Walk("testdata/maildir", func(*Message) error { return nil })
	if err != boom {
		t.Errorf("OnSkip error: got %v, want it unchanged", err)
	}
}

func TestWalkBadInput(t *testing.T) {
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	big := tarGz(t, "d/a", "Subject: a\n\n"+strings.Repeat("x", 20000)+"\n", "d/b", "Subject: b\n\nb\n")
	tests := []struct {
		name    string
		file    string
		data    []byte
		wantErr string
	}{
		{"truncated tar.gz", "x.tar.gz", big[:len(big)/2], "unexpected EOF"},
		{"truncated xz mbox", "x.mbox.xz", read("testdata/tiny.mbox.xz")[:200], "x.mbox.xz"},
		{"not gzip", "x.tar.gz", []byte("this is not gzip"), "gzip"},
		{"not xz", "x.tar.xz", []byte("this is not xz at all"), "xz"},
		{"garbage tar", "x.tar", bytes.Repeat([]byte("junk"), 200), "x.tar"},
		{"mbox without From line", "x.mbox", []byte("Subject: a\n\nb\n"), "before the first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, tt.file, tt.data)
			err := Walk(p, func(*Message) error { return nil })
			if err == nil {
				t.Fatalf("Walk(%s): got nil error, want one containing %q", tt.name, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got error %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
	t.Run("missing path", func(t *testing.T) {
		err := Walk(filepath.Join(t.TempDir(), "nope"), func(*Message) error { return nil })
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("got %v, want fs.ErrNotExist", err)
		}
	})
}

func TestLooksLikeMessage(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"Subject: x\n", true},
		{"Received : obsolete space before colon\n", true},
		{" agate!ames!purdue\nSubject: folded remnant first\n", true},
		{" indented text\nmore text\n", false},
		{"mv 00001 00001\n", false},
		{"Legitimate\n----\n", false},
		{"", false},
		{"\nbody only\n", false},
		{"<!ELEMENT LEWIS O O (REUTERS+)>\n", false},
	}
	for _, tt := range tests {
		if got := looksLikeMessage([]byte(tt.in)); got != tt.want {
			t.Errorf("looksLikeMessage(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestIsPostmark(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"From aw-confirm@ebay.com  Tue Jun 14 19:52:09 2005\n", true},
		{"From MAILER-DAEMON Tue Nov 15 11:01:01 2005\n", true},
		{"From 12a1mailbot1@web.de  Thu Aug 22 13:17:22 2002\n", true},
		{"From x@y Thu Aug 22 13:17:22 2002 +0200\n", true},
		{"From the desk of the director\n", false},
		{"From: alice@example.org\n", false},
		{"From here on at 10:30\n", false},
		{">From x@y Thu Aug 22 13:17:22 2002\n", false},
	}
	for _, tt := range tests {
		if got := isPostmark([]byte(tt.in)); got != tt.want {
			t.Errorf("isPostmark(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// FuzzSplitMbox checks that any input splits without panic within the size limit, and
// that messages written as an mboxrd file come back byte for byte.
func FuzzSplitMbox(f *testing.F) {
	f.Add([]byte("From a@b Thu Aug 22 13:17:22 2002\nSubject: x\n\nbody\n\n"), int64(-1))
	f.Add([]byte("Subject: one\n\n>From quoted\n\x00Subject: two\n\nFrom the desk\n>>From x\n"), int64(100))
	f.Add([]byte("From a@b Thu Aug 22 13:17:22 2002\r\nSubject: x\r\n\r\nb\r\n\r\nFrom c@d Fri Aug 23 13:17:22 2002\r\n"), int64(10))
	f.Fuzz(func(t *testing.T, data []byte, limit int64) {
		// Any input: no panic, nothing above the limit.
		_ = splitMbox(bytes.NewReader(data), limit, func(m []byte, size int64) error {
			if limit >= 0 && int64(len(m)) > limit {
				t.Fatalf("message of %d bytes above limit %d", len(m), limit)
			}
			if m == nil && (limit < 0 || size <= limit) {
				t.Fatalf("nil message of size %d within limit %d", size, limit)
			}
			return nil
		})

		// Round trip: NUL-separated messages, each ending in a newline.
		var msgs [][]byte
		for _, m := range bytes.Split(data, []byte{0}) {
			if len(m) == 0 || m[len(m)-1] != '\n' {
				m = append(m, '\n')
			}
			msgs = append(msgs, m)
		}
		var mbox bytes.Buffer
		for _, m := range msgs {
			mbox.WriteString("From fuzz@example.org Thu Jan  1 00:00:00 2004\n")
			for _, line := range bytes.SplitAfter(m, []byte("\n")) {
				if bytes.HasPrefix(bytes.TrimLeft(line, ">"), []byte("From ")) {
					mbox.WriteByte('>') // mboxrd quoting
				}
				mbox.Write(line)
			}
			mbox.WriteByte('\n')
		}
		var got [][]byte
		if err := splitMbox(&mbox, -1, func(m []byte, _ int64) error {
			got = append(got, m)
			return nil
		}); err != nil {
			t.Fatalf("split of a well-formed mbox: %v", err)
		}
		if len(got) != len(msgs) {
			t.Fatalf("got %d messages, want %d", len(got), len(msgs))
		}
		for i := range msgs {
			if !bytes.Equal(got[i], msgs[i]) {
				t.Fatalf("message %d: got %q, want %q", i, got[i], msgs[i])
			}
		}
	})
}

// TestWalkLiveMaildir: a server renames and expunges messages while the
// walk runs (here, from the callback, at fixed points): a renamed message
// is read once under its new name, an expunged one is skipped, and the
// walk ends without error. The old walk stopped at the first vanished file.
func TestWalkLiveMaildir(t *testing.T) {
	md := filepath.Join(t.TempDir(), "box")
	for _, d := range []string{"cur", "new", "tmp"} {
		if err := os.MkdirAll(filepath.Join(md, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := []string{"cur/1.a:2,", "cur/2.b:2,", "new/3.c", "new/4.d", "new/5.e"}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(md, f), []byte("Subject: "+f+"\n\nbody\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// While the walk reads each of the left files, the server renames or
	// expunges the right one (already listed, not yet opened).
	moves := map[string][2]string{
		"box/cur/1.a:2,": {"cur/2.b:2,", "cur/2.b:2,S"}, // a flag change
		"box/new/3.c":    {"new/4.d", "cur/4.d:2,"},     // new/ to cur/
		"box/cur/4.d:2,": {"new/5.e", ""},               // expunged
	}
	var names, subjects []string
	err := Walk(md, func(m *Message) error {
		names = append(names, m.Name)
		subjects = append(subjects, strings.SplitN(string(m.Data), "\n", 2)[0])
		if mv, ok := moves[m.Name]; ok {
			from := filepath.Join(md, mv[0])
			if mv[1] == "" {
				return os.Remove(from)
			}
			return os.Rename(from, filepath.Join(md, mv[1]))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	wantNames := []string{"box/cur/1.a:2,", "box/cur/2.b:2,S", "box/new/3.c", "box/cur/4.d:2,"}
	wantSubjects := []string{"Subject: cur/1.a:2,", "Subject: cur/2.b:2,", "Subject: new/3.c", "Subject: new/4.d"}
	if !reflect.DeepEqual(names, wantNames) || !reflect.DeepEqual(subjects, wantSubjects) {
		t.Errorf("delivered %q %q, want %q %q", names, subjects, wantNames, wantSubjects)
	}
	// Outside a maildir a file gone when opened is still an error.
	dir := t.TempDir()
	for _, f := range []string{"a.eml", "b.eml"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("Subject: x\n\nbody\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err = Walk(dir, func(*Message) error { return os.Remove(filepath.Join(dir, "b.eml")) })
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a plain directory's vanished file: got %v, want an error wrapping fs.ErrNotExist", err)
	}
}
