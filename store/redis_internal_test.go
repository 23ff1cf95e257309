package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// A bucket's pointers full at FirstSightCap records: later keys of the same
// tag, split and bucket are not remembered, and a message of such a key
// alone still finds the campaign it started (same keys, same ref and
// origin), so it counts the same.
func TestRedisPointerOverflow(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	ctx := context.Background()
	s, err := NewRedis(ctx, RedisOptions{Addrs: []string{r.Addr()}, FirstSightSplit: 1,
		Timeout: 2 * time.Minute}) // counts, not speed: a loaded machine must not fail it
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Signature ids that share one tag (the split is 1).
	var ids []string
	want := sigHash("v1:o:0") >> 50
	for i := 0; len(ids) < FirstSightCap+100; i++ {
		id := fmt.Sprint("v1:o:", i)
		if sigHash(id)>>50 == want {
			ids = append(ids, id)
		}
	}
	at := time.Now()
	for _, id := range ids {
		res, err := s.Observe(ctx, Observation{Keys: []string{id}, Recipients: []string{"a@x"}, Time: at})
		if err != nil || res.Volumes[0] != 1 {
			t.Fatalf("%s: %v, %v; want volume 1", id, res.Volumes, err)
		}
	}
	// the bucket's section of the older string holds FirstSightCap
	// records, at most 255 a lane (past them the records a full current
	// string moves there are dropped): its 4 main lanes are full, each a
	// count byte and its records
	sk := s.sigKeys(ids[0], 1)
	n, err := s.client.StrLen(ctx, sk.keys[1]).Result()
	if want := int64(4 + 9*min(FirstSightCap, 4*255)); err != nil || n != want {
		t.Errorf("older pointer string: %d bytes, %v; want %d", n, err, want)
	}
	// Every key still counts right: same recipient 1, a new one 2.
	for _, id := range []string{ids[0], ids[len(ids)-1]} {
		for i, rc := range []string{"a@x", "b@x"} {
			res, err := s.Observe(ctx, Observation{Keys: []string{id}, Recipients: []string{rc}, Time: at})
			if err != nil || res.Volumes[0] != int64(i+1) {
				t.Errorf("%s with %s: %v, %v; want %d", id, rc, res.Volumes, err, i+1)
			}
		}
	}
	if n2, _ := s.client.StrLen(ctx, sk.keys[1]).Result(); n2 != n {
		t.Errorf("the full section grew to %d bytes", n2)
	}
}

// Damaged pointer and first-sighting strings (cut short, or not of whole
// records) are read as far as they hold whole records: the message is
// counted, never an error.
func TestRedisDamagedStrings(t *testing.T) {
	_, s := countingRedis(t)
	ctx := context.Background()
	at := time.Now()
	lim, _ := s.limits(ctx)
	nb := s.c.nb
	cb := s.c.bucket(at)
	// a key of a family that names campaigns, and a support family's
	for _, id := range []string{"v1:imatch.0:00000000000000dd", "v1:contain.0:00000000000000dd"} {
		sk := s.sigKeys(id, uint64(lim.FirstSightSplit))
		ref, _ := newRef([]string{id})
		ck, field := s.campKeys(ref, s.c.bucket(at), uint64(lim.FirstSightSplit))
		testDamagedStrings(t, s, id, sk, ck[nb-1], field, cb, at)
	}
}

