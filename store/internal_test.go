package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestSlotOf(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for _, tc := range []struct {
		key  string
		slot int
	}{{"123456789", 0x31c3}, {"foo", 12182}, {"bar", 5061}, {"hello", 866}, {"", 0}} {
		if got := slotOf(tc.key); got != tc.slot {
			t.Errorf("slotOf(%q) = %d, want %d", tc.key, got, tc.slot)
		}
	}
}

// Signatures spread over many tags, and a signature's keys share one.
func TestKeySchema(t *testing.T) {
	r := &Redis{prefix: "bm2:", split: 2}
	var err error
	if r.c, err = (Params{}).resolve(); err != nil {
		t.Fatal(err)
	}
	tags := map[string]bool{}
	for i := range 2000 {
		sk := r.sigKeys(fmt.Sprintf("v1:imatch.%d:%016x", i%8, i), 2)
		if len(sk.keys) != 3 {
			t.Fatalf("%d keys, want 3", len(sk.keys))
		}
		for _, k := range sk.keys {
			if !strings.HasPrefix(k, "bm2:{"+sk.tag+"}:") {
				t.Fatalf("key %q outside tag %q", k, sk.tag)
			}
		}
		tags[sk.tag] = true
	}
	if len(tags) < 1800 {
		t.Errorf("2000 signatures used only %d tags", len(tags))
	}
	sk := r.sigKeys("v1:imatch.0:00ab", 2)
	want := []string{":kc:", ":ko:", ":v:v1:imatch.0:00ab"}
	for i, w := range want {
		if !strings.Contains(sk.keys[i], w) {
			t.Errorf("key %d %q: want %q", i, sk.keys[i], w)
		}
	}
	// The pointer strings are named without a bucket: they hold it.
	if strings.Replace(sk.keys[0], ":kc:", ":ko:", 1) != sk.keys[1] || strings.Contains(sk.keys[0], "123") {
		t.Errorf("pointer strings %q, %q", sk.keys[0], sk.keys[1])
	}
	// A campaign's keys share the tag of its ref, whatever the bucket.
	ck, field := r.campKeys(0x1abcdef, 123, 2)
	wantC := []string{"bm2:{0357}:f:1:119", "bm2:{0357}:f:1:123", "bm2:{0357}:x:1abcdef", "bm2:{0357}:c:1abcdef:119", "bm2:{0357}:c:1abcdef:123"}
	for i, w := range wantC {
		if j := []int{0, 4, 5, 6, 10}[i]; ck[j] != w {
			t.Errorf("campaign key %d %q, want %q", j, ck[j], w)
		}
	}
	if field != "\x01\xab\xcd\xef" {
		t.Errorf("campaign field %q", field)
	}
}

func TestHLLAccuracy(t *testing.T) {
	c, _ := Params{}.resolve()
	for _, n := range []int{0, 1, 10, 100, 1000, 10000, 100000} {
		var h hll
		for i := range n {
			h.add(c.pseudonym(fmt.Sprintf("r%d", i)))
		}
		got := h.count()
		tol := math.Max(1, 3*0.0081*float64(n)) // three standard errors
		if math.Abs(float64(got)-float64(n)) > tol {
			t.Errorf("n=%d: count %d, want within ±%.0f", n, got, tol)
		}
	}
	// Union = merge.
	var a, b hll
	for i := range 3000 {
		a.add(c.pseudonym(fmt.Sprint("a", i)))
		b.add(c.pseudonym(fmt.Sprint("b", i)))
		b.add(c.pseudonym(fmt.Sprint("a", i)))
	}
	a.merge(&b)
	if got := a.count(); math.Abs(float64(got)-6000) > 3*0.0081*6000 {
		t.Errorf("union of 3000 and 6000 overlapping: %d, want about 6000", got)
	}
}

func TestWindowArithmetic(t *testing.T) {
	c, err := Params{Window: 24 * time.Hour, Buckets: 4}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 5, 59, 0, 0, time.UTC)
	b := c.bucket(at)
	if c.bucket(at.Add(time.Minute)) != b+1 {
		t.Errorf("bucket boundary at 06:00 not crossed")
	}
	// A bucket's keys live until its last window ends (4 buckets later),
	// plus grace.
	if got, want := c.ttl(at, b), time.Minute+24*time.Hour+5*time.Minute; got != want {
		t.Errorf("ttl %v, want %v", got, want)
	}
	if c.bucket(time.UnixMilli(-1)) != -1 {
		t.Errorf("bucket before 1970: %d, want -1", c.bucket(time.UnixMilli(-1)))
	}
	for _, p := range []Params{{Window: time.Millisecond}, {Buckets: 25}, {ExactLimit: -1}, {VoteHorizon: time.Nanosecond}} {
		if _, err := p.resolve(); err == nil {
			t.Errorf("params %+v: no error", p)
		}
	}
}

func TestClassify(t *testing.T) {
	unavailable := []error{
		context.DeadlineExceeded,
		fmt.Errorf("x: %w", context.Canceled),
		io.EOF,
		&net.OpError{Op: "dial", Err: errors.New("connect: connection refused")},
		redis.ErrClosed,
		redis.ErrPoolTimeout,
		errors.New("LOADING Redis is loading the dataset in memory"),
		errors.New("CLUSTERDOWN The cluster is down"),
		errors.New("BUSY Redis is busy running a script"),
		errors.New("READONLY You can't write against a read only replica."),
		errors.New("OOM command not allowed when used memory > 'maxmemory'."),
	}
	for _, e := range unavailable {
		if !errors.Is(classify(e), ErrUnavailable) {
			t.Errorf("classify(%v): not ErrUnavailable", e)
		}
	}
	for _, e := range []error{errors.New("ERR unknown command"), errors.New("WRONGTYPE Operation against a key"), errors.New("WRONGPASS invalid username-password pair")} {
		if errors.Is(classify(e), ErrUnavailable) {
			t.Errorf("classify(%v): ErrUnavailable, want a plain error", e)
		}
	}
}

// newEmbedded opens an embedded store on dir/state with a fixed clock.
func newEmbedded(t *testing.T, dir string, now time.Time, mod func(*EmbeddedOptions)) (*Embedded, error) {
	t.Helper()
	o := EmbeddedOptions{Path: filepath.Join(dir, "state"), SaveInterval: -1}
	o.Now = func() time.Time { return now }
	if mod != nil {
		mod(&o)
	}
	return OpenEmbedded(o)
}

