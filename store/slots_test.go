package store

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBitVals: values of every width read back as set, across word
// boundaries, and a value wider than the width is refused and changes
// nothing.
func TestBitVals(t *testing.T) {
	for _, w := range []uint{0, 1, 3, 19, 21, 31, 32} {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			const n = 300
			b := newBitVals(n, w)
			want := make([]uint32, n)
			for i := range want {
				want[i] = uint32(uint64(i)*0x9e3779b1) & uint32(uint64(1)<<w-1)
				if !b.set(i, want[i]) {
					t.Fatalf("set(%d, %d) refused at width %d", i, want[i], w)
				}
			}
			if w < 32 {
				if b.set(7, 1<<w) {
					t.Errorf("a value of %d bits set at width %d", w+1, w)
				}
			}
			for i := range want {
				if got := b.get(i); got != want[i] {
					t.Fatalf("get(%d) = %d, want %d", i, got, want[i])
				}
			}
		})
	}
}

// TestPackedValueTooWide: a key of a packed table repointed to a slot
// wider than the table's values is kept in the open table, read from
// there, and replaces the packed entry when the bucket is packed again.
func TestPackedValueTooWide(t *testing.T) {
	f := newPackedFixture(t, 5)
	e, now, cb, ps, sigs, g, g1 := f.e, f.now, f.cb, f.ps, f.sigs, f.g, f.g1
	for i, s := range sigs {
		e.ptrPut(ps, ringMain, cb, s, uint32(i%8), g, false, now)
	}
	slot := &ps.tabs[mod(cb, int64(e.c.nb))]
	if slot.d == nil || slot.d.vals.w != 3 {
		t.Fatalf("after 3,000 values of 3 bits: packed %v, want a table of 3-bit values", slot.d != nil)
	}
	i, ok := slot.d.find(sigs[10])
	if !ok {
		t.Fatal("key 10 not in the packed table")
	}
	e.ptrPut(ps, ringMain, cb, sigs[10], 1<<20, g, true, now)
	if v, _ := slot.get(sigs[10]); v != 1<<20 || slot.d.val(i) != 10%8 {
		t.Fatalf("a wide value: read %d (packed %d), want %d read from the open table", v, slot.d.val(i), 1<<20)
	}
	e.ptrPut(ps, ringMain, cb+1, sigs[0], 0, g1, false, now.Add(6*time.Hour)) // packs bucket cb
	if slot.t != nil || slot.d.len() != len(sigs) {
		t.Fatalf("after the next bucket: open table %v, %d packed, want none open and %d packed", slot.t != nil, slot.d.len(), len(sigs))
	}
	for j, s := range sigs {
		want := uint32(j % 8)
		if j == 10 {
			want = 1 << 20
		}
		if v, ok := slot.get(s); !ok || v != want {
			t.Fatalf("key %d after packing: %d, %v; want %d", j, v, ok, want)
		}
	}
}

// TestSlotRing: a bucket's slots resolve only for that bucket; a write
// for a bucket older than the one its ring slot holds gets no slot,
// unless that one is ahead of the clock; the sweep drops what left.
func TestSlotRing(t *testing.T) {
	var r slotRing
	r.init(5)
	for i := range 5000 {
		if s, _, ok := r.take(10, 10, uint32(i), uint8(i%7)); !ok || s != uint32(i) {
			t.Fatalf("take %d: slot %d, %v", i, s, ok)
		}
	}
	g10 := r.gen(10)
	if ref, c, ok := r.ref(10, g10, 4099); !ok || ref != 4099 || c != 4099%7 {
		t.Errorf("slot 4099 of bucket 10: %d, class %d, %v", ref, c, ok)
	}
	for _, c := range []struct {
		b    int64
		slot uint32
	}{{10, 5000}, {15, 1}, {5, 1}, {11, 0}} {
		if ref, _, ok := r.ref(c.b, g10, c.slot); ok {
			t.Errorf("slot %d of bucket %d resolves to %d, want none", c.slot, c.b, ref)
		}
	}
	if _, _, ok := r.take(5, 10, 1, 0); ok {
		t.Error("bucket 5 took a slot where bucket 10 is held")
	}
	s, g5, ok := r.take(5, 4, 77, 0)
	if !ok || s != 0 || g5 == g10 {
		t.Errorf("bucket 5 with bucket 10 ahead of the clock: slot %d, %v, generation %d; want 0, a new one", s, ok, g5)
	}
	if ref, _, ok := r.ref(5, g5, 0); !ok || ref != 77 {
		t.Errorf("slot 0 of bucket 5: %d, %v", ref, ok)
	}
	if _, _, ok := r.ref(10, g10, 0); ok {
		t.Error("bucket 10's slots resolve after bucket 5 took its place")
	}
	// Bucket 10 again, after 5: its earlier pointers (generation g10)
	// name none of its new slots.
	if _, g, _ := r.take(10, 10, 99, 0); g == g10 {
		t.Error("bucket 10 made again has its first generation")
	}
	if _, _, ok := r.ref(10, g10, 0); ok {
		t.Error("a pointer of bucket 10's first generation resolves in its second")
	}
	_, g6, _ := r.take(6, 6, 1, 0)
	r.sweep(6, 6)
	if _, _, ok := r.ref(10, r.gen(10), 0); ok {
		t.Error("bucket 10 resolves after the sweep to 6")
	}
	if _, _, ok := r.ref(6, g6, 0); !ok {
		t.Error("bucket 6 swept")
	}
}