func testDamagedStrings(t *testing.T, s *Redis, id string, sk sigKeys, fs, field string, cb int64, at time.Time) {
	ctx := context.Background()
	// Strings of layouts this store no longer writes, cut short, or with
	// lengths the older string does not bear out: none is read as
	// holding a record, and the message is counted all the same.
	chk := sk.field[2:]
	older := func(main, sup string) string { return u32(int64(len(main))) + main + sup + u32(int64(len(sup))) }
	cur := func(bk, ml, om, os int64, recs string) string { return u32(bk) + u16(ml) + u16(om) + u16(os) + recs }
	big := strings.Repeat("12345678", 80)
	// lanes of this layout holding the key in every lane two buckets
	// back, behind 70 others a lane one bucket back
	lanes, lens := olderLanes(s.c.nb, func(l, j int) string {
		switch {
		case j == 1 && l < 4:
			return filler(70, 9, "L")
		case j == 1:
			return filler(70, 6, "L")
		case j == 2 && l < 4:
			return sk.field + "1234\x00"
		case j == 2:
			return chk + "1234"
		}
		return ""
	}, 0)
	_, wrong := olderLanes(s.c.nb, func(l, j int) string { return "" }, 300)
	for _, v := range []struct{ cur, old string }{
		{sk.field, sk.field},
		{"1234567890" + sk.field + "12", "1234567"},
		{"123456789", older(u16(cb-1)+u16(800)+sk.field+"1234", "")},
		{cur(cb, 12, 600, 700, "12345678"+sk.field+"12"), older(u16(cb-1)+u16(12)+"12345678"+sk.field, "")},
		{cur(cb, 800, 0, 0, sk.field+"1234"), older("", u16(cb-1)+u16(800)+chk+"1234")},
		{cur(cb+1, 4, 2, 2, sk.field), older(u16(cb-1)+u16(7)+"1234567"+u16(cb-2)+u16(4)+sk.field, "")},
		{cur(cb-1, 12, 600, 0, "1234"+sk.field+"5678"), older(u16(cb-2)+u16(8)+"1234"+sk.field, u16(cb-2)+u16(4)+chk+u16(cb-3))},
		{cur(cb-1, 0, 0, 700, "12"+sk.field+"34"), older("", u16(cb-2)+u16(7)+"1"+chk+"1234"+u16(cb-3))},
		{cur(cb-1, 0, 644, 0, ""), older(u16(cb-2)+u16(640)+big, "")},
		{cur(cb-1, 0, 0, 644, ""), older("", u16(cb-2)+u16(640)+big)},
		{cur(cb-1, 0, 644, 0, ""), older(u16(cb-2)+u16(700)+big, "")},
		{"", u32(9000) + sk.field + chk + u32(9000)},
		{"", u32(4) + u16(cb-1) + u16(8) + sk.field + "1234" + u32(0)},
		{"", sk.field + "12" + u32(0xffffffff)},
		{u32(cb) + lens, lanes[:len(lanes)/2]},
		{u32(cb) + wrong, lanes},
		{u32(cb) + lens, lanes + "x"},
		{u32(cb) + lens + sk.field, lanes},
		{u32(cb+9) + lens, lanes},
		// the layout before 2026-11-28: the main records' length after
		// the bucket
		{u32(cb) + u16(8) + lens + sk.field + "1234", lanes},
	} {
		s.client.Set(ctx, sk.keys[0], v.cur, time.Hour)
		s.client.Set(ctx, sk.keys[1], v.old, time.Hour)
		s.client.Set(ctx, fs, "0123456789abcdefghij"+field+"xx", time.Hour)
		res, err := s.Observe(ctx, Observation{Keys: []string{id}, Recipients: []string{"a@x"}, Time: at})
		if err != nil || res.Volumes[0] < 1 {
			t.Errorf("%s: pointer strings %q, %q: %v, %v; want a count", id, v.cur, v.old, res.Volumes, err)
		}
		// and a message dated a bucket back (its older section written)
		res, err = s.Observe(ctx, Observation{Keys: []string{id}, Recipients: []string{"b@x"}, Time: at.Add(-s.c.bucketLen)})
		if err != nil || res.Volumes[0] < 1 {
			t.Errorf("%s: pointer strings %q, %q, a bucket back: %v, %v; want a count", id, v.cur, v.old, res.Volumes, err)
		}
	}
}

func u32(v int64) string { return string(binary.BigEndian.AppendUint32(nil, uint32(v))) }
func u16(v int64) string { return string(binary.BigEndian.AppendUint16(nil, uint16(v))) }

// A bucket's records move to the older string when a later bucket is
// first written: a support family's key with 2 bytes of check (6-byte
// records), another family's with 4 and its class (9 bytes), and both are
// found there.
func TestRedisOlderSupportRecords(t *testing.T) {
	_, s := countingRedis(t)
	ctx := context.Background()
	lim, _ := s.limits(ctx)
	ids := []string{"v1:imatch.0:00000000000000aa", "v1:contain.0:00000000000000bb"}
	sks := []sigKeys{s.sigKeys(ids[0], uint64(lim.FirstSightSplit)), s.sigKeys(ids[1], uint64(lim.FirstSightSplit))}
	if sks[0].keys[0] == sks[1].keys[0] {
		t.Fatal("the two keys share a pointer string: pick others")
	}
	at := time.Now()
	first, err := s.Observe(ctx, Observation{Keys: ids, Recipients: []string{"a@x"}, Time: at.Add(-s.c.bucketLen)})
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Observe(ctx, Observation{Keys: ids, Recipients: []string{"b@x"}, Time: at})
	if err != nil {
		t.Fatal(err)
	}
	if second.Campaign.ID != first.Campaign.ID || len(second.Campaign.Joined) != 2 || second.Volumes[1] != 2 {
		t.Errorf("second copy: campaign %+v, volumes %v; want campaign %d joined by both keys, volume 2",
			second.Campaign, second.Volumes, first.Campaign.ID)
	}
	// the older string: the key's lane alone, the count bytes of this
	// bucket (none) and the bucket before (one), and the record
	for i, want := range []int64{2 + 9, 2 + 6} {
		if n, err := s.client.StrLen(ctx, sks[i].keys[1]).Result(); err != nil || n != want {
			t.Errorf("%s: older string of %d bytes, %v; want %d", ids[i], n, err, want)
		}
		if n, err := s.client.StrLen(ctx, sks[i].keys[0]).Result(); err != nil || n != curHdr+9 {
			t.Errorf("%s: current string of %d bytes, %v; want %d", ids[i], n, err, curHdr+9)
		}
	}
}

