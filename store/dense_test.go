package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// randomSigs returns n distinct pseudo-random signature hashes.
func randomSigs(n int, seed uint64) []uint64 {
	seen := map[uint64]bool{}
	var out []uint64
	for x := seed; len(out) < n; {
		x = mix64(x + 0x9e3779b97f4a7c15)
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// TestDenseTable: a packed table of either check width finds every entry
// with its value, before and after merging more in, and its saved form
// (each) builds the same table; an absent key matches with the
// probability its check width allows.
func TestDenseTable(t *testing.T) {
	for _, cbits := range []uint{32, 16} {
		t.Run(fmt.Sprint(cbits), func(t *testing.T) {
			sigs := randomSigs(60000, uint64(cbits))
			var first fsTable
			for i, s := range sigs[:40000] {
				first.put(s, uint32(i))
			}
			d, _ := packed(nil, &first, cbits)
			if d.cbits != cbits || d.len() != 40000 {
				t.Fatalf("packed: %d bits of check, %d entries; want %d, 40000", d.cbits, d.len(), cbits)
			}
			var more fsTable
			for i, s := range sigs[40000:] {
				more.put(s, uint32(40000+i))
			}
			d, _ = packed(d, &more, 32) // a packed table keeps its check width
			var saved []hv
			d.each(func(h uint64, v uint32) { saved = append(saved, hv{h, v}) })
			again := newDense(nil, saved, d.gbits, cbits)
			// A merged key whose saved hash is a packed one's replaces it
			// (the newer value of that key, as far as the table can tell;
			// the older entry could not be found before either): at 16
			// bits a few of 20,000.
			sh := 64 - d.gbits - d.cbits
			old, replaced := map[uint64]bool{}, 0
			for _, s := range sigs[:40000] {
				old[denseHash(s)>>sh] = true
			}
			for _, s := range sigs[40000:] {
				if old[denseHash(s)>>sh] {
					replaced++
				}
			}
			t.Logf("%d packed entries replaced by merged keys of the same saved hash", replaced)
			for _, tb := range []*denseTable{d, again} {
				if tb.cbits != cbits || tb.len() != len(sigs)-replaced || tb.idx8 == nil {
					t.Fatalf("%d bits of check, %d entries, 8-bit index %v; want %d, %d, an 8-bit one", tb.cbits, tb.len(), tb.idx8 != nil, cbits, len(sigs)-replaced)
				}
				// A key whose group holds another of the same check before
				// it finds that one's value: at 16 bits about
				// 60,000 × 2/2¹⁶ ≈ 1.8 keys, at 32 none.
				shadowed := 0
				for i, s := range sigs {
					j, ok := tb.find(s)
					if !ok {
						t.Fatalf("key %d not found", i)
					}
					if tb.val(j) != uint32(i) {
						shadowed++
					}
				}
				t.Logf("%d of %d keys found another's value", shadowed, len(sigs))
				if limit := map[uint]int{32: 0, 16: 10}[cbits]; shadowed > limit {
					t.Errorf("%d keys found another's value, want at most %d", shadowed, limit)
				}
			}
			// About four entries a group: an absent key matches 4/2^cbits
			// of the time (60,000 lookups: 0.0 expected at 32 bits, 3.7
			// at 16).
			false_ := 0
			for _, s := range randomSigs(60000, 1000+uint64(cbits)) {
				if _, ok := d.find(s); ok {
					false_++
				}
			}
			t.Logf("%d false matches of 60,000 absent keys", false_)
			if limit := map[uint]int{32: 0, 16: 20}[cbits]; false_ > limit {
				t.Errorf("%d false matches of 60,000 absent keys, want at most %d", false_, limit)
			}
		})
	}
}

// TestDenseTableWideBlock: a table whose groups are fuller than 8-bit
// offsets allow keeps 16-bit ones, and one with a block of more than 2¹⁶
// entries keeps its starts in 32 bits; both find every key.
func TestDenseTableWideBlock(t *testing.T) {
	const gbits = 10
	for _, c := range []struct {
		name  string
		top   uint64 // keys whose hash's top 2 bits are below it
		n     int
		index func(d *denseTable) bool
	}{
		// About 20 a group: blocks of 16 groups span about 320.
		{"16", 4, 20000, func(d *denseTable) bool { return d.idx8 == nil && d.idx != nil }},
		// Every key in the first quarter: a block of 256 groups spans them all.
		{"32", 1, 70000, func(d *denseTable) bool { return d.idx32 != nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var add []hv
			var sigs []uint64
			for _, s := range randomSigs(300000, 7) {
				if h := denseHash(s); h>>62 < c.top && len(add) < c.n {
					add, sigs = append(add, hv{h, uint32(len(sigs))}), append(sigs, s)
				}
			}
			if len(add) < c.n {
				t.Fatalf("%d keys, want %d", len(add), c.n)
			}
			d := newDense(nil, add, gbits, 32)
			if !c.index(d) {
				t.Fatalf("index of 8 bits %v, 16 %v, 32 %v; want %s", d.idx8 != nil, d.idx != nil, d.idx32 != nil, c.name)
			}
			for i, s := range sigs {
				if j, ok := d.find(s); !ok || d.val(j) != uint32(i) {
					t.Fatalf("key %d: found %v, value %d", i, ok, d.val(j))
				}
			}
		})
	}
}

// The support families' keys have a ring of their own: their pointers
// are not in the main ring, and they still join (two term-set bands name
// a campaign alone) and survive a restart.
func TestEmbeddedSupportRing(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 2, 0, 30, 0, 0, time.UTC)
	t1 := t0.Add(6 * time.Hour)
	ctx := context.Background()
	e, _ := newEmbedded(t, dir, t1, nil)
	msg := func(i int) []string {
		return []string{fmt.Sprintf("s:imatch.0:%x", i), fmt.Sprintf("s:terms.0:%x", i), fmt.Sprintf("s:terms.1:%x", i), fmt.Sprintf("s:contain.3:%x", i)}
	}
	ids := map[int]uint32{}
	for i := range 2000 {
		res, err := e.Observe(ctx, Observation{Keys: msg(i), Recipients: []string{"a@x"}, Time: t0})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = res.Campaign.ID
	}
	for i := 5000; i < 5300; i++ { // close the first bucket: it is packed
		e.Observe(ctx, Observation{Keys: msg(i), Recipients: []string{"b@x"}, Time: t1})
	}
	count := func(e *Embedded) (main, support, packed16 int) {
		for i := range e.ptrs {
			for j := range e.ptrs[i].tabs {
				main += e.ptrs[i].tabs[j].size()
				s := &e.ptrs[i].stabs[j]
				support += s.size()
				if s.d != nil && s.d.cbits == 16 {
					packed16 += s.d.len()
				}
			}
		}
		return main, support, packed16
	}
	if m, s, p := count(e); m != 2300 || s != 3*2300 || p != 3*2000 {
		t.Fatalf("pointers: %d main, %d support (%d packed with 16-bit checks); want 2300, 6900 (6000)", m, s, p)
	}
	join := func(e *Embedded, when string) {
		t.Helper()
		for _, i := range []int{0, 17, 1999} {
			ks := msg(i)
			res, err := e.Observe(ctx, Observation{Keys: []string{ks[1], ks[2], fmt.Sprint("s:imatch.0:", when, i)}, Recipients: []string{fmt.Sprint(when, "@x")}, Time: t1})
			if c := res.Campaign; err != nil || c.ID != ids[i] || len(c.Joined) != 2 {
				t.Fatalf("%s: two term-set bands of message %d: %+v, %v; want campaign %08x joined by 2 keys", when, i, c, err, ids[i])
			}
		}
	}
	join(e, "before")
	e = reopen(t, e, dir, t1)
	if m, s, _ := count(e); m != 2300+3 || s != 3*2300+6 {
		t.Errorf("after a restart: %d main, %d support pointers; want %d, %d", m, s, 2303, 6906)
	}
	join(e, "after")
}

// A version 4 file kept the support families' pointers in the one ring:
// they are found there, for the buckets it held, after an upgrade and
// after the next restart (chunk 11), and a key found there is rewritten to
// the support ring.
func TestEmbeddedReadsVersion4(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	e, err := newEmbedded(t, dir, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	cb := e.c.bucket(now)
	const ref = 0x1234567
	terms := []string{"s:terms.0:a", "s:terms.1:b", "s:terms.2:c", "s:terms.3:d"}
	file := oldFile(e, 4, now, func(cw *chunkWriter) {
		b := le64(nil, uint64(cb-1))
		b = le32(b, uint32(len(terms)))
		for _, k := range terms {
			b = le64(b, sigHash(k))
			b = le32(b, uint32(makePtr(ref, 0)))
		}
		cw.buf = b
		cw.flush(chunkPointers)
	})
	e.Close()
	if err := os.WriteFile(filepath.Join(dir, "state"), file, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	join := func(e *Embedded, ks []string, rcpt string) {
		t.Helper()
		res, err := e.Observe(ctx, Observation{Keys: ks, Recipients: []string{rcpt}, Time: now})
		if c := res.Campaign; err != nil || c.ID != ref || len(c.Joined) != 2 {
			t.Fatalf("%v after the upgrade: %+v, %v; want campaign %08x joined by 2 keys", ks, c, err, ref)
		}
	}
	e, err = newEmbedded(t, dir, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	join(e, terms[:2], "a@x")
	moved := 0
	for i := range e.ptrs {
		moved += e.ptrs[i].stabs[mod(cb, int64(e.c.nb))].size()
	}
	if moved != 2 {
		t.Errorf("%d pointers in the support ring, want the 2 found in the main ring", moved)
	}
	e = reopen(t, e, dir, now)
	join(e, terms[2:], "b@x")
	join(e, terms[:2], "c@x")
}
