package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// The attacks of issue 22, replayed through the real daemon: what a
// hostile sender tried in order to buy an untagged campaign.

// attackBody is the campaign every attack below sends: one text, many
// copies.
const attackBody = `Spring is the season to prepare your vegetable garden. This week we explain
how to test the soil, when to sow tomatoes and peppers indoors, and how to
protect young seedlings from late frost. Our experts compare raised beds
with traditional rows and recommend compost mixtures for heavy clay soil.
Visit our store for discounted seed collections, organic fertilizer and
durable tools. Members receive free shipping on every order this month,
and our gardeners answer your questions by telephone every weekday morning.
`

// displayNameCopy is copy i of the display-name attack: the recipient's
// display name, in To or (with cc) in Cc, is a different random 40 % of
// the body's words, so that stripping "her name" would delete different
// words from each copy.
func displayNameCopy(i int, rcpt string, cc bool, rng *rand.Rand) []byte {
	var name []string
	for _, w := range strings.Fields(attackBody) {
		if rng.Float64() < 0.4 {
			name = append(name, strings.Trim(w, ".,"))
		}
	}
	to := fmt.Sprintf("To: \"%s\" <%s>\n", strings.Join(name, " "), rcpt)
	if cc {
		to = fmt.Sprintf("To: Garden club <members@garden.example>\nCc: \"%s\" <%s>\n", strings.Join(name, " "), rcpt)
	}
	return []byte(fmt.Sprintf("From: \"Garden Weekly\" <news@garden.example>\n%sSubject: Your spring planting guide\nMessage-ID: <dn-%d@garden.example>\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n%s", to, i, attackBody))
}

// The display-name campaign, through To and through Cc, is tagged from the
// threshold on, exactly: the 40-word names strip nothing, so every copy
// has the same keys. (Before: 30 copies never passed volume 3.)
func TestDisplayNameAttackTagged(t *testing.T) {
	d := startDaemon(t)
	cl := mtaclient.New("tcp", d.milterAddr)
	for _, cc := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(22, 1))
		for i := 1; i <= 30; i++ {
			rcpt := fmt.Sprintf("victim%d-%v@example.test", i, cc)
			res, err := cl.Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{rcpt}}, displayNameCopy(i, rcpt, cc, rng))
			if err != nil {
				t.Fatal(err)
			}
			v := verdictOf(t, res)
			// Through Cc the campaign continues the count the To run
			// began: same text, same keys.
			vol := i
			if cc {
				vol += 30
			}
			if want := fmt.Sprintf("family=imatch; volume=%d", vol); !strings.Contains(v, want) || strings.HasPrefix(v, "yes") != (vol >= 10) {
				t.Errorf("cc=%v, copy %d: X-Bulk %q, want %s and bulk=%v", cc, i, v, want, vol >= 10)
			}
		}
	}
}

// The same campaign through a real Postfix in front of the daemon: the
// delivered copies carry "yes" from the tenth on.
func TestDisplayNameAttackThroughPostfix(t *testing.T) {
	testenv.RequireRoot(t, "Postfix runs its daemons as the postfix user")
	d := startDaemon(t)
	pf := testenv.StartPostfix(t, testenv.PostfixOptions{MilterAddr: d.milterAddr})
	rng := rand.New(rand.NewPCG(22, 2))
	const copies = 25
	for i := 1; i <= copies; i++ {
		rcpt := recipientAddr(i)
		if err := pf.Send("news@garden.example", []string{rcpt}, displayNameCopy(i, rcpt, i%2 == 0, rng)); err != nil {
			t.Fatalf("copy %d: %v\n%s", i, err, pf.Log())
		}
	}
	msgs, err := pf.Sink().WaitFor(copies, 30*time.Second)
	if err != nil {
		t.Fatalf("%v\n%s", err, pf.Log())
	}
	for _, m := range msgs {
		parsed, err := mail.ReadMessage(bytes.NewReader(m.Data))
		if err != nil {
			t.Fatal(err)
		}
		var i int
		if _, err := fmt.Sscanf(parsed.Header.Get("Message-Id"), "<dn-%d@", &i); err != nil {
			t.Fatalf("unexpected Message-ID %q", parsed.Header.Get("Message-Id"))
		}
		v := parsed.Header.Get("X-Bulk")
		if want := fmt.Sprintf("volume=%d", i); !strings.Contains(v, want) || strings.HasPrefix(v, "yes") != (i >= 10) {
			t.Errorf("copy %d delivered with X-Bulk %q, want %s and bulk=%v", i, v, want, i >= 10)
		}
	}
}

// toFloodWithBody is toFlood with a body of bodyBytes of text.
func toFloodWithBody(fields, fieldBytes, bodyBytes int, rcpt string) []byte {
	msg := toFlood(fields, fieldBytes, rcpt)
	rng := rand.New(rand.NewPCG(5, 5))
	var b bytes.Buffer
	for b.Len() < bodyBytes {
		for j := range 12 {
			b.WriteString(randomWord(rng))
			if j < 11 {
				b.WriteByte(' ')
			}
		}
		b.WriteByte('\n')
	}
	return append(msg, b.Bytes()...)
}

// toFlood is a message inside Postfix's defaults (a 10 MB message, header
// fields of about 60 KB: Postfix cuts longer ones) whose header is all
// recipients: fields To: fields of fieldBytes each, about 120,000
// addresses for 160 fields of 60,000 bytes, 9.6 MB.
func toFlood(fields, fieldBytes int, rcpt string) []byte {
	var b bytes.Buffer
	b.WriteString("From: \"Garden Weekly\" <news@garden.example>\nSubject: Your spring planting guide\n")
	n := 0
	for range fields {
		b.WriteString("To: ")
		start := b.Len()
		for b.Len()-start < fieldBytes-40 {
			fmt.Fprintf(&b, "u%06d@flood.example, ", n)
			n++
		}
		b.WriteString("<" + rcpt + ">\n")
	}
	b.WriteString("MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n" + attackBody)
	return b.Bytes()
}

