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
	s, err := NewRedis(ctx, RedisOptions{Addrs: []string{r.Addr()}, FirstSightSplit: 1})
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
	if err != nil || n != 4+8*FirstSightCap {
		t.Errorf("pointer string: %d bytes, %v; want %d", n, err, 4+8*FirstSightCap)
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
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	ctx := context.Background()
	s, err := NewRedis(ctx, RedisOptions{Addrs: []string{r.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Now()
	id := "v1:imatch.0:00000000000000dd"
	lim, _ := s.limits(ctx)
	sk := s.sigKeys(id, uint64(lim.FirstSightSplit))
	ref, _ := newRef([]string{id})
	ck, field := s.campKeys(ref, s.c.bucket(at), uint64(lim.FirstSightSplit))
	nb := s.c.nb
	cb := s.c.bucket(at)
	u32 := func(v int64) string { return string(binary.BigEndian.AppendUint32(nil, uint32(v))) }
	// current strings: a bucket and records; older strings: sections of
	// a bucket, a length and records
	for _, v := range []struct{ cur, old string }{
		{sk.field, sk.field},
		{"12345678" + sk.field + "12", "1234567"},
		{"1234567", u32(cb-1) + u32(800) + sk.field + "1234"},
		{u32(cb) + "12345678" + sk.field + "12", u32(cb-1) + u32(12) + "12345678" + sk.field},
		{u32(cb+1) + sk.field, u32(cb-1) + u32(7) + "1234567" + u32(cb-2) + u32(4) + sk.field},
		{u32(cb-1) + "1234" + sk.field, u32(cb-2) + u32(8) + "1234" + sk.field + u32(cb-3)},
	} {
		s.client.Set(ctx, sk.keys[0], v.cur, time.Hour)
		s.client.Set(ctx, sk.keys[1], v.old, time.Hour)
		s.client.Set(ctx, ck[nb-1], "0123456789abcdefghij"+field+"xx", time.Hour)
		res, err := s.Observe(ctx, Observation{Keys: []string{id}, Recipients: []string{"a@x"}, Time: at})
		if err != nil || res.Volumes[0] < 1 {
			t.Errorf("pointer strings %q, %q: %v, %v; want a count", v.cur, v.old, res.Volumes, err)
		}
	}
}
