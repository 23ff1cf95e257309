package corpus

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
	Name  string
	Label Label
	Data  string
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
		msgs = append(msgs, got{m.Name, m.Label, string(m.Data)})
		return nil
	})
	return msgs, skips, err
}

var (
	enronWant = []got{
		{"enron1/ham/0001.1999-12-10.farmer.ham.txt", Ham, "Subject: re : rankings\r\n\r\nthank you .\r\n"},
		{"enron1/ham/0002.1999-12-11.farmer.ham.txt", Ham, "Subject: meeting\r\n\r\n  indented first body line\r\nbye\r\n"},
		{"enron1/spam/0003.2004-01-01.GP.spam.txt", Spam, "Subject: cheap meds\n\nbuy now\n"},
		{"enron1/spam/0004.2004-01-02.GP.spam.txt", Spam, "Subject: only a subject\n\n"},
	}
	csdmcWant = []got{
		{"CSDMC2010_SPAM/TRAINING/TRAIN_00000.eml", Spam, "Subject: spam here\n\nbuy\n"},
		{"CSDMC2010_SPAM/TRAINING/TRAIN_00001.eml", Ham, "Subject: ham here\n\nhello\n"},
		{"CSDMC2010_SPAM/TRAINING/TRAIN_00002.eml", Unknown, "Subject: not in the label file\n\nhello\n"},
	}
)