// TestEmbeddedReadsVersion5: a version 5 file's pointers, which held the
// ref itself, open and packed, are read as slots of their bucket: they
// join their campaign after the upgrade and after the next restart (a
// version 6 file).
func TestEmbeddedReadsVersion5(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	e, err := newEmbedded(t, dir, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, refs := version5File(e, now)
	e.Close()
	if err := os.WriteFile(filepath.Join(dir, "state"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(when string) {
		t.Helper()
		e, err := newEmbedded(t, dir, now, nil)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		for i, ref := range refs {
			res, err := e.Observe(ctx, Observation{Keys: v5Keys(i), Recipients: []string{fmt.Sprint(when, i, "@x")}, Time: now})
			if c := res.Campaign; err != nil || c.ID != ref || len(c.Joined) != 2 {
				t.Errorf("%s, campaign %d: %+v, %v; want %08x joined by 2 keys", when, i, c, err, ref)
			}
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	check("after the upgrade")
	check("after a restart")
}

// v5Keys are the keys of campaign i of version5File.
func v5Keys(i int) []string {
	return []string{fmt.Sprintf("s:imatch.0:%x", i), fmt.Sprintf("s:shingle.1:%x", i)}
}

// version5File returns a version 5 file holding two campaigns' pointers,
// the first's in the bucket before now's, packed, the second's open in
// now's, and their refs.
func version5File(e *Embedded, now time.Time) ([]byte, []uint32) {
	cb := e.c.bucket(now)
	refs := []uint32{0x1234567, 0x0abcdef}
	return oldFile(e, 5, now, func(cw *chunkWriter) {
		v5Chunks(e, cw, cb, refs)
	}), refs
}

// oldFile returns a state file of an earlier format version: its header,
// no votes, the chunks chunks writes, and its end.
func oldFile(e *Embedded, version uint32, now time.Time, chunks func(cw *chunkWriter)) []byte {
	var buf bytes.Buffer
	cw := &chunkWriter{w: bufio.NewWriter(&buf)}
	cw.w.Write(e.c.fileHeader(version, now))
	cw.flush(chunkVotes)
	cw.flush(chunkVotesEnd)
	chunks(cw)
	cw.flush(chunkEnd)
	cw.w.Flush()
	return buf.Bytes()
}

// v5Chunks writes version5File's pointers.
func v5Chunks(e *Embedded, cw *chunkWriter, cb int64, refs []uint32) {
	for _, k := range v5Keys(0) {
		s := sigHash(k)
		b := append(cw.buf, byte(e.ptrShardOf(s)))
		b = le64(b, uint64(cb-1))
		b = append(b, 0)
		b = le32(b, 1)
		b = le64(b, denseHash(s))
		cw.buf = le32(b, uint32(makePtr(refs[0], 1)))
	}
	cw.flush(chunkPacked)
	b := le64(nil, uint64(cb))
	b = le32(b, 2)
	for _, k := range v5Keys(1) {
		b = le64(b, sigHash(k))
		b = le32(b, uint32(makePtr(refs[1], 0)))
	}
	cw.buf = b
	cw.flush(chunkPointers)
}

// TestEmbeddedSlotGenerations: pointers left in a bucket by a clock
// stepped back and forward again, between sweeps, name no slot of the
// bucket's later incarnation: a copy of their message does not join the
// campaign that took slot 0 there (a false join through another's slot).
func TestEmbeddedSlotGenerations(t *testing.T) {
	var ms atomic.Int64
	base := time.Date(2026, 11, 2, 1, 0, 0, 0, time.UTC)
	e, err := OpenEmbedded(EmbeddedOptions{SaveInterval: -1, Params: Params{Now: func() time.Time { return time.UnixMilli(ms.Load()) }}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// Three keys in three pointer shards.
	var keys []string
	used := map[int]bool{}
	for i := 0; len(keys) < 3; i++ {
		k := fmt.Sprintf("v1:imatch.0:%04x", i)
		if sh := e.ptrShardOf(sigHash(k)); !used[sh] {
			used[sh] = true
			keys = append(keys, k)
		}
	}
	ctx := context.Background()
	obs := func(at time.Time, key, rcpt string) Campaign {
		t.Helper()
		ms.Store(at.UnixMilli())
		res, err := e.Observe(ctx, Observation{Keys: []string{key}, Recipients: []string{rcpt}, Time: at})
		if err != nil {
			t.Fatal(err)
		}
		return res.Campaign
	}
	later := base.Add(10 * e.c.bucketLen) // the same ring slot as base's bucket
	obs(later, keys[0], "a@x")            // slot 0 of that bucket
	obs(base, keys[1], "b@x")             // the clock stepped back: its slots go
	c := obs(later, keys[2], "c@x")       // and forward again: slot 0 of a new generation
	if got := obs(later, keys[0], "d@x"); got.ID == c.ID {
		t.Errorf("a copy of the first message joined campaign %08x through the slot its pointer had in an earlier generation", c.ID)
	}
}

// TestEmbeddedSaveWhileObserving: observers write pointers while a save
// runs, two of them throughout and four more after each chunk the save
// writes (so whatever the chunks' order, some messages fall between any
// two). The file is then opened by a new store, where new messages take
// slots first. Every message written before the save began must be found
// in its own campaign, and every one written during it in its own or in
// none. Slots saved before the pointers fail it: a pointer written in
// between names a slot the file lacks, which the new store gives to a new
// message, so the old message would join that one's campaign.
func TestEmbeddedSaveWhileObserving(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	e, err := newEmbedded(t, dir, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	keys := func(i int64) []string {
		return []string{fmt.Sprintf("v1:imatch.0:%x", i), fmt.Sprintf("v1:shingle.1:%x", i),
			fmt.Sprintf("v1:shingle.2:%x", i), fmt.Sprintf("v1:terms.0:%x", i), fmt.Sprintf("v1:terms.1:%x", i)}
	}
	var (
		mu   sync.Mutex
		ids  = map[int64]uint32{}
		next atomic.Int64
	)
	observe := func(s *Embedded) {
		i := next.Add(1)
		res, err := s.Observe(ctx, Observation{Keys: keys(i), Recipients: []string{fmt.Sprintf("r%d@x", i)}, Time: now})
		if err != nil || res.Campaign.ID == 0 || len(res.Campaign.Joined) > 0 {
			t.Errorf("message %d: %+v, %v; want a new campaign", i, res.Campaign, err)
		}
		mu.Lock()
		ids[i] = res.Campaign.ID
		mu.Unlock()
	}
	const before = 500
	for range before {
		observe(e)
	}
	chunks := 0
	e.afterChunk = func(byte) {
		chunks++
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 8 {
					observe(e)
				}
			})
		}
		wg.Wait()
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	for range 2 {
		bg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					observe(e)
				}
			}
		})
	}
	err = e.Save()
	close(stop)
	bg.Wait()
	e.afterChunk = nil
	if err != nil {
		t.Fatal(err)
	}
	// The file as that save left it (Close would write another).
	b, err := os.ReadFile(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	dir2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir2, "state"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	e2, err := newEmbedded(t, dir2, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	written := next.Load()
	for range written {
		observe(e2)
	}
	found := 0
	for i := int64(1); i <= written; i++ {
		res, err := e2.Peek(ctx, keys(i), now)
		if err != nil {
			t.Fatal(err)
		}
		switch got := res.Campaign.ID; {
		case got == ids[i]:
			found++
		case i <= before:
			t.Errorf("message %d, written before the save: campaign %08x, want its own %08x", i, got, ids[i])
		case got != 0:
			t.Errorf("message %d, written during the save: campaign %08x, want its own %08x or none", i, got, ids[i])
		}
	}
	t.Logf("%d chunks, %d messages written by then, %d found after the restart", chunks, written, found)
	if chunks < 4 {
		t.Errorf("observations after %d chunks, want at least 4 (pointers and slots among them)", chunks)
	}
}

// TestPackedSwitched: a bucket's pointers packed with few switched among
// them (a switch count above 0) keep no count bits: the switched stay in
// the open table, every value reads back, a count set in place goes to
// the open table too, and a key held open takes its later values there
// (the packed entry, older, is never read: fails on main, which set it). Past one in switchedOpen the
// counts are packed.
func TestPackedSwitched(t *testing.T) {
	for _, c := range []struct {
		every     int // one pointer in every is switched
		wantShift uint
	}{{100, switchBits}, {10, 0}} {
		t.Run(fmt.Sprint(c.every), func(t *testing.T) {
			f := newPackedFixture(t, 7)
			e, now, cb, ps, sigs, g, g1 := f.e, f.now, f.cb, f.ps, f.sigs, f.g, f.g1
			want := make([]uint32, len(sigs))
			for i, s := range sigs {
				want[i] = uint32(i) << switchBits
				if i%c.every == 0 {
					want[i] |= 2
				}
				e.ptrPut(ps, ringMain, cb, s, want[i], g, false, now)
			}
			e.ptrPut(ps, ringMain, cb+1, sigs[0], 0, g1, false, now.Add(6*time.Hour)) // packs bucket cb
			slot := &ps.tabs[mod(cb, int64(e.c.nb))]
			switched := (len(sigs) + c.every - 1) / c.every
			wantOpen := 0
			if c.wantShift != 0 {
				wantOpen = switched
			}
			open := 0
			if slot.t != nil {
				open = slot.t.n
			}
			if slot.d == nil || slot.d.shift != c.wantShift || slot.d.len() != len(sigs)-wantOpen || open != wantOpen {
				t.Fatalf("packed: shift %d, %d packed, %d open; want shift %d, %d packed, %d open", slot.d.shift, slot.d.len(), open, c.wantShift, len(sigs)-wantOpen, wantOpen)
			}
			if w := uint(12) + switchBits - c.wantShift; slot.d.vals.w != w {
				t.Errorf("packed values of %d bits, want %d", slot.d.vals.w, w)
			}
			check := func(when string) {
				t.Helper()
				for i, s := range sigs {
					if v, ok := slot.get(s); !ok || v != want[i] {
						t.Fatalf("%s: key %d reads %d, %v; want %d", when, i, v, ok, want[i])
					}
				}
			}
			check("packed")
			// Key 1 switches (set in place where counts are packed); key
			// 2 takes a value too wide for the table, then one that fits:
			// held open, it keeps it there.
			want[1] |= 1
			e.ptrPut(ps, ringMain, cb, sigs[1], want[1], g, true, now)
			e.ptrPut(ps, ringMain, cb, sigs[2], 1<<30, g, true, now)
			want[2] = 5 << switchBits
			e.ptrPut(ps, ringMain, cb, sigs[2], want[2], g, true, now)
			check("after three writes")
		})
	}
}

// packedFixture is a memory store with 3,000 random keys to put in the
// first pointer shard, the slots of the current bucket (g) and the next
// (g1) taken, and the shard locked for the test's life, as ptrPut needs.
type packedFixture struct {
	e     *Embedded
	now   time.Time
	cb    int64
	ps    *pshard
	sigs  []uint64
	g, g1 uint64
}

func newPackedFixture(t *testing.T, seed uint64) packedFixture {
	t.Helper()
	f := packedFixture{now: time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)}
	f.e = memStore(t, f.now)
	f.cb = f.e.c.bucket(f.now)
	f.ps = &f.e.ptrs[0]
	f.sigs = randomSigs(3000, seed)
	_, f.g, _ = f.e.slots.take(f.cb, f.cb, 1, 0)
	_, f.g1, _ = f.e.slots.take(f.cb+1, f.cb+1, 1, 0)
	f.ps.mu.Lock()
	t.Cleanup(func() {
		f.ps.mu.Unlock()
		f.e.Close()
	})
	return f
}
