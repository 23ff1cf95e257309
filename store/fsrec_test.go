package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRecTable checks the first-sighting table against a map through
// puts, removals and packing.
func TestRecTable(t *testing.T) {
	var tb recTable
	ref := map[uint32]fsRec{}
	rng := uint64(1)
	next := func() uint64 { rng = mix64(rng + 0x9e3779b97f4a7c15); return rng }
	for i := range 30000 {
		k := uint32(next() % 20000)
		switch next() % 10 {
		case 0, 1, 2, 3, 4, 5:
			r := fsRec{key: k | recUsed, fp: uint32(i), first: uint32(i * 3), origin: uint32(i * 7), net: uint16(i), snd: uint16(i >> 3)}
			_, had := ref[k]
			if fresh := tb.put(r); fresh == had {
				t.Fatalf("put(%d): new=%v, reference disagrees", k, fresh)
			}
			ref[k] = r
		case 6, 7, 8:
			_, want := ref[k]
			if got := tb.del(k); got != want {
				t.Fatalf("del(%d) = %v, want %v", k, got, want)
			}
			delete(ref, k)
		case 9:
			if next()%500 == 0 {
				tb.pack()
			}
		}
		if tb.size() != len(ref) {
			t.Fatalf("op %d: size %d, reference %d", i, tb.size(), len(ref))
		}
	}
	for k, r := range ref {
		if got, ok := tb.get(k); !ok || got != r {
			t.Fatalf("get(%d) = %+v, %v; want %+v", k, got, ok, r)
		}
	}
	for k := range uint32(20000) {
		if _, ok := ref[k]; !ok {
			if _, found := tb.get(k); found {
				t.Fatalf("removed or absent %d found", k)
			}
		}
	}
	n := 0
	tb.each(func(r fsRec) {
		n++
		if ref[r.ref()] != r {
			t.Fatalf("each: %+v, want %+v", r, ref[r.ref()])
		}
	})
	if n != len(ref) {
		t.Errorf("each visited %d, want %d", n, len(ref))
	}
}