// At density a key reads only its lane of the older string (GETRANGE: a
// main lane for a family that names campaigns, a support lane for a
// support family), where its current string's header says the lanes
// lie; a small older string is read whole. A key whose record is in the
// oldest bucket, behind others, is found either way. (A header that
// disagrees with the older string is a damaged string: the key is not
// found there, and the message is counted, TestRedisDamagedStrings.)
func TestRedisOlderPartRead(t *testing.T) {
	_, s := countingRedis(t)
	ctx := context.Background()
	ids := []string{"v1:imatch.0:00000000000000aa", "v1:contain.0:00000000000000bb"}
	at := time.Now()
	cb := s.c.bucket(at)
	for _, tc := range []struct {
		name string
		fill int // records a lane and bucket before the key's
	}{
		{"a lane by GETRANGE", 50},
		{"a small string whole", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.client.FlushAll(ctx)
			s.prepared = false
			lim, _ := s.limits(ctx)
			first, err := s.Observe(ctx, Observation{Keys: ids, Recipients: []string{"a@x"}, Time: at.Add(-3 * s.c.bucketLen)})
			if err != nil {
				t.Fatal(err)
			}
			for i, id := range ids {
				sk := s.sigKeys(id, uint64(lim.FirstSightSplit))
				rec := s.client.Get(ctx, sk.keys[0]).Val()[curHdr:]
				// every lane tc.fill records a bucket back to cb-4; the key's
				// record behind them in its lane three buckets back
				key := int(rec[3]) % 4
				if i == 1 {
					key, rec = 4+key, rec[2:8] // no class
				}
				old, lens := olderLanes(s.c.nb, func(l, j int) string {
					if j == 0 {
						return ""
					}
					r := filler(tc.fill, 9, "M")
					if l >= 4 {
						r = filler(tc.fill, 6, "S")
					}
					if l == key && j == 3 {
						r += rec
					}
					return r
				}, 0)
				s.client.Set(ctx, sk.keys[0], u32(cb)+lens+filler(20, 9, "m"), time.Hour)
				s.client.Set(ctx, sk.keys[1], old, time.Hour)
			}
			second, err := s.Observe(ctx, Observation{Keys: ids, Recipients: []string{"b@x"}, Time: at})
			if err != nil || second.Campaign.ID != first.Campaign.ID || len(second.Campaign.Joined) != 2 || second.Volumes[1] != 2 {
				t.Errorf("second copy: campaign %+v, volumes %v, %v; want campaign %d joined by both keys, volume 2",
					second.Campaign, second.Volumes, err, first.Campaign.ID)
			}
		})
	}
}

