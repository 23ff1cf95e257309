package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/d--j/go-milter"

	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/lab/corpus"
)

// These tests run the real milterd binary, built once per test run, the way
// an admin does: no config file, flags only, the embedded store and the
// bundled lexicon.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func milterdBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "milterd-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "milterd")
		args := []string{"build", "-o", binPath}
		if testenv.RaceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// daemonProc is a running milterd.
type daemonProc struct {
	t          testing.TB
	cmd        *exec.Cmd
	milterAddr string
	httpAddr   string
	dataDir    string
	logs       testenv.SyncBuffer
	exited     chan struct{}
	exitErr    error
}

// Logs returns what the daemon logged so far.
func (d *daemonProc) Logs() string { return d.logs.String() }

// startDaemon starts milterd on free loopback ports with its own data
// directory, waits until /readyz answers, and stops it at cleanup,
// failing the test unless it exits cleanly on SIGTERM. A port that was
// free can be taken before milterd binds it (other test binaries run
// beside this one), so a start that fails on "address already in use"
// is made again on new ports, as testenv's servers are.
func startDaemon(t testing.TB, extra ...string) *daemonProc {
	t.Helper()
	for range 3 {
		if d := tryStartDaemon(t, extra); d != nil {
			return d
		}
	}
	t.Fatal("milterd found its ports taken in 3 starts")
	return nil
}

// tryStartDaemon makes one start: the running daemon, or nil when a port
// was taken (any other failure fails the test).
func tryStartDaemon(t testing.TB, extra []string) *daemonProc {
	t.Helper()
	d := &daemonProc{
		t:          t,
		milterAddr: testenv.FreeAddr(t),
		httpAddr:   testenv.FreeAddr(t),
		dataDir:    t.TempDir(),
		exited:     make(chan struct{}),
	}
	args := append([]string{"run",
		"-listen", "inet:" + d.milterAddr,
		"-metrics-listen", d.httpAddr,
		"-data-dir", d.dataDir,
	}, extra...)
	d.cmd = exec.Command(milterdBinary(t), args...)
	d.cmd.Stdout, d.cmd.Stderr = &d.logs, &d.logs
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.exitErr = d.cmd.Wait()
		close(d.exited)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + d.httpAddr + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Cleanup(func() { d.stop(t) })
				return d
			}
		}
		select {
		case <-d.exited:
			if strings.Contains(d.Logs(), "address already in use") {
				t.Logf("milterd could not bind a port that was free a moment ago; new ports:\n%s", d.Logs())
				return nil
			}
			t.Fatalf("milterd exited before it was ready: %v\n%s", d.exitErr, d.Logs())
		default:
		}
		if time.Now().After(deadline) {
			d.cmd.Process.Kill()
			<-d.exited
			t.Fatalf("milterd not ready after 20s\n%s", d.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemonProc) stop(t testing.TB) {
	select {
	case <-d.exited:
	default:
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(30 * time.Second):
			d.cmd.Process.Kill()
			<-d.exited
			t.Errorf("milterd did not stop within 30s of SIGTERM\n%s", d.Logs())
			return
		}
	}
	if d.exitErr != nil {
		t.Errorf("milterd exited with %v\n%s", d.exitErr, d.Logs())
	}
	if strings.Contains(d.Logs(), "panic") {
		t.Errorf("milterd logged a panic:\n%s", d.Logs())
	}
}

// metric returns the value of one sample from /metrics, e.g.
// `bulkmilter_messages_total{verdict="bulk"}`; 0 when absent.
func (d *daemonProc) metric(t testing.TB, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + d.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return 0
}

// campaign returns copy i of a mass mailing: the same newsletter,
// personalised with the recipient's name and address and salted with four
// random dictionary words, as bulk senders and spammers do. Whether such a
// copy still shares a key with the others depends on where the words fall
// relative to the (secret) lexicon, so tests that need exact volumes use
// hashBusterCopy or the feedback tests' newsletterWords.
func campaign(i int, rcpt, name string, rng *rand.Rand) []byte {
	salt := make([]string, 4)
	for j := range salt {
		salt[j] = randomWord(rng)
	}
	return campaignWith(i, rcpt, name, salt)
}

// hashBusterCopy returns copy i salted with random strings ("hash
// busters"), which are in no lexicon or dictionary: every copy keeps the
// campaign's I-Match keys, so volumes are exact whatever the secret.
func hashBusterCopy(i int, rcpt, name string, rng *rand.Rand) []byte {
	salt := make([]string, 4)
	for j := range salt {
		b := make([]byte, 6+rng.IntN(5))
		for k := range b {
			b[k] = "bcdfghjklmnpqrstvwxz"[rng.IntN(20)]
		}
		salt[j] = string(b)
	}
	return campaignWith(i, rcpt, name, salt)
}

func campaignWith(i int, rcpt, name string, salt []string) []byte {
	return []byte(fmt.Sprintf(`From: "Garden Weekly" <news@garden.example>
To: "%s" <%s>
Subject: %s, your spring planting guide is here
Date: Mon, 16 Nov 2026 10:%02d:00 +0000
Message-ID: <spring-%d-%s@garden.example>
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8

Dear %s,

Spring is the season to prepare your vegetable garden. This week we explain
how to test the soil, when to sow tomatoes and peppers indoors, and how to
protect young seedlings from late frost. Our experts compare raised beds
with traditional rows and recommend compost mixtures for heavy clay.

Visit our store for discounted seed collections, organic fertilizer and
durable tools. Members receive free shipping on every order this month.

Reference %s %s %s %s

Happy gardening,
The Garden Weekly team
`, name, rcpt, name, i%60, i, salt[0], name, salt[0], salt[1], salt[2], salt[3]))
}

