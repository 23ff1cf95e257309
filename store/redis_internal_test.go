package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// A pointer string full at FirstSightCap records: later keys of the same
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
	for i := 0; len(ids) < FirstSightCap+20; i++ {
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
	sk := s.sigKeys(ids[0], 1)
	n, err := s.client.StrLen(ctx, sk.keys[0]).Result()
	if err != nil || n != 8+8*FirstSightCap {
		t.Errorf("pointer string: %d bytes, %v; want %d", n, err, 8+8*FirstSightCap)
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
	if n2, _ := s.client.StrLen(ctx, sk.keys[0]).Result(); n2 != n {
		t.Errorf("the full string grew to %d bytes", n2)
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
	// current strings: a bucket, the main records' length, the records;
	// older strings: the main part's length, the main part, the support
	// part, its length, each part sections of a bucket (2 bytes) and the
	// records' length (2 bytes), then the records (support: 2 bytes of
	// check)
	chk := sk.field[2:]
	older := func(main, sup string) string { return u32(int64(len(main))) + main + sup + u32(int64(len(sup))) }
	for _, v := range []struct{ cur, old string }{
		{sk.field, sk.field},
		{"12345678" + sk.field + "12", "1234567"},
		{"1234567", older(u16(cb-1)+u16(800)+sk.field+"1234", "")},
		{u32(cb) + u32(12) + "12345678" + sk.field + "12", older(u16(cb-1)+u16(12)+"12345678"+sk.field, "")},
		{u32(cb) + u32(800) + sk.field + "1234", older("", u16(cb-1)+u16(800)+chk+"1234")},
		{u32(cb+1) + u32(4) + sk.field, older(u16(cb-1)+u16(7)+"1234567"+u16(cb-2)+u16(4)+sk.field, "")},
		{u32(cb-1) + u32(12) + "1234" + sk.field + "5678", older(u16(cb-2)+u16(8)+"1234"+sk.field, u16(cb-2)+u16(4)+chk+u16(cb-3))},
		{u32(cb-1) + u32(0) + "12" + sk.field + "34", older("", u16(cb-2)+u16(7)+"1"+chk+"1234"+u16(cb-3))},
		{"", u32(9000) + sk.field + chk + u32(9000)},
		{"", u32(4) + u16(cb-1) + u16(8) + sk.field + "1234" + u32(0)},
		{"", sk.field + "12" + u32(0xffffffff)},
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
// records), another family's with 4 (8 bytes), and both are found there.
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
	for i, want := range []int64{8 + 4 + 8, 8 + 4 + 6} {
		if n, err := s.client.StrLen(ctx, sks[i].keys[1]).Result(); err != nil || n != want {
			t.Errorf("%s: older string of %d bytes, %v; want %d", ids[i], n, err, want)
		}
		if n, err := s.client.StrLen(ctx, sks[i].keys[0]).Result(); err != nil || n != 8+8 {
			t.Errorf("%s: current string of %d bytes, %v; want 16", ids[i], n, err)
		}
	}
}

// At density a key reads only its part of the older string, from its end
// of the string (GETRANGE), as much as its current string suggests, and
// the rest when that falls short: a key whose record is in the oldest
// section, behind hundreds of others, is found either way, a family that
// names campaigns (main part, read from the start) and a support family
// (read from the end).
func TestRedisOlderPartRead(t *testing.T) {
	_, s := countingRedis(t)
	ctx := context.Background()
	lim, _ := s.limits(ctx)
	ids := []string{"v1:imatch.0:00000000000000aa", "v1:contain.0:00000000000000bb"}
	at := time.Now()
	cb := s.c.bucket(at)
	fill := func(n, size int, seed string) string {
		var b []byte
		for i := range n {
			b = append(b, fmt.Sprintf("%s%07d", seed, i)[:size]...)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name       string
		cur, older int // records in the current string, and in each older section
	}{
		{"the guess covers the part", 200, 150},
		{"the guess falls short", 40, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.client.FlushAll(ctx)
			s.prepared = false
			lim, _ = s.limits(ctx)
			first, err := s.Observe(ctx, Observation{Keys: ids, Recipients: []string{"a@x"}, Time: at.Add(-3 * s.c.bucketLen)})
			if err != nil {
				t.Fatal(err)
			}
			for i, id := range ids {
				sk := s.sigKeys(id, uint64(lim.FirstSightSplit))
				cur, err := s.client.Get(ctx, sk.keys[0]).Result()
				if err != nil || len(cur) != 16 {
					t.Fatalf("%s: current string %q, %v", id, cur, err)
				}
				rec := cur[8:]
				// a current string of the last bucket, full of other keys
				c := u32(cb-1) + u32(int64(8*tc.cur/2)) + fill(tc.cur/2, 8, "m") + fill(tc.cur/2, 8, "s")
				var main, sup string
				for bk := cb - 2; bk >= cb-4; bk-- {
					mr, sr := fill(tc.older, 8, "M"), fill(tc.older, 6, "S")
					if bk == cb-3 && i == 0 {
						mr += rec
					}
					if bk == cb-3 && i == 1 {
						sr += rec[2:]
					}
					main += u16(bk) + u16(int64(len(mr))) + mr
					sup += u16(bk) + u16(int64(len(sr))) + sr
				}
				s.client.Set(ctx, sk.keys[0], c, time.Hour)
				s.client.Set(ctx, sk.keys[1], u32(int64(len(main)))+main+sup+u32(int64(len(sup))), time.Hour)
			}
			second, err := s.Observe(ctx, Observation{Keys: ids, Recipients: []string{"b@x"}, Time: at})
			if err != nil || second.Campaign.ID != first.Campaign.ID || len(second.Campaign.Joined) != 2 || second.Volumes[1] != 2 {
				t.Errorf("second copy: campaign %+v, volumes %v, %v; want campaign %d joined by both keys, volume 2",
					second.Campaign, second.Volumes, err, first.Campaign.ID)
			}
		})
	}
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