// A current string holds at most 48 records: the next key's write moves
// them to the older string's section of the bucket, newest first, and
// the current string starts again with that key; a key moved there is
// found (whole older strings or parts of them alike).
func TestRedisCurrentStringFull(t *testing.T) {
	_, s := countingRedis(t)
	ctx := context.Background()
	lim, _ := s.limits(ctx)
	// two keys of one pointer string
	byKeys := map[string]string{}
	var k1, k2 string
	for i := 0; k2 == ""; i++ {
		id := fmt.Sprintf("v1:imatch.0:%016x", i)
		sk := s.sigKeys(id, uint64(lim.FirstSightSplit))
		if other, ok := byKeys[sk.keys[0]]; ok {
			k1, k2 = other, id
		}
		byKeys[sk.keys[0]] = id
	}
	sk := s.sigKeys(k1, uint64(lim.FirstSightSplit))
	at := time.Now()
	cb := s.c.bucket(at)
	for _, older := range []int{0, 100} {
		s.client.FlushAll(ctx)
		s.prepared = false
		// with another key each time, so that only k1's pointer can
		// join the second copy to the first (a campaign's ref is a
		// hash of its first message's keys)
		first, err := s.Observe(ctx, Observation{Keys: []string{k1, "v1:sift.0:00000000000000a1"}, Recipients: []string{"a@x"}, Time: at})
		if err != nil {
			t.Fatal(err)
		}
		rec := s.client.Get(ctx, sk.keys[0]).Val()[curHdr:]
		// a full current string holding k1, and an older section of
		// the bucket before in the first main lane
		old, lens := olderLanes(s.c.nb, func(l, j int) string {
			if l == 0 && j == 1 {
				return filler(older, 9, "M")
			}
			return ""
		}, 0)
		if older == 0 {
			old, lens = "", strings.Repeat("\x00", 16)
		}
		s.client.Set(ctx, sk.keys[0], u32(cb)+lens+filler(24, 9, "m")+rec+filler(23, 9, "n"), time.Hour)
		s.client.Set(ctx, sk.keys[1], old, time.Hour)
		if _, err := s.Observe(ctx, Observation{Keys: []string{k2}, Recipients: []string{"z@x"}, Time: at}); err != nil {
			t.Fatal(err)
		}
		if n := s.client.StrLen(ctx, sk.keys[0]).Val(); n != curHdr+9 {
			t.Errorf("older %d: current string of %d bytes after the move, want %d", older, n, curHdr+9)
		}
		// the records, and a count byte a bucket of each lane that has
		// any: the fillers' lane 0 (this bucket, and the bucket before
		// when older), k1's lane when another
		counts := 1
		if older > 0 {
			counts = 2
		}
		if rec[3]%4 != 0 {
			counts++
		}
		if n, want := s.client.StrLen(ctx, sk.keys[1]).Val(), int64(9*48+9*older+counts); n != want {
			t.Errorf("older %d: older string of %d bytes after the move, want %d", older, n, want)
		}
		// the moved records newest first: lane 0's first check and first
		// pointer are the last "n" filler's (the others: "m", rec's)
		nc, n0 := counts-1, 47+older
		if rec[3]%4 == 0 {
			nc, n0 = counts, n0+1
		}
		o := s.client.Get(ctx, sk.keys[1]).Val()
		if len(o) < nc+4*n0+5 || o[nc:nc+4] != "n000" || o[nc+4*n0:nc+4*n0+5] != "0022\x00" {
			t.Errorf("older %d: lane 0 of the older string %q, want the newest record first", older, o[:min(len(o), 48)])
		}
		second, err := s.Observe(ctx, Observation{Keys: []string{k1, "v1:sift.0:00000000000000b2"}, Recipients: []string{"b@x"}, Time: at})
		if err != nil || second.Campaign.ID != first.Campaign.ID || len(second.Campaign.Joined) != 1 || second.Volumes[0] != 2 {
			t.Errorf("older %d: k1 again: campaign %+v, volumes %v, %v; want campaign %d, volume 2",
				older, second.Campaign, second.Volumes, err, first.Campaign.ID)
		}
	}
}

// curHdr is a current pointer string's header: its bucket and the older
// string's 8 lanes' lengths.
const curHdr = 4 + 2*8

// olderLanes returns an older pointer string of 8 lanes (4 main, 4
// support) of nb buckets each, the records of lane l and bucket j back
// from recs (main 9 bytes: check, pointer, class; support 6: 2 bytes of
// check, pointer), and the lanes' lengths as a current string's header
// gives them, each plus wrong. A lane is the buckets' count bytes, then
// the records' checks, then their pointers.
func olderLanes(nb int, recs func(l, j int) string, wrong int64) (old, lens string) {
	for l := range 8 {
		size, cl := 9, 4
		if l >= 4 {
			size, cl = 6, 2
		}
		var counts, checks, ptrs string
		for j := range nb {
			r := recs(l, j)
			counts += string([]byte{byte(len(r) / size)})
			for i := 0; i+size <= len(r); i += size {
				checks += r[i : i+cl]
				ptrs += r[i+cl : i+size]
			}
		}
		old += counts + checks + ptrs
		lens += u16(int64(len(counts)+len(checks)+len(ptrs)) + wrong)
	}
	return old, lens
}

// filler is n records of size bytes that match no key.
func filler(n, size int, seed string) string {
	var b []byte
	for i := range n {
		b = append(b, (fmt.Sprintf("%s%07d", seed, i) + "\x00")[:size]...) // a main record's class: none
	}
	return string(b)
}