func TestWalk(t *testing.T) {
	tests := []struct {
		name      string
		path      string
		opts      Options
		want      []got
		wantSkips []string
	}{
		{
			name:      "enron tar.gz",
			path:      "testdata/enron1.tar.gz",
			want:      enronWant,
			wantSkips: []string{"enron1/Summary.txt"},
		},
		{
			// An extracted folder gives the same names as its tarball.
			name:      "enron directory",
			path:      "testdata/enron1",
			want:      enronWant,
			wantSkips: []string{"enron1/Summary.txt"},
		},
		{
			name: "reuters sgml in tar.gz",
			path: "testdata/reuters.tar.gz",
			want: []got{
				{"reuters/reut2-000.sgm#1", Unknown, "Subject: BAHIA COCOA <REVIEW>\n\nShowers continued & the\n<Comissaria Smith> said.\n Reuter\n"},
				{"reuters/reut2-000.sgm#3", Unknown, "Subject: ASSETS OF MONEY MARKET MUTUAL FUNDS ROSE 720.4 MLN DLRS\n\nAssets rose.\n"},
			},
			wantSkips: []string{"reuters/all-topics-strings.lc.txt", "reuters/lewis.dtd", "reuters/reut2-000.sgm#2"},
		},
		{
			name: "reuters sgml file",
			path: "testdata/reuters/reut2-000.sgm",
			want: []got{
				{"reut2-000.sgm#1", Unknown, "Subject: BAHIA COCOA <REVIEW>\n\nShowers continued & the\n<Comissaria Smith> said.\n Reuter\n"},
				{"reut2-000.sgm#3", Unknown, "Subject: ASSETS OF MONEY MARKET MUTUAL FUNDS ROSE 720.4 MLN DLRS\n\nAssets rose.\n"},
			},
			wantSkips: []string{"reut2-000.sgm#2"},
		},
		{
			name:      "csdmc label file in tar.bz2",
			path:      "testdata/csdmc.tar.bz2",
			want:      csdmcWant,
			wantSkips: []string{"CSDMC2010_SPAM/SPAMTrain.label", "CSDMC2010_SPAM/readme.txt"},
		},
		{
			name:      "csdmc label file in directory",
			path:      "testdata/CSDMC2010_SPAM",
			want:      csdmcWant,
			wantSkips: []string{"CSDMC2010_SPAM/SPAMTrain.label", "CSDMC2010_SPAM/readme.txt"},
		},
		{
			name: "spamassassin folder",
			path: "testdata/spam_2",
			want: []got{
				{"spam_2/00001.aaaa", Spam, "Return-Path: <sender@example.com>\nSubject: sa spam\n\nFrom here on, a body line.\n"},
			},
			wantSkips: []string{"spam_2/cmds"},
		},
		{
			name: "ham folder",
			path: "testdata/easy_ham",
			want: []got{{"easy_ham/00001.bbbb", Ham, "Subject: sa ham\n\nhi\n"}},
		},
		{
			name:      "filter",
			path:      "testdata/enron1.tar.gz",
			opts:      Options{Filter: func(n string) bool { return strings.HasPrefix(n, "enron1/spam/") }},
			want:      enronWant[2:],
			wantSkips: []string{"enron1/Summary.txt"},
		},
		{
			name: "max size reports oversize",
			path: "testdata/enron1.tar.gz",
			opts: Options{MaxSize: 30},
			// The limit applies to the stored size (0003 is 28 bytes before conversion).
			want:      enronWant[2:],
			wantSkips: []string{"enron1/Summary.txt", "enron1/ham/0001.1999-12-10.farmer.ham.txt", "enron1/ham/0002.1999-12-11.farmer.ham.txt"},
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
	err := Options{MaxSize: 30}.Walk("testdata/enron1.tar.gz", func(*Message) error { return nil })
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want an error wrapping ErrTooLarge", err)
	}
	if !strings.Contains(err.Error(), "enron1/ham/0001.1999-12-10.farmer.ham.txt") {
		t.Errorf("error %q does not name the message", err)
	}
}

func TestWalkCallbackErrors(t *testing.T) {
	boom := errors.New("boom")
	n := 0
	err := Walk("testdata/enron1.tar.gz", func(*Message) error { n++; return boom })
	if err != boom {
		t.Errorf("got %v, want the callback's error unchanged", err)
	}
	if n != 1 {
		t.Errorf("callback called %d times after an error, want 1", n)
	}
	n = 0
	err = Walk("testdata/enron1.tar.gz", func(*Message) error { n++; return fs.SkipAll })
	if err != nil || n != 1 {
		t.Errorf("fs.SkipAll: got err %v after %d calls, want nil after 1", err, n)
	}
	err = Options{OnSkip: func(string, error) error { return boom }}.Walk("testdata/enron1", func(*Message) error { return nil })
	if err != boom {
		t.Errorf("OnSkip error: got %v, want it unchanged", err)
	}
}

// TestWalkDeterministic walks the whole testdata tree (archives, label files, SGML and
// folders together) twice: same sequence, unique names, no error.
func TestWalkDeterministic(t *testing.T) {
	first, skips1, err := collect(t, "testdata", Options{})
	if err != nil {
		t.Fatal(err)
	}
	second, skips2, err := collect(t, "testdata", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, second) || !reflect.DeepEqual(skips1, skips2) {
		t.Fatal("two walks of testdata differ")
	}
	seen := map[string]bool{}
	for _, m := range first {
		if seen[m.Name] {
			t.Errorf("duplicate name %s", m.Name)
		}
		seen[m.Name] = true
	}
	// Nested archives keep their path in the name and their member labels.
	for _, name := range []string{
		"testdata/enron1.tar.gz/enron1/spam/0003.2004-01-01.GP.spam.txt",
		"testdata/enron1/spam/0003.2004-01-01.GP.spam.txt",
		"testdata/reuters.tar.gz/reuters/reut2-000.sgm#3",
		"testdata/csdmc.tar.bz2/CSDMC2010_SPAM/TRAINING/TRAIN_00001.eml",
	} {
		if !seen[name] {
			t.Errorf("missing %s", name)
		}
	}
	if len(first) < 20 {
		t.Errorf("got %d messages from testdata, want at least 20", len(first))
	}
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
		{"truncated bz2 tar", "x.tar.bz2", read("testdata/csdmc.tar.bz2")[:150], "x.tar.bz2"},
		{"not gzip", "x.tar.gz", []byte("this is not gzip"), "gzip"},
		{"not xz", "x.tar.xz", []byte("this is not xz at all"), "xz"},
		{"garbage tar", "x.tar", bytes.Repeat([]byte("junk"), 200), "x.tar"},
		{"mbox without From line", "x.mbox", []byte("Subject: a\n\nb\n"), "before the first"},
		{"sgml without end tag", "x.sgm", []byte("<REUTERS NEWID=\"9\">\n<BODY>cut"), "no </REUTERS>"},
		{"label file after messages", "x.tar.gz", tarGz(t, "c/TRAINING/TRAIN_00000.eml", "Subject: a\n\nb\n", "c/SPAMTrain.label", "0 TRAIN_00000.eml\n"), "comes after messages"},
		{"bad label", "x.tar.gz", tarGz(t, "c/SPAMTrain.label", "2 TRAIN_00000.eml\n"), "neither 1 (ham) nor 0 (spam)"},
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

func TestInferLabel(t *testing.T) {
	tests := []struct {
		name string
		want Label
	}{
		{"spam/00001.x", Spam},
		{"spam_2/00001.x", Spam},
		{"easy_ham/00001.x", Ham},
		{"hard_ham_2/0001.x", Ham},
		{"enron3/ham/enron3_ham_1256.txt", Ham},
		{"enron1/spam/1.spam.txt", Spam},
		{"spam/inner/ham/x", Ham}, // deepest wins
		{"enron-spam-preprocessed/x", Unknown},
		{"spamassassin/x", Unknown},
		{"CSDMC2010_SPAM/TRAINING/x", Unknown},
		{"my-spam-archive/x", Unknown},
		{"Spam-2/x", Spam},
		{"hamburg/x", Unknown},
		{"20news-bydate-train/alt.atheism/49960", Unknown},
		{"cur/1:2,S", Unknown},
		{"spam.eml", Unknown}, // the file name itself never labels
	}
	for _, tt := range tests {
		if got := inferLabel(tt.name); got != tt.want {
			t.Errorf("inferLabel(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestDecodeEntities(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a &lt;b&gt; &amp; c", "a <b> & c"},
		{"Reuter\n&#3;", "Reuter\n"},
		{"&#5;&#5;&#22;x&#127;", "x"},
		{"&#65;&#x42;&#9;", "AB\t"},
		{"AT&T; R&D &unknown; &#xZZ; &#99999999;", "AT&T; R&D &unknown; &#xZZ; &#99999999;"},
		{"trailing &", "trailing &"},
	}
	for _, tt := range tests {
		if got := string(decodeEntities([]byte(tt.in))); got != tt.want {
			t.Errorf("decodeEntities(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLabelString(t *testing.T) {
	for l, want := range map[Label]string{Unknown: "unknown", Ham: "ham", Spam: "spam", Label(9): "Label(9)"} {
		if got := l.String(); got != want {
			t.Errorf("Label(%d).String() = %q, want %q", int8(l), got, want)
		}
	}
}