var vocabulary = strings.Fields(`apple river mountain letter window garden silver motor
planet history market winter doctor village camera bridge pencil ocean castle
engine island forest basket mirror rocket violin coffee butter candle jacket
ladder marble needle orange parrot rabbit saddle tunnel wagon yellow zebra
meadow harbor lantern compass blanket cottage feather glacier hammock iceberg
journal kettle lemonade magnet notebook orchard pillow quarry ribbon sailboat
teapot umbrella vessel walnut anchor biscuit canyon dolphin emerald falcon`)

func randomWord(rng *rand.Rand) string {
	return vocabulary[rng.IntN(len(vocabulary))]
}

var firstNames = strings.Fields(`Anna Boris Chloe Dmitri Elena Farid Greta Hugo Irina Jonas Kira Luca
Maya Nikolai Olga Pavel Quinn Rosa Sergei Tanya Umar Vera Wen Xenia Yuri Zara`)

var lastNames = strings.Fields(`Ivanova Schmidt Dubois Novak Rossi Kowalski Larsen Moreau Petrov Silva
Tanaka Weber Yilmaz Horvat Lindqvist Costa Meyer Popescu Kaya Nielsen`)

func recipientName(i int) string {
	return firstNames[i%len(firstNames)] + " " + lastNames[(i*7)%len(lastNames)]
}

func recipientAddr(i int) string {
	n := strings.ToLower(strings.ReplaceAll(recipientName(i), " ", "."))
	return fmt.Sprintf("%s%d@example.test", n, i)
}

// verdictOf returns the verdict header value the milter added.
func verdictOf(t testing.TB, res mtaclient.Result) string {
	t.Helper()
	v, ok := res.Header("X-Bulk")
	if !ok {
		t.Fatalf("no X-Bulk header added; modifications: %v", res.Mods)
	}
	return v
}

// A campaign of personalised copies, each salted with random strings, to
// distinct recipients is tagged from
// the threshold on, and not before; unrelated real mail is never tagged;
// a forged verdict header is removed. The daemon runs on its defaults: no
// config file, the embedded store, the bundled lexicon.
func TestCampaignTaggedFromThreshold(t *testing.T) {
	d := startDaemon(t)
	cl := mtaclient.New("tcp", d.milterAddr)
	rng := rand.New(rand.NewPCG(1, 2))

	const threshold, copies = 10, 30 // threshold: the default policy.threshold
	for i := 1; i <= copies; i++ {
		rcpt := recipientAddr(i)
		res, err := cl.Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{rcpt}},
			hashBusterCopy(i, rcpt, recipientName(i), rng))
		if err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
		v := verdictOf(t, res)
		t.Logf("copy %d: %s", i, v)
		if want := i >= threshold; strings.HasPrefix(v, "yes") != want {
			t.Errorf("copy %d: X-Bulk %q, want bulk=%v", i, v, want)
		}
	}

	// Real, unrelated mail: none of it reaches the threshold.
	ham := corpusMessages(t, "spamassassin-public-corpus/spamassassin_easy_ham.tar.bz2", 60)
	for i, m := range ham {
		res, err := cl.Send(mtaclient.Envelope{From: "someone@example.org", Rcpts: []string{fmt.Sprintf("reader%d@example.test", i)}}, m)
		if err != nil {
			t.Fatalf("ham %d: %v", i, err)
		}
		if v := verdictOf(t, res); strings.HasPrefix(v, "yes") {
			t.Errorf("unrelated ham message %d tagged: %q", i, v)
		}
	}

	// A sender cannot forge a verdict.
	forged := "X-Bulk: no; forged by sender\n" + string(hashBusterCopy(99, "z@example.test", "Zed", rng))
	res, err := cl.Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{"z@example.test"}}, []byte(forged))
	if err != nil {
		t.Fatal(err)
	}
	var removed bool
	for _, m := range res.Mods {
		if m.Type == milter.ActionChangeHeader && m.HeaderName == "X-Bulk" && m.HeaderIndex == 1 && m.HeaderValue == "" {
			removed = true
		}
	}
	if !removed {
		t.Errorf("forged X-Bulk not removed; modifications: %v", res.Mods)
	}
	if v := verdictOf(t, res); !strings.HasPrefix(v, "yes") {
		t.Errorf("copy after the threshold with a forged header: X-Bulk %q, want yes", v)
	}
	if got := d.metric(t, `bulkmilter_messages_total{verdict="bulk"}`); got < copies-threshold+1 {
		t.Errorf("bulkmilter_messages_total{verdict=bulk} = %v, want at least %d", got, copies-threshold+1)
	}
}

// corpusMessages returns the first n messages of a shared corpus archive.
func corpusMessages(t testing.TB, rel string, n int) [][]byte {
	t.Helper()
	path := filepath.Join(testenv.Corpora(t), rel)
	var out [][]byte
	err := corpus.Options{Limit: n}.Walk(path, func(m *corpus.Message) error {
		out = append(out, m.Data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