// A campaign of one message is a first sighting only; its second message
// makes the record and the counter, and the first recipient coming back
// does not count twice.
func TestEmbeddedOneMessageCampaign(t *testing.T) {
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	e, err := newEmbedded(t, t.TempDir(), now, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	obs := func(rcpt string, at time.Time) Campaign {
		t.Helper()
		res, err := e.Observe(ctx, Observation{Keys: []string{"s:imatch.0:a", "s:char.0:b"}, Recipients: []string{rcpt}, Time: at, Network: "192.0.2.0/24"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Campaign
	}
	c := obs("a@x", now)
	if st := e.Stats(); st.FirstSightings != 1 || st.Counters != 0 || st.Campaigns != 1 {
		t.Fatalf("after one message: %+v; want one first sighting and no counter", st)
	}
	if c2 := obs("a@x", now.Add(-time.Minute)); c2.ID != c.ID || c2.Recipients != 1 || c2.Networks != 1 || !c2.First.Equal(now.Add(-time.Minute)) {
		t.Fatalf("the same recipient again: %+v", c2)
	}
	if st := e.Stats(); st.FirstSightings != 0 || st.Counters != 1 || st.Campaigns != 1 {
		t.Fatalf("after two messages: %+v; want the record and a counter", st)
	}
	if c3 := obs("b@x", now); c3.ID != c.ID || c3.Recipients != 2 {
		t.Fatalf("a second recipient: %+v", c3)
	}
}

// A version 3 file (every campaign's record in chunk 6, the first
// sightings in chunk 3) is read whole: a campaign of one message counts on
// from its recipient.
func TestEmbeddedReadsVersion3(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	e, err := newEmbedded(t, dir, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	cb := e.c.bucket(now)
	const ref = 0x1234567
	key := "s:imatch.0:aa"
	file := oldFile(e, 3, now, func(cw *chunkWriter) {
		b := le64(nil, uint64(cb))
		b = le32(b, 1)
		b = le64(b, campaignSig(ref))
		cw.buf = le32(b, fingerprint(e.c.pseudonym("a@x")))
		cw.flush(chunkFS)
		b = le64(nil, uint64(cb))
		b = le32(b, 1)
		b = le64(b, sigHash(key))
		cw.buf = le32(b, uint32(makePtr(ref, 0)))
		cw.flush(chunkPointers)
		b = le32(nil, ref)
		b = le32(b, 7)
		b = le64(b, uint64(now.Unix()-60))
		b = le64(b, uint64(cb))
		b = append(b, 1)
		b = binary.BigEndian.AppendUint16(b, 0x1235)
		cw.buf = append(b, 0)
		cw.flush(chunkCamps)
	})
	e.Close()
	if err := os.WriteFile(filepath.Join(dir, "state"), file, 0o600); err != nil {
		t.Fatal(err)
	}
	e, err = newEmbedded(t, dir, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	for _, step := range []struct {
		rcpt string
		want int64
	}{{"b@x", 2}, {"a@x", 2}, {"c@x", 3}} {
		res, err := e.Observe(ctx, Observation{Keys: []string{key}, Recipients: []string{step.rcpt}, Time: now, Network: "198.51.100.0/24"})
		c := res.Campaign
		if err != nil || c.ID != ref || c.Recipients != step.want || c.Networks != 2 || !c.First.Equal(now.Add(-time.Minute)) {
			t.Fatalf("%s after the upgrade: %+v, %v; want campaign %x of %d recipients, 2 networks, first a minute ago", step.rcpt, c, err, ref, step.want)
		}
	}
}

// A large bucket's pointers are packed as they come; every key is still
// found, before and after a restart, and packing goes on after it.
func TestEmbeddedPackedAsItFills(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 2, 0, 30, 0, 0, time.UTC)
	t1 := t0.Add(6 * time.Hour)
	ctx := context.Background()
	keys := func(i int) []string {
		var ks []string
		for k := range 8 {
			ks = append(ks, fmt.Sprintf("s:imatch.%d:%x", k, i*10+k))
		}
		return ks
	}
	e, _ := newEmbedded(t, dir, t1, nil)
	obs := func(at time.Time, from, to int) map[int]uint32 {
		t.Helper()
		ids := map[int]uint32{}
		for i := from; i < to; i++ {
			res, err := e.Observe(ctx, Observation{Keys: keys(i), Recipients: []string{fmt.Sprint("r", i, "@x")}, Time: at})
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = res.Campaign.ID
		}
		return ids
	}
	check := func(when string, ids map[int]uint32, at time.Time) {
		t.Helper()
		for i, id := range ids {
			res, err := e.Peek(ctx, keys(i)[i%7:i%7+1], at)
			if err != nil || res.Campaign.ID != id {
				t.Fatalf("%s: message %d's key: %+v, %v; want campaign %08x", when, i, res.Campaign, err, id)
			}
		}
	}
	obs(t0, 0, 12000) // about 1500 pointers a shard
	ids := obs(t1, 20000, 32000)
	packedOpen := func() (n int) {
		for i := range e.ptrs {
			if s := e.ptrs[i].tabs[mod(e.c.bucket(t1), int64(e.c.nb))]; s.d != nil {
				n += s.d.len()
			}
		}
		return n
	}
	if n := packedOpen(); n < 12000*8*3/4 {
		t.Fatalf("%d of the open bucket's %d pointers packed, want most", n, 12000*8)
	}
	check("open bucket", ids, t1)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, _ = newEmbedded(t, dir, t1, nil)
	defer func() { e.Close() }()
	check("after a restart", ids, t1)
	before := packedOpen()
	for i, id := range obs(t1, 40000, 44000) {
		ids[i] = id
	}
	if packedOpen() <= before {
		t.Errorf("no packing after the restart")
	}
	check("after more", ids, t1)
	if st := e.Stats(); st.Pointers != 28000*8 {
		t.Errorf("%d pointers, want %d", st.Pointers, 28000*8)
	}
}