// countingRedis starts a Redis and a store on it for a test that checks
// counts, not speed: its calls get minutes, not the default second.
func countingRedis(t *testing.T) (*testenv.Redis, *Redis) {
	t.Helper()
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	s, err := NewRedis(context.Background(), RedisOptions{Addrs: []string{r.Addr()}, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return r, s
}

// TestWithin: a caller's nearer deadline is kept as it is (no second
// timer), a farther one or none is cut to the store's timeout.
func TestWithin(t *testing.T) {
	near, cancelNear := context.WithTimeout(context.Background(), time.Second)
	defer cancelNear()
	far, cancelFar := context.WithTimeout(context.Background(), time.Hour)
	defer cancelFar()
	for _, tt := range []struct {
		name   string
		parent context.Context
		same   bool
	}{
		{"nearer deadline", near, true},
		{"farther deadline", far, false},
		{"no deadline", context.Background(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			ctx, cancel := within(tt.parent, time.Minute)
			defer cancel()
			if same := ctx == tt.parent; same != tt.same {
				t.Errorf("parent kept: %v, want %v", same, tt.same)
			}
			dl, ok := ctx.Deadline()
			if !ok || dl.After(start.Add(time.Minute+time.Second)) {
				t.Errorf("deadline %v (%v), want within a minute of %v", dl, ok, start)
			}
		})
	}
	if n := testing.AllocsPerRun(100, func() {
		_, cancel := within(near, time.Minute)
		cancel()
	}); n != 0 {
		t.Errorf("a nearer deadline kept: %.0f objects, want 0", n)
	}
}

// A new key's record is appended to its current string, in the order
// written (9 bytes: check, pointer, class), a support family's with the
// top bit of its check set and class 0; the
// second key of a message in one string appends after the first (read
// again, not taken from the first read); a move to the older string puts
// each record in its part, and every key is found again.
func TestRedisAppendOrder(t *testing.T) {
	_, s := countingRedis(t)
	ctx := context.Background()
	lim, _ := s.limits(ctx)
	split := uint64(lim.FirstSightSplit)
	// two keys of families that name campaigns and two support keys, all
	// of one current string
	var ids []string
	str := s.sigKeys("v1:imatch.0:0000000000000000", split).keys[0]
	for i, fam := 0, 0; len(ids) < 4; i++ {
		id := fmt.Sprintf("v1:%s.0:%016x", []string{"imatch", "contain"}[fam], i)
		if s.sigKeys(id, split).keys[0] == str {
			ids = append(ids, id)
			fam = 1 - fam
		}
	}
	at := time.Now()
	first, err := s.Observe(ctx, Observation{Keys: ids[:2], Recipients: []string{"a@x"}, Time: at})
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Observe(ctx, Observation{Keys: ids[2:], Recipients: []string{"a@x"}, Time: at})
	if err != nil || second.Campaign.ID == first.Campaign.ID {
		t.Fatalf("second message: %+v, %v; want a campaign of its own", second.Campaign, err)
	}
	cur := s.client.Get(ctx, str).Val()
	if len(cur) != curHdr+4*9 {
		t.Fatalf("current string of %d bytes, want %d", len(cur), curHdr+4*9)
	}
	for i, id := range ids {
		sk := s.sigKeys(id, split)
		rec := cur[curHdr+9*i : curHdr+9*i+9]
		if rec[:4] != sk.field || (rec[0] >= 0x80) != sk.sup || (sk.sup && rec[8] != 0) {
			t.Errorf("record %d %x: want %s's check %x (support %v)", i, rec, id, sk.field, sk.sup)
		}
	}
	// a bucket later a key of the string moves the four to the older
	// string; each message's keys still find their campaign
	later := at.Add(s.c.bucketLen)
	if _, err := s.Observe(ctx, Observation{Keys: ids[:1], Recipients: []string{"b@x"}, Time: later}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		keys []string
		want Result
	}{{ids[:2], first}, {ids[2:], second}} {
		res, err := s.Observe(ctx, Observation{Keys: m.keys, Recipients: []string{"c@x"}, Time: later})
		if err != nil || res.Campaign.ID != m.want.Campaign.ID || len(res.Campaign.Joined) != 2 {
			t.Errorf("%v again: campaign %+v, %v; want campaign %d joined by both keys", m.keys, res.Campaign, err, m.want.Campaign.ID)
		}
	}
}