// reopen closes e and opens its file in dir again at now, closed when the
// test ends.
func reopen(t *testing.T, e *Embedded, dir string, now time.Time) *Embedded {
	t.Helper()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err := newEmbedded(t, dir, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func fill(t *testing.T, e *Embedded, at time.Time) {
	t.Helper()
	ctx := context.Background()
	for i := range 50 {
		rs := []string{fmt.Sprintf("r%d@x", i)}
		if i%10 == 0 {
			rs = append(rs, fmt.Sprintf("s%d@x", i))
		}
		if _, err := e.Observe(ctx, Observation{Keys: []string{fmt.Sprint("k", i), "shared"}, Recipients: rs, Time: at}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Observe(ctx, Observation{Keys: []string{"big"}, Recipients: manyRcpts(500), Time: at}); err != nil {
		t.Fatal(err)
	}
	// Three votes: on k1, on k2 and on their campaign.
	if err := e.RecordVote(ctx, Vote{Keys: []string{"k1", "k2"}, Voter: "alice@x", Kind: VoteNotBulk, Time: at}); err != nil {
		t.Fatal(err)
	}
}

func manyRcpts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%d@x", i)
	}
	return out
}

func TestEmbeddedFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	e, err := newEmbedded(t, dir, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, e, now)
	before := e.Stats()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "state.tmp-*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
	e, err = newEmbedded(t, dir, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	after := e.Stats()
	if before.FirstSightings != after.FirstSightings || before.Counters != after.Counters || before.Votes != after.Votes ||
		before.Entries != after.Entries || before.Pointers != after.Pointers || before.Campaigns != after.Campaigns {
		t.Errorf("stats before %+v, after %+v", before, after)
	}
	var vols []int64
	for _, k := range []string{"big", "k10"} {
		res, err := e.Observe(context.Background(), Observation{Keys: []string{k}, Time: now})
		if err != nil {
			t.Fatal(err)
		}
		vols = append(vols, res.Volumes[0])
	}
	res, err := e.Observe(context.Background(), Observation{Keys: []string{"k1"}, Recipients: []string{"alice@x"}, Time: now})
	if err != nil {
		t.Fatal(err)
	}
	// "shared" is half of every message's keys: the 50 messages are one
	// campaign of 55 recipients.
	if math.Abs(float64(vols[0]-500)) > 15 || vols[1] != 55 || res.Volumes[0] != 56 {
		t.Errorf("volumes after reload %v %v, want ~500, 55, 56", vols, res.Volumes)
	}
	if res.UserVotes["alice@x"] != VoteNotBulk {
		t.Errorf("alice's vote lost: %v", res.UserVotes)
	}
}

// damage saves a filled store, alters its file, and reopens it.
func damage(t *testing.T, alter func(b []byte) []byte) (*Embedded, string, error) {
	t.Helper()
	dir := t.TempDir()
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	e, err := newEmbedded(t, dir, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, e, now)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "state")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, alter(b), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err = newEmbedded(t, dir, now, nil)
	if e != nil {
		t.Cleanup(func() { e.Close() })
	}
	return e, dir, err
}

// chunkOffset finds the first chunk of a kind in a state file.
func chunkOffset(t *testing.T, b []byte, kind byte) int {
	off := len(fileMagic) + 4 + 8 + 4 + 8 + 8 + 4
	for off+5 <= len(b) {
		n := int(b[off+1]) | int(b[off+2])<<8 | int(b[off+3])<<16 | int(b[off+4])<<24
		if b[off] == kind {
			return off
		}
		off += 5 + n + 4
	}
	t.Fatalf("no chunk of kind %d", kind)
	return 0
}

func TestEmbeddedDamagedFile(t *testing.T) {
	tests := []struct {
		name      string
		alter     func(t *testing.T, b []byte) []byte
		votesKept bool
		lost      string
	}{
		{"flipped byte in counters", func(t *testing.T, b []byte) []byte {
			b[chunkOffset(t, b, chunkCounters)+20] ^= 0xff
			return b
		}, true, "votes were read in full"},
		{"flipped byte in votes", func(t *testing.T, b []byte) []byte {
			b[chunkOffset(t, b, chunkVotes)+8] ^= 0x01
			return b
		}, false, "votes and counts were lost"},
		{"truncated", func(t *testing.T, b []byte) []byte { return b[:len(b)-7] }, true, "votes were read in full"},
		{"bad header", func(t *testing.T, b []byte) []byte { b[13] ^= 1; return b }, false, "nothing was read"},
		{"not ours", func(t *testing.T, b []byte) []byte { return []byte("hello world, this is not a store") }, false, "nothing was read"},
		{"empty", func(t *testing.T, b []byte) []byte { return nil }, false, "nothing was read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, dir, err := damage(t, func(b []byte) []byte { return tc.alter(t, b) })
			var ce *CorruptFileError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *CorruptFileError", err)
			}
			if e == nil {
				t.Fatal("no store returned with the CorruptFileError")
			}
			if !strings.Contains(ce.Lost, tc.lost) {
				t.Errorf("lost %q, want it to say %q", ce.Lost, tc.lost)
			}
			if _, err := os.Stat(ce.MovedTo); err != nil {
				t.Errorf("damaged file not kept at %s: %v", ce.MovedTo, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "state")); !os.IsNotExist(err) {
				t.Errorf("damaged file still at its path: %v", err)
			}
			_, votes := e.votes.size()
			if got := votes == 3; got != tc.votesKept {
				t.Errorf("votes held after damage: %d, want kept=%v", votes, tc.votesKept)
			}
			// The store works and saves a clean file.
			if _, err := e.Observe(context.Background(), Observation{Keys: []string{"k"}, Recipients: []string{"a@x"}}); err != nil {
				t.Fatal(err)
			}
			if err := e.Save(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestEmbeddedUnreadablePath(t *testing.T) {
	dir := t.TempDir()
	// A directory where the file should be: unreadable as a file.
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	e, err := newEmbedded(t, dir, time.Now(), nil)
	var ce *CorruptFileError
	if !errors.As(err, &ce) || e == nil {
		t.Fatalf("got %v, %v; want a store and a *CorruptFileError", e, err)
	}
	defer e.Close()
	if fi, err := os.Stat(ce.MovedTo); err != nil || !fi.IsDir() {
		t.Errorf("the directory was not moved aside: %v", err)
	}
}

func TestEmbeddedParamsChangeKeepsVotes(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	e, _ := newEmbedded(t, dir, now, nil)
	fill(t, e, now)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err := newEmbedded(t, dir, now, func(o *EmbeddedOptions) { o.Window = 12 * time.Hour })
	if err != nil {
		t.Fatalf("reopen with another window: %v", err)
	}
	defer e.Close()
	st := e.Stats()
	if st.FirstSightings != 0 || st.Counters != 0 || st.Votes != 3 {
		t.Errorf("after a window change: %+v; want counts dropped, 3 votes kept", st)
	}
}

func TestEmbeddedSaveFailure(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o700)
	var calls []string
	e, err := newEmbedded(t, sub, time.Now(), func(o *EmbeddedOptions) {
		o.Observer = observerFunc(func(op string, d time.Duration, err error) {
			if op == "save" {
				calls = append(calls, fmt.Sprint(err))
			}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(sub)
	if err := e.Save(); err == nil {
		t.Fatal("save into a removed directory: no error")
	}
	if st := e.Stats(); st.LastSaveError == nil {
		t.Error("Stats().LastSaveError is nil after a failed save")
	}
	if len(calls) != 1 || calls[0] == "<nil>" {
		t.Errorf("observer saw %v, want one failed save", calls)
	}
	if err := e.Close(); err == nil {
		t.Error("Close: no error although the final save failed")
	}
}

type observerFunc func(op string, d time.Duration, err error)

func (f observerFunc) ObserveRequest(op string, d time.Duration, err error) { f(op, d, err) }

func TestEmbeddedEviction(t *testing.T) {
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	e, err := OpenEmbedded(EmbeddedOptions{MaxEntries: 64 * 100, Params: Params{Now: func() time.Time { return now }}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	// 20000 first sightings spread over 5 buckets: far more than 6400.
	for i := range 20000 {
		at := now.Add(time.Duration(i/4000) * 6 * time.Hour)
		if _, err := e.Observe(ctx, Observation{Keys: []string{fmt.Sprint("s", i)}, Recipients: []string{"a@x"}, Time: at}); err != nil {
			t.Fatal(err)
		}
	}
	st := e.Stats()
	if st.Evicted == 0 {
		t.Error("nothing evicted")
	}
	if st.Entries > 64*100 {
		t.Errorf("entries %d above the limit %d", st.Entries, 64*100)
	}
	// The newest sightings survive.
	last := now.Add(4 * 6 * time.Hour)
	res, _ := e.Observe(ctx, Observation{Keys: []string{"s19999"}, Time: last})
	if res.Volumes[0] != 1 {
		t.Errorf("newest sighting evicted: volume %d", res.Volumes[0])
	}
	// Votes are never evicted.
	if err := e.RecordVote(ctx, Vote{Keys: []string{"s1"}, Voter: "v@x", Kind: VoteBulk}); err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		e.Observe(ctx, Observation{Keys: []string{fmt.Sprint("t", i)}, Recipients: []string{"a@x"}, Time: last})
	}
	if _, v := e.votes.size(); v != 1 {
		t.Errorf("votes after eviction pressure: %d, want 1", v)
	}
}

func TestEmbeddedSweep(t *testing.T) {
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	clock := now
	e, err := OpenEmbedded(EmbeddedOptions{Params: Params{Window: time.Hour, Buckets: 2, VoteHorizon: 2 * time.Hour, Now: func() time.Time { return clock }}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	e.Observe(ctx, Observation{Keys: []string{"a"}, Recipients: []string{"x@x"}})
	e.Observe(ctx, Observation{Keys: []string{"b"}, Recipients: manyRcpts(300)})
	e.Observe(ctx, Observation{Keys: []string{"c"}, Recipients: manyRcpts(3)})
	e.RecordVote(ctx, Vote{Keys: []string{"a"}, Voter: "v@x", Kind: VoteBulk})
	clock = now.Add(90 * time.Minute) // window + one bucket
	e.sweep(clock)
	st := e.Stats()
	// The vote on "a" and on its campaign.
	if st.FirstSightings != 0 || st.Counters != 0 || st.Entries != 0 || st.Votes != 2 {
		t.Errorf("after the window: %+v; want no counts, the votes kept", st)
	}
	clock = now.Add(3 * time.Hour)
	e.sweep(clock)
	if st := e.Stats(); st.Votes != 0 || st.VotedKeys != 0 {
		t.Errorf("after the vote horizon: %+v", st)
	}
}

// fillSeedState gives the fuzz targets' seed store records of each kind:
// pointers of the bucket before (packed when this one is written),
// campaigns of one and of several messages, one of 20 recipients, a vote.
func fillSeedState(e *Embedded, now time.Time) {
	ctx := context.Background()
	for i := range 40 {
		// The support families' keys in their own ring (chunks 9, 10).
		e.Observe(ctx, Observation{Keys: []string{fmt.Sprint("old", i), fmt.Sprint("s:terms.0:old", i), fmt.Sprint("s:contain.1:old", i)}, Recipients: []string{"x@x"}, Time: now.Add(-6 * time.Hour)})
		e.Observe(ctx, Observation{Keys: []string{fmt.Sprint("new", i), fmt.Sprint("s:terms.0:new", i)}, Recipients: []string{"x@x"}, Time: now})
	}
	// Buckets read from a version 4 file (chunk 11).
	e.mixedUpTo.Store(e.c.bucket(now))
	e.Observe(ctx, Observation{Keys: []string{"a", "b"}, Recipients: []string{"x@x"}, Time: now})
	e.Observe(ctx, Observation{Keys: []string{"b"}, Recipients: []string{"y@x", "z@x"}, Time: now})
	e.Observe(ctx, Observation{Keys: []string{"c"}, Recipients: manyRcpts(20), Time: now})
	e.RecordVote(ctx, Vote{Keys: []string{"a"}, Voter: "v@x", Kind: VoteBulk, Time: now})
	// A stored merge (chunk 12).
	mergeParts3(e, now)
}

// mergeParts3 observes two parts of one campaign, A and B, and a copy
// naming A strongly and B through an I-Match key (the stored merge,
// model.go), as storetest's aliasParts; it returns the keys of a copy
// naming B alone.
func mergeParts3(e *Embedded, now time.Time) []string {
	ctx := context.Background()
	k := func(f string, i int, v int) string { return fmt.Sprintf("v1:%s.%d:%016x", f, i, v) }
	e.Observe(ctx, Observation{Keys: []string{k("imatch", 0, 0xa0), k("imatch", 1, 0xa1), k("imatch", 2, 0xa2),
		k("shingle", 0, 0xb0), k("shingle", 1, 0xb1), k("shingle", 2, 0xb2)}, Recipients: []string{"a1@x", "a2@x"}, Time: now})
	e.Observe(ctx, Observation{Keys: []string{k("imatch", 0, 0xc0), k("imatch", 1, 0xc1), k("imatch", 2, 0xc2),
		k("shingle", 0, 0xd0), k("shingle", 1, 0xd1), k("shingle", 2, 0xd2)}, Recipients: []string{"b1@x", "b2@x"}, Time: now})
	e.Observe(ctx, Observation{Keys: []string{k("imatch", 0, 0xa0), k("imatch", 1, 0xa1), k("imatch", 2, 0xc2),
		k("shingle", 0, 0xb0), k("shingle", 1, 0xd1), k("shingle", 2, 0x30)}, Recipients: []string{"u@x"}, Time: now})
	return []string{k("imatch", 0, 0xc0), k("imatch", 1, 0xc1), k("shingle", 0, 0xd0)}
}

// TestEmbeddedAliasSavedAndRefHeld: the stored merge survives a save and
// a load (chunk 12), and a ref a live alias names is never given to a new
// campaign (freeRef), even once the part's record is gone; the alias
// leaves with the window.
func TestEmbeddedAliasSavedAndRefHeld(t *testing.T) {
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state")
	o := EmbeddedOptions{Path: path, SaveInterval: -1, Params: Params{Now: func() time.Time { return now }}}
	e, err := OpenEmbedded(o)
	if err != nil {
		t.Fatal(err)
	}
	bKeys := mergeParts3(e, now)
	before, err := e.Observe(ctx, Observation{Keys: bKeys, Time: now})
	if err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.Aliases != 1 || before.Campaign.Recipients != 5 {
		t.Fatalf("after the merge: %d aliases, a read of B's keys %+v; want 1 and the root with 5 recipients", st.Aliases, before.Campaign)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err = OpenEmbedded(o)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	after, err := e.Observe(ctx, Observation{Keys: bKeys, Time: now})
	if err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.Aliases != 1 || !reflect.DeepEqual(after.Campaign, before.Campaign) {
		t.Fatalf("loaded: %d aliases, a read of B's keys %+v; want 1 and %+v", st.Aliases, after.Campaign, before.Campaign)
	}
	var part uint32
	for ref := range e.aliases.root {
		part = ref
	}
	// The part's record gone (as eviction does): its ref is still held.
	cb := e.c.bucket(now)
	sh := e.shard(campaignSig(part))
	sh.mu.Lock()
	delete(sh.camps, part)
	delete(sh.ctr, campaignSig(part))
	sh.mu.Unlock()
	if got := e.freeRef(part, 12345, cb); got == part {
		t.Errorf("freeRef(%08x) = the aliased ref, want another", part)
	}
	// Past the window the alias is gone, and the ref free.
	later := cb + int64(e.c.nb)
	e.sweep(now.Add(time.Duration(e.c.nb) * e.c.bucketLen))
	if n := e.Stats().Aliases; n != 0 {
		t.Errorf("past the window: %d aliases, want 0", n)
	}
	if got := e.freeRef(part, 12345, later); got != part {
		t.Errorf("past the window: freeRef(%08x) = %08x, want the ref itself", part, got)
	}
}

func FuzzLoadState(f *testing.F) {
	dir := f.TempDir()
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	o := EmbeddedOptions{Path: filepath.Join(dir, "seed"), SaveInterval: -1, Params: Params{Now: func() time.Time { return now }}}
	e, err := OpenEmbedded(o)
	if err != nil {
		f.Fatal(err)
	}
	fillSeedState(e, now)
	ctx := context.Background()
	if err := e.Close(); err != nil {
		f.Fatal(err)
	}
	seed, _ := os.ReadFile(o.Path)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		d := t.TempDir()
		p := filepath.Join(d, "state")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		o := EmbeddedOptions{Path: p, SaveInterval: -1, Params: Params{Now: func() time.Time { return now }}}
		e, err := OpenEmbedded(o)
		var ce *CorruptFileError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("unexpected error: %v", err)
		}
		if e == nil {
			t.Fatal("no store")
		}
		// Whatever was loaded is usable and saves.
		if _, err := e.Observe(ctx, Observation{Keys: []string{"a", "b", "c"}, Recipients: []string{"q@x"}, Time: now}); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFSTable(t *testing.T) {
	var tb fsTable
	ref := map[uint64]uint32{}
	rng := uint64(1)
	next := func() uint64 { rng = mix64(rng + 0x9e3779b97f4a7c15); return rng }
	keys := []uint64{0, 1} // 0 is stored as 1: they are one key
	for range 20000 {
		keys = append(keys, next()%50000)
	}
	for i, k := range keys {
		switch next() % 3 {
		case 0, 1:
			fp := uint32(i)
			if fresh := tb.put(k, fp); fresh != !has(ref, fsKey(k)) {
				t.Fatalf("put(%d): new=%v, reference disagrees", k, fresh)
			}
			ref[fsKey(k)] = fp
		case 2:
			_, want := ref[fsKey(k)]
			if got := tb.del(k); got != want {
				t.Fatalf("del(%d) = %v, want %v", k, got, want)
			}
			delete(ref, fsKey(k))
		}
		if tb.n != len(ref) {
			t.Fatalf("size %d, reference %d", tb.n, len(ref))
		}
	}
	for k, fp := range ref {
		if got, ok := tb.get(k); !ok || got != fp {
			t.Fatalf("get(%d) = %d, %v; want %d", k, got, ok, fp)
		}
	}
	n := 0
	tb.each(func(sig uint64, fp uint32) {
		n++
		if ref[sig] != fp {
			t.Fatalf("each: %d → %d, want %d", sig, fp, ref[sig])
		}
	})
	if n != len(ref) {
		t.Errorf("each visited %d, want %d", n, len(ref))
	}
	if _, ok := tb.get(123456789); ok {
		t.Error("absent key found")
	}
}

func has(m map[uint64]uint32, k uint64) bool { _, ok := m[k]; return ok }

// The first recipient of a promoted key is known by its fingerprint and
// must not count twice when it comes back (embedded, as in Redis).
func TestEmbeddedFirstRecipientComesBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	e, err := OpenEmbedded(EmbeddedOptions{Path: path, SaveInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()
	ctx := context.Background()
	for i, step := range []struct {
		rs   []string
		want int64
	}{{[]string{"a@x"}, 1}, {[]string{"b@x"}, 2}, {[]string{"a@x"}, 2}, {[]string{"c@x", "a@x"}, 3}} {
		if i == 2 { // the placeholder for a@x goes through the file
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if e, err = OpenEmbedded(EmbeddedOptions{Path: path, SaveInterval: -1}); err != nil {
				t.Fatal(err)
			}
		}
		res, err := e.Observe(ctx, Observation{Keys: []string{"k"}, Recipients: step.rs})
		if err != nil || res.Volumes[0] != step.want {
			t.Errorf("step %d %v: %v, %v; want %d", i, step.rs, res.Volumes, err, step.want)
		}
	}
}

// BenchmarkEmbeddedLoad: reading a state file of 4M first sightings (the
// store of about 150,000 messages a day at 27 keys).
func BenchmarkEmbeddedLoad(b *testing.B) {
	const n = 4 << 20
	dir := b.TempDir()
	now := time.Now()
	o := EmbeddedOptions{Path: filepath.Join(dir, "s"), SaveInterval: -1, MaxEntries: 1 << 30, Params: Params{Now: func() time.Time { return now }}}
	e, err := OpenEmbedded(o)
	if err != nil {
		b.Fatal(err)
	}
	cb := e.c.bucket(now)
	for i := range n {
		ref := uint32(i)
		sh := e.shard(campaignSig(ref))
		sh.mu.Lock()
		e.recPut(sh, cb-int64(i%4), fsRec{key: ref | recUsed, fp: uint32(i), first: uint32(now.Unix())})
		sh.mu.Unlock()
	}
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		e, err := OpenEmbedded(o)
		if err != nil {
			b.Fatal(err)
		}
		if got := e.Stats().FirstSightings; got != n {
			b.Fatalf("loaded %d, want %d", got, n)
		}
		e.path = "" // do not rewrite the file
		e.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/entry")
}

// The script repeats model.go's constants: they must agree.
func TestScriptConstants(t *testing.T) {
	// SupportAlone and ContainAlone reach the script with each family's
	// number (redis.go, prepare); TestStoresAgree holds the two to them.
	want := fmt.Sprintf("local UNIT, JOINEV, SHARE, WEAKSHARE, WEAKCAP = %d, %d, %d, %d, %d",
		evidenceUnit, JoinEvidence, JoinShare, WeakShare, WeakCap)
	if !strings.Contains(scriptSrc, want) {
		t.Errorf("script.lua does not hold %q", want)
	}
	if u := fmt.Sprintf("local USHARE, UKEYS, UMAX = %d, %d, %d", UnionShare, UnionKeys, UnionMax); !strings.Contains(scriptSrc, u) {
		t.Errorf("script.lua does not hold %q", u)
	}
	if w := fmt.Sprintf("local SWHOLE = %d", supportWhole); !strings.Contains(scriptSrc, w) {
		t.Errorf("script.lua does not hold %q", w)
	}
	if !strings.Contains(scriptSrc, fmt.Sprintf("local REFMASK = %d", refMask)) ||
		!strings.Contains(scriptSrc, fmt.Sprintf("local SETCAP = %d", CampaignSetCap)) {
		t.Error("script.lua's REFMASK or SETCAP differ from model.go's")
	}
}

// TestDecideSupportFamily: a term-set key tips the choice between
// campaigns other families name, but names a campaign alone only with
// SupportAlone keys; containment keys with ContainAlone, line keys with
// LinesAlone, or containment and line keys together when their shares of
// those sum to one (supportWhole); term-set keys add to neither.
func TestDecideSupportFamily(t *testing.T) {
	at := func(ref uint32) keyPtr { return keyPtr{found: true, p: makePtr(ref, 0)} }
	none := keyPtr{}
	contain := func(n int) []string { return slices.Repeat([]string{"contain"}, n) }
	lines := func(n int) []string { return slices.Repeat([]string{"lines"}, n) }
	// repeat returns n keys, the first k pointing as p, the rest to nothing.
	repeat := func(p keyPtr, k, n int) []keyPtr {
		out := make([]keyPtr, n)
		for i := range k {
			out[i] = p
		}
		return out
	}
	for _, c := range []struct {
		name string
		fams []string
		ptrs []keyPtr
		join bool
		ref  uint32
	}{
		{"one terms key alone", []string{"terms", "terms", "terms", "imatch"}, []keyPtr{at(5), none, none, none}, false, 99},
		{"two terms keys alone", []string{"terms", "terms", "terms", "imatch"}, []keyPtr{at(5), at(5), none, none}, true, 5},
		{"two terms keys, different campaigns", []string{"terms", "terms", "terms"}, []keyPtr{at(5), at(6), none}, false, 99},
		{"a tie of shingles goes to the lower ref", []string{"shingle", "shingle", "terms"}, []keyPtr{at(3), at(9), none}, true, 3},
		{"one terms key tips the tie", []string{"shingle", "shingle", "terms"}, []keyPtr{at(3), at(9), at(9)}, true, 9},
		{"one terms key beside another family's", []string{"sift", "terms", "terms"}, []keyPtr{at(4), at(4), none}, true, 4},
		{"contain keys alone, one short", contain(ContainAlone + 2), repeat(at(7), ContainAlone-1, ContainAlone+2), false, 99},
		{"contain keys alone, enough", contain(ContainAlone + 2), repeat(at(7), ContainAlone, ContainAlone+2), true, 7},
		{"one contain key beside another family's", append([]string{"shingle"}, contain(ContainAlone)...), append([]keyPtr{at(4)}, repeat(at(4), 1, ContainAlone)...), true, 4},
		{"lines keys alone, one short", lines(LinesAlone + 5), repeat(at(7), LinesAlone-1, LinesAlone+5), false, 99},
		{"lines keys alone, enough but a minority", lines(LinesAlone + 5), repeat(at(7), LinesAlone, LinesAlone+5), false, 99},
		{"lines keys alone, enough and half", lines(2 * LinesAlone), repeat(at(7), LinesAlone, 2*LinesAlone), true, 7},
		{"lines keys, a minority, do not tip another family's tie", append([]string{"shingle", "shingle"}, lines(LinesAlone+5)...), append([]keyPtr{at(3), at(7)}, repeat(at(7), LinesAlone, LinesAlone+5)...), true, 3},
		{"lines keys, half, tip another family's tie", append([]string{"shingle", "shingle"}, lines(2*LinesAlone)...), append([]keyPtr{at(3), at(7)}, repeat(at(7), LinesAlone, 2*LinesAlone)...), true, 7},
		{"contain and lines keys, each short, count together", append(contain(ContainAlone/2), lines(LinesAlone)...), append(repeat(at(6), ContainAlone/2, ContainAlone/2), repeat(at(6), LinesAlone-1, LinesAlone)...), true, 6},
		{"contain and lines keys together, one short", append(contain(ContainAlone/2), lines(LinesAlone-1)...), append(repeat(at(6), ContainAlone/2, ContainAlone/2), repeat(at(6), LinesAlone-2, LinesAlone-1)...), false, 99},
		{"lines keys under their share do not count together", append(contain(ContainAlone-1), lines(3*LinesAlone)...), append(repeat(at(6), ContainAlone-1, ContainAlone-1), repeat(at(6), LinesAlone-1, 3*LinesAlone)...), false, 99},
		{"support keys naming different campaigns do not add", append(contain(ContainAlone-1), "terms", "terms"), append(repeat(at(6), ContainAlone-1, ContainAlone-1), at(7), none), false, 99},
		{"term-set keys do not add to contain keys", append(contain(ContainAlone/2), "terms", "terms", "terms"), append(repeat(at(6), ContainAlone/2, ContainAlone/2), at(6), none, none), false, 99},
		{"contain keys do not add to a term-set key", append(contain(ContainAlone-1), "terms", "terms", "terms"), append(repeat(at(6), ContainAlone-1, ContainAlone-1), at(6), none, none), false, 99},
		{"two terms keys do not lend contain keys their count", append([]string{"terms", "terms"}, contain(ContainAlone)...), append([]keyPtr{at(8), at(8)}, repeat(at(8), ContainAlone-1, ContainAlone)...), true, 8},
	} {
		d := decide(c.fams, familyCounts(c.fams), c.ptrs, 99, 0)
		if d.join != c.join || d.ref != c.ref {
			t.Errorf("%s: join %v ref %d, want %v %d", c.name, d.join, d.ref, c.join, c.ref)
		}
	}
}

// TestDecideSpreadLines: line keys under LinesShare of the message's name
// a campaign, strongly, only from LinesAlone keys and LinesSpread of the
// message's, when none of them was written by the message's sender (the
// class a line key keeps).
func TestDecideSpreadLines(t *testing.T) {
	const snd = 1
	mine, other := senderClass(snd), senderClass(2)
	// offer returns the families and pointers of a message with n line
	// keys, k of them naming campaign 7 (the first of them written by
	// sender class first, the others by class rest), and four other
	// families' keys that name nothing.
	offer := func(k, n int, first, rest uint8) ([]string, []keyPtr) {
		fams := []string{"imatch", "shingle", "charshingle", "sift"}
		ptrs := make([]keyPtr, len(fams), len(fams)+n)
		for i := range n {
			fams = append(fams, "lines")
			p := keyPtr{}
			if i < k {
				c := rest
				if i == 0 {
					c = first
				}
				p = keyPtr{found: true, p: makePtr(7, 0).withClass(c)}
			}
			ptrs = append(ptrs, p)
		}
		return fams, ptrs
	}
	spreadK := (LinesSpread*16 + 99) / 100 // the fewest of 16 at LinesSpread
	for _, c := range []struct {
		name        string
		k, n        int
		first, rest uint8
		snd         uint16
		join        bool
	}{
		{"other senders", LinesAlone, 16, other, other, snd, true},
		{"lines of no known sender", LinesAlone, 16, 0, 0, snd, true},
		{"other senders, the fewest at LinesSpread", max(LinesAlone, spreadK), 16, other, other, snd, true},
		{"other senders, under LinesSpread", LinesAlone, 100 * LinesAlone / LinesSpread * 2, other, other, snd, false},
		{"other senders, one short of LinesAlone", LinesAlone - 1, LinesAlone + 1, other, other, snd, false},
		{"the message's sender wrote them", LinesAlone, 16, mine, mine, snd, false},
		{"the message's sender wrote one of them", LinesAlone, 16, mine, other, snd, false},
		{"no sender known", LinesAlone, 16, other, other, 0, false},
	} {
		fams, ptrs := offer(c.k, c.n, c.first, c.rest)
		d := decide(fams, familyCounts(fams), ptrs, 99, c.snd)
		if d.join != c.join || (c.join && (d.ref != 7 || d.weak)) {
			t.Errorf("%s: join %v ref %d weak %v, want join %v", c.name, d.join, d.ref, d.weak, c.join)
		}
		// the message's line keys then keep its sender's class, its
		// other keys the campaign's
		for i, f := range fams {
			np, _ := repoint(ptrs[i], d, f, false)
			want := d.cls
			if f == "lines" {
				want = senderClass(c.snd)
			}
			if np.class() != want {
				t.Errorf("%s: key %d (%s) class %d, want %d", c.name, i, f, np.class(), want)
			}
		}
	}
}

// A campaign's networks and senders, kept inline for the first and in
// eshard.sets past it, survive a restart.
func TestEmbeddedCampaignSetsPersist(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	ctx := context.Background()
	obs := func(e *Embedded, i int, net, snd string) Campaign {
		t.Helper()
		res, err := e.Observe(ctx, Observation{Keys: []string{"s:imatch.0:a", "s:imatch.1:b"}, Recipients: []string{fmt.Sprint("r", i, "@x")},
			Time: now.Add(time.Duration(i) * time.Minute), Network: net, Sender: snd})
		if err != nil {
			t.Fatal(err)
		}
		return res.Campaign
	}
	e, _ := newEmbedded(t, dir, now, nil)
	tests := []struct {
		net, snd   string
		nets, snds int64
	}{
		{"", "", 0, 0},
		{"", "a@x", 0, 1},
		{"192.0.2.0/24", "a@x", 1, 1},
		{"192.0.2.0/24", "b@x", 1, 2},
		{"198.51.100.0/24", "", 2, 2},
	}
	for i, tc := range tests {
		if c := obs(e, i, tc.net, tc.snd); c.Networks != tc.nets || c.Senders != tc.snds {
			t.Errorf("message %d: %d networks, %d senders; want %d, %d", i, c.Networks, c.Senders, tc.nets, tc.snds)
		}
	}
	e = reopen(t, e, dir, now)
	if c := obs(e, 9, "203.0.113.0/24", "a@x"); c.Networks != 3 || c.Senders != 2 || c.Recipients != 6 {
		t.Errorf("after a restart: %+v; want 6 recipients, 3 networks, 2 senders", c)
	}
	// One network and one sender, inline, survive too.
	dir2 := t.TempDir()
	e2, _ := newEmbedded(t, dir2, now, nil)
	obs(e2, 0, "192.0.2.0/24", "a@x")
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	e2, _ = newEmbedded(t, dir2, now, nil)
	defer e2.Close()
	if c := obs(e2, 1, "", ""); c.Networks != 1 || c.Senders != 1 || c.Recipients != 2 {
		t.Errorf("one network and sender after a restart: %+v; want 2 recipients, 1 network, 1 sender", c)
	}
}

// A closed bucket's pointers are packed (denseTable) once a newer bucket
// is written; they are found, updated in place, take late writes and
// survive a restart.
func TestEmbeddedPackedPointers(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 2, 0, 30, 0, 0, time.UTC)
	t1 := t0.Add(6 * time.Hour) // the next bucket
	ctx := context.Background()
	keys := func(i int) []string {
		var ks []string
		for k := range 5 {
			ks = append(ks, fmt.Sprintf("s:imatch.%d:%x", k, i*10+k))
		}
		return ks
	}
	obs := func(e *Embedded, at time.Time, ks []string, rcpt string) Campaign {
		t.Helper()
		res, err := e.Observe(ctx, Observation{Keys: ks, Recipients: []string{rcpt}, Time: at})
		if err != nil {
			t.Fatal(err)
		}
		return res.Campaign
	}
	e, _ := newEmbedded(t, dir, t1, nil)
	ids := map[int]uint32{}
	for i := range 400 { // 300 copied in the next bucket, 100 not
		ids[i] = obs(e, t0, keys(i), fmt.Sprint("a", i, "@x")).ID
	}
	for i := 1000; i < 1300; i++ { // every shard writes the next bucket
		obs(e, t1, keys(i), "b@x")
	}
	packedN := 0
	for i := range e.ptrs {
		for _, slot := range e.ptrs[i].tabs {
			if slot.d != nil {
				packedN += slot.d.len()
			}
		}
	}
	if packedN != 400*5 {
		t.Fatalf("%d pointers packed, want the first bucket's %d", packedN, 400*5)
	}
	for i := range 300 {
		if c := obs(e, t1, keys(i), fmt.Sprint("c", i, "@x")); c.ID != ids[i] || c.Recipients != 2 || len(c.Joined) != 5 {
			t.Fatalf("copy %d in the next bucket: %+v, want campaign %08x of 2 joined by 5 keys", i, c, ids[i])
		}
	}
	// A late message into the packed bucket: a key it already has is
	// updated in place, a new one goes beside.
	late := append(keys(7), "s:imatch.9:late")
	if c := obs(e, t0.Add(time.Minute), late, "d@x"); c.ID != ids[7] {
		t.Fatalf("late copy: %+v, want %08x", c, ids[7])
	}
	e = reopen(t, e, dir, t1)
	// The first bucket's (packed, and the late key), the next bucket's
	// (the other messages', the copies' rewritten there).
	if st := e.Stats(); st.Pointers != 2000+1+1500+1500 {
		t.Errorf("after a restart: %d pointers, want %d", st.Pointers, 2000+1+1500+1500)
	}
	for _, i := range []int{0, 7, 299, 300, 350, 399} {
		if c := obs(e, t1, keys(i)[:2], fmt.Sprint("e", i, "@x")); c.ID != ids[i] {
			t.Errorf("after a restart, copy %d: %+v, want %08x", i, c, ids[i])
		}
	}
	res, err := e.Peek(ctx, []string{"s:imatch.9:late"}, t1)
	if err != nil || res.Campaign.ID != ids[7] {
		t.Errorf("the late key after a restart: %+v, %v; want %08x", res.Campaign, err, ids[7])
	}
}

// TestDecideUnion: a strong join counts with it the campaigns that hold
// UnionKeys keys or more of the message's evidence; one key, a weak join
// or keys that stopped voting union nothing.
func TestDecideUnion(t *testing.T) {
	at := func(ref uint32) keyPtr { return keyPtr{found: true, p: makePtr(ref, 0)} }
	capped := keyPtr{found: true, p: makePtr(7, WeakCap)}
	none := keyPtr{}
	im := []string{"imatch", "imatch", "imatch", "shingle", "shingle", "shingle"}
	for _, c := range []struct {
		name  string
		fams  []string
		ptrs  []keyPtr
		union string
	}{
		{"two keys name another campaign", im, []keyPtr{at(5), at(5), at(5), at(5), at(7), at(7)}, "[7]"},
		{"one key", im, []keyPtr{at(5), at(5), at(5), at(5), at(7), none}, "[]"},
		{"keys that stopped voting", im, []keyPtr{at(5), at(5), at(5), at(5), at(7), capped}, "[]"},
		{"several, ascending", im, []keyPtr{at(9), at(9), at(5), at(5), at(7), at(7)}, "[7 9]"},
		{"at most UnionMax", []string{"imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch"},
			[]keyPtr{at(1), at(1), at(1), at(2), at(2), at(3), at(3), at(4), at(4), at(6)}, "[2 3 4]"},
		{"a weak join", []string{"imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "imatch", "shingle", "sift", "charshingle"},
			[]keyPtr{at(1), at(1), at(2), at(2)}, "[]"},
	} {
		ptrs := c.ptrs
		for len(ptrs) < len(c.fams) {
			ptrs = append(ptrs, none)
		}
		d := decide(c.fams, familyCounts(c.fams), ptrs, 99, 0)
		if got := fmt.Sprint(d.union); !d.join || got != c.union {
			t.Errorf("%s: join %v, union %s; want a join, union %s", c.name, d.join, got, c.union)
		}
		for i, kp := range ptrs {
			want := kp.found && kp.p.switches() < WeakCap && (kp.p.ref() == d.ref || slices.Contains(d.union, kp.p.ref()))
			if d.voters[i] != want {
				t.Errorf("%s: key %d voter %v, want %v", c.name, i, d.voters[i], want)
			}
		}
	}
}

// TestUnionCount: the union counts a recipient of several campaigns once;
// past an exact tier, the largest HyperLogLog count.
func TestUnionCount(t *testing.T) {
	var u union
	u.add([]uint32{1, 2, 3}, -1)
	u.add([]uint32{3, 4}, -1)
	if got := u.count(); got != 4 {
		t.Errorf("exact: %d, want 4", got)
	}
	u.add(nil, 250)
	if got := u.count(); got != 250 {
		t.Errorf("with a HyperLogLog: %d, want 250", got)
	}
}

// aheadRecorder records what a store reports dated ahead of its clock.
type aheadRecorder struct {
	mu  sync.Mutex
	got map[string]int
}

func (a *aheadRecorder) ObserveRequest(string, time.Duration, error) {}

func (a *aheadRecorder) ObserveAhead(what string, n int, given, counted time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.got == nil {
		a.got = map[string]int{}
	}
	a.got[what] += n
}

func (a *aheadRecorder) count(what string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.got[what]
}

// TestEmbeddedAheadObserved: observations and votes dated ahead of the
// clock are reported once each, and the buckets a stepped-back clock
// left ahead are reported as dropped, by the write that takes their slot
// or by the sweep, and no longer held.
func TestEmbeddedAheadObserved(t *testing.T) {
	var ms atomic.Int64
	base := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	ms.Store(base.UnixMilli())
	now := func() time.Time { return time.UnixMilli(ms.Load()) }
	var rec aheadRecorder
	e, err := OpenEmbedded(EmbeddedOptions{Observer: &rec, Params: Params{Now: now}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	obs := func(at time.Time, keys ...string) {
		t.Helper()
		if _, err := e.Observe(ctx, Observation{Keys: keys, Recipients: []string{"a@x"}, Time: at}); err != nil {
			t.Fatal(err)
		}
	}
	obs(base, "v1:imatch.0:01")
	obs(base.Add(5*time.Hour), "v1:imatch.0:02")                       // within a bucket of the clock: as given
	obs(base.AddDate(61, 0, 0), "v1:imatch.0:03")                      // ahead
	obs(time.Date(9744, 1, 1, 0, 0, 0, 0, time.UTC), "v1:imatch.0:04") // ahead
	if err := e.RecordVote(ctx, Vote{Keys: []string{"v1:imatch.0:01"}, Voter: "v@x", Kind: VoteBulk, Time: base.AddDate(1, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	if got := rec.count("observation"); got != 2 {
		t.Errorf("observations reported ahead: %d, want 2", got)
	}
	if got := rec.count("vote"); got != 1 {
		t.Errorf("votes reported ahead: %d, want 1", got)
	}
	if got := rec.count("bucket"); got != 0 {
		t.Errorf("buckets dropped with the clock going forward only: %d, want 0", got)
	}
	// The clock steps back three days: everything held is ahead of it.
	held := e.Stats()
	ms.Store(base.Add(-72 * time.Hour).UnixMilli())
	obs(time.Time{}, "v1:imatch.0:05")
	e.sweep(now())
	st := e.Stats()
	if st.Pointers != 1 || st.FirstSightings != 1 {
		t.Errorf("after the step back and a sweep: %d pointers and %d first sightings, want the present's 1 and 1", st.Pointers, st.FirstSightings)
	}
	if got, want := rec.count("bucket"), held.Pointers+held.FirstSightings; got != want {
		t.Errorf("entries reported dropped: %d, want the %d held before the step", got, want)
	}
}

// TestEmbeddedPresentSaved: the latest time counted is saved and read
// back, so that after a restart an observation dated ahead of the clock
// counts at the store's present, not at the clock, as before it.
func TestEmbeddedPresentSaved(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2026, 11, 2, 6, 30, 0, 0, time.UTC) // in the clock's bucket
	clock := base.Add(5 * time.Hour)
	ctx := context.Background()
	firstOf := func(e *Embedded, at time.Time, key, rcpt string) time.Time {
		t.Helper()
		res, err := e.Observe(ctx, Observation{Keys: []string{key}, Recipients: []string{rcpt}, Time: at})
		if err != nil {
			t.Fatal(err)
		}
		return res.Campaign.First
	}
	e, _ := newEmbedded(t, dir, clock, nil)
	firstOf(e, base, "v1:imatch.0:01", "a@x") // a replay: the present is base
	if got := firstOf(e, base.AddDate(61, 0, 0), "v1:imatch.0:02", "b@x"); !got.Equal(base) {
		t.Fatalf("before the restart, a campaign dated ahead is first seen %v, want the present %v", got, base)
	}
	e = reopen(t, e, dir, clock)
	if got := firstOf(e, base.AddDate(61, 0, 0), "v1:imatch.0:03", "c@x"); !got.Equal(base) {
		t.Errorf("after the restart, a campaign dated ahead is first seen %v, want the saved present %v (the clock is %v)", got, base, clock)
	}
}

// The class of a campaign's only sender, as the pointers carry it
// (model.go, "One sender's template"): what a message reads and passes on.
func TestSenderClass(t *testing.T) {
	x, y := fp16("rss@feeds.example"), fp16("other@spam.example")
	sx, sy := senderClass(x), senderClass(y)
	if sx == 0 || sy == 0 || sx == classMany || sy == classMany || sx == sy || senderClass(0) != 0 {
		t.Fatalf("classes %d, %d (unknown %d): want two distinct, neither none nor many", sx, sy, senderClass(0))
	}
	at := func(ref uint32, c uint8) keyPtr { return keyPtr{found: true, p: makePtr(ref, 0).withClass(c)} }
	fams := []string{"imatch", "shingle", "terms", "terms", "terms"}
	for _, c := range []struct {
		name string
		ptrs []keyPtr
		snd  uint16
		weak bool
		cls  uint8
	}{
		{"new campaign: the sender's class", []keyPtr{{}, {}, {}, {}, {}}, x, false, sx},
		{"new campaign, no sender known", []keyPtr{{}, {}, {}, {}, {}}, 0, false, 0},
		{"one key, the sender's own campaign: weak", []keyPtr{at(7, sx), {}, {}, {}, {}}, x, true, sx},
		{"one key, another sender's campaign: strong, many", []keyPtr{at(7, sx), {}, {}, {}, {}}, y, false, classMany},
		{"one key, a campaign of many: strong", []keyPtr{at(7, classMany), {}, {}, {}, {}}, x, false, classMany},
		{"one key, no sender known: strong, the class kept", []keyPtr{at(7, sx), {}, {}, {}, {}}, 0, false, sx},
		{"one key, a campaign of no known sender: strong, the sender's", []keyPtr{at(7, 0), {}, {}, {}, {}}, x, false, sx},
		{"two keys, the sender's own: strong", []keyPtr{at(7, sx), at(7, sx), {}, {}, {}}, x, false, sx},
		{"main keys disagree: many", []keyPtr{at(7, sx), at(7, sy), {}, {}, {}}, x, false, classMany},
		{"a support key's class is not read", []keyPtr{at(7, sx), at(7, 0), at(7, sy), at(7, sy), at(7, sy)}, x, false, sx},
	} {
		d := decide(fams, familyCounts(fams), c.ptrs, 99, c.snd)
		if d.weak != c.weak || d.cls != c.cls {
			t.Errorf("%s: weak %v class %d, want %v %d", c.name, d.weak, d.cls, c.weak, c.cls)
		}
		for i, f := range fams {
			np, _ := repoint(c.ptrs[i], d, f, false)
			if want := c.cls; np.class() != want && !supportFamily(f) || supportFamily(f) && np.class() != 0 {
				t.Errorf("%s: key %d (%s) repointed with class %d", c.name, i, f, np.class())
			}
		}
	}
}

// An embedded store's pointers keep their class across a restart: one
// sender's frame joins its items weakly before and after, WeakCap+1 at
// most (a file without classes, version 6, would let every item after
// the restart join strongly).
func TestEmbeddedClassSaved(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2026, 11, 2, 6, 30, 0, 0, time.UTC)
	ctx := context.Background()
	e, _ := newEmbedded(t, dir, base, nil)
	item := func(e *Embedded, j int) Campaign {
		t.Helper()
		keys := []string{"v1:shingle.0:00000000000000f0", fmt.Sprintf("v1:shingle.1:%016x", j<<8|1)}
		for i := range 3 {
			keys = append(keys, fmt.Sprintf("v1:imatch.%d:%016x", i, j<<8|0x10+i))
		}
		res, err := e.Observe(ctx, Observation{Keys: keys, Recipients: []string{fmt.Sprintf("u%d@x", j)},
			Time: base.Add(time.Duration(j) * time.Minute), Sender: "rss@feeds.example"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Campaign
	}
	var most int64
	for j := range 2 {
		most = max(most, item(e, j).Recipients)
	}
	e = reopen(t, e, dir, base)
	for j := 2; j < 12; j++ {
		most = max(most, item(e, j).Recipients)
	}
	if most != WeakCap+1 {
		t.Errorf("largest campaign %d, want %d: the frame's class was lost in the restart", most, WeakCap+1)
	}
}

// TestScriptCrossSlotKeys: a Cluster primary's call (script.lua's 'X')
// reaches undeclared keys of several slots, which Redis 7 allows a script
// without a shebang, and one with a shebang only with the
// allow-cross-slot-keys flag.
func TestScriptCrossSlotKeys(t *testing.T) {
	first, _, _ := strings.Cut(scriptSrc, "\n")
	if strings.HasPrefix(first, "#!") && !strings.Contains(first, "allow-cross-slot-keys") {
		t.Errorf("script.lua's shebang %q lacks allow-cross-slot-keys: a primary's call would fail on every Cluster", first)
	}
}