// The 9.6 MB To flood gets the real verdict of its body, which is already
// bulk, in well under a second of the daemon's CPU. (Before: 0.6 to 4.8 s
// of CPU, then "no; error=store-unavailable".) The CPU is the daemon
// process's user and system time (/proc/PID/stat: the counters getrusage
// reports), read before and after the message; the wall time is only
// logged.
func TestToFloodGetsARealVerdict(t *testing.T) {
	d := startDaemon(t)
	pid := d.cmd.Process.Pid
	cl := mtaclient.New("tcp", d.milterAddr)
	for i := 1; i <= 12; i++ { // the campaign is bulk before the flood
		rcpt := fmt.Sprintf("earlier%d@example.test", i)
		raw := []byte("From: news@garden.example\nTo: " + rcpt + "\nSubject: Your spring planting guide\n\n" + attackBody)
		if _, err := cl.Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{rcpt}}, raw); err != nil {
			t.Fatal(err)
		}
	}
	flood := toFlood(160, 60_000, "victim@example.test")
	budget := 500 * time.Millisecond
	if testenv.RaceEnabled {
		budget *= 5 // the race detector slows CPU-bound work 5 to 10 times
	}
	for round := range 3 {
		cpu0, start := cpuTime(t, pid), time.Now()
		res, err := cl.Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{fmt.Sprintf("victim%d@example.test", round)}}, flood)
		cpu, took := cpuTime(t, pid)-cpu0, time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		v := verdictOf(t, res)
		t.Logf("%.1f MB To flood: daemon CPU %s (wall %s, verdict %s after the end): %s", float64(len(flood))/1e6, cpu, took.Round(time.Millisecond), res.Wait.Round(time.Millisecond), v)
		if !strings.HasPrefix(v, "yes; family=") {
			t.Errorf("round %d: X-Bulk %q, want the body's bulk verdict", round, v)
		}
		if cpu > budget {
			t.Errorf("round %d: the daemon spent %s of CPU on it, budget %s", round, cpu, budget)
		}
	}
	if n := d.metric(t, `bulkmilter_store_errors_total{op="observe"}`); n != 0 {
		t.Errorf("store_errors_total = %v: a large message was taken for a store failure", n)
	}
}

// Twenty floods at once, each inside Postfix's limits: first twenty
// header floods (9.6 MB of To fields each), then twenty messages of a
// 5.4 MB header and a 4 MB body of text. Every message gets a verdict, the
// bytes the sessions held are all given back, and the daemon's peak
// resident memory stays under 256 MiB for the header floods and under
// 512 MiB with the bodies (docs/reliability.md has the measured figures:
// about 100 and 300 MiB; the second bound is twice a live set of the 64
// MiB the sessions may hold, two analyses at a time and the milter
// library's body chunks in flight, the collector's default slack).
func TestConcurrentFloodsMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("forty 9.6 MB messages, twenty at a time: the full pass runs it")
	}
	d := startDaemon(t)
	pid := d.cmd.Process.Pid
	cl := mtaclient.New("tcp", d.milterAddr)
	for i := range 20 { // warm up: tables loaded, heap sized
		rcpt := recipientAddr(i)
		if _, err := cl.Send(mtaclient.Envelope{From: "news@garden.example", Rcpts: []string{rcpt}}, campaign(i, rcpt, recipientName(i), rand.New(rand.NewPCG(1, uint64(i))))); err != nil {
			t.Fatal(err)
		}
	}
	base := vmHWM(t, pid)
	scale := int64(1)
	if testenv.RaceEnabled {
		scale = 2 // the race detector's shadow memory
	}
	for _, phase := range []struct {
		name  string
		msg   []byte
		bound int64
	}{
		{"header floods", toFlood(160, 60_000, "victim@example.test"), 256 << 20},
		{"header and body floods", toFloodWithBody(90, 60_000, 4<<20, "victim@example.test"), 512 << 20},
	} {
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for g := range 20 {
			wg.Go(func() {
				res, err := cl.Send(mtaclient.Envelope{From: "attacker@hostile.example", Rcpts: []string{fmt.Sprintf("v%d@example.test", g)}}, phase.msg)
				if err != nil {
					errs <- err
					return
				}
				if v, ok := res.Header("X-Bulk"); !ok || !strings.HasPrefix(v, "no;") && !strings.HasPrefix(v, "yes;") {
					errs <- fmt.Errorf("%s, message %d: X-Bulk %q", phase.name, g, v)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		peak := vmHWM(t, pid)
		t.Logf("20 concurrent %s of %.1f MB: daemon peak RSS %.1f MiB (baseline %.1f MiB, bound %d MiB), %v messages cut for memory so far",
			phase.name, float64(len(phase.msg))/1e6, float64(peak)/(1<<20), float64(base)/(1<<20), scale*phase.bound>>20,
			d.metric(t, "bulkmilter_memory_limited_messages_total"))
		if peak > scale*phase.bound {
			t.Errorf("%s: peak RSS %.1f MiB over the %d MiB bound", phase.name, float64(peak)/(1<<20), scale*phase.bound>>20)
		}
		if held := d.metric(t, "bulkmilter_held_bytes"); held != 0 {
			t.Errorf("%s: held_bytes = %v after every session ended, want 0", phase.name, held)
		}
	}
}
