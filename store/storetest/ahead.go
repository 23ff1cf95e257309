package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/store"
)

// Times ahead of the store's clock (store/ahead.go): an observation dated
// years ahead is counted at the store's present, and neither it nor the
// buckets a clock stepped back from keep the present from being counted.

// testClock is a store clock the test sets.
type testClock struct{ ms atomic.Int64 }

func (c *testClock) set(t time.Time)     { c.ms.Store(t.UnixMilli()) }
func (c *testClock) now() time.Time      { return time.UnixMilli(c.ms.Load()).UTC() }
func (c *testClock) add(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// spreadKeys returns n keys of one message of family f, numbered from i:
// a message of many keys falls in every shard of a sharded store.
func spreadKeys(f string, i, n int) []string {
	out := make([]string, n)
	for j := range out {
		out[j] = fmt.Sprintf("v1:%s.%d:%016x", f, j%4, (i+j)*0x9e3779b1+7)
	}
	return out
}

// pairs observes, in each of n buckets from the clock on, two copies of a
// new campaign to two recipients, and checks the second joins the first:
// the present's pointers and first sightings were kept in every bucket.
func pairs(t *testing.T, st store.Store, clock *testClock, l time.Duration, n int, tag string) {
	t.Helper()
	for j := range n {
		keys := spreadKeys("imatch", 1<<20+j*64, 3)
		at := clock.now()
		first := observe(t, st, at, keys, fmt.Sprintf("%s-a%d@x", tag, j))
		second := observe(t, st, at.Add(time.Second), keys, fmt.Sprintf("%s-b%d@x", tag, j))
		if c := second.Campaign; c.ID != first.Campaign.ID || c.Recipients != 2 || len(c.Joined) != 3 {
			t.Errorf("%s, bucket %d (%v): second copy's campaign %+v, want %08x of 2 recipients joined by its 3 keys",
				tag, j, at, c, first.Campaign.ID)
		}
		clock.add(l)
	}
}

func (s *suite) timesAhead(t *testing.T) {
	w := 24 * time.Hour
	l := w / 4
	base := aligned(t0, w, 4).Add(time.Minute)
	var clock testClock
	clock.set(base)
	st := s.open(t, store.Params{Window: w, Buckets: 4, Now: clock.now})
	ctx := context.Background()

	a := observe(t, st, base, copyKeys(0), "a0@x").Campaign
	// Copies dated years ahead, in every residue of the ring (one slot a
	// bucket, five slots), many keys and campaigns each so that every
	// shard has some.
	far := []time.Time{time.Date(2087, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(9744, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := range 300 {
		far = append(far, base.AddDate(20, 0, 0).Add(time.Duration(i)*l))
	}
	for i, at := range far {
		res := observe(t, st, at, spreadKeys("shingle", i*8, 8), fmt.Sprintf("far%d@x", i))
		if c := res.Campaign; (c.First.After(clock.now()) || c.Recipients != 1) && !t.Failed() {
			t.Errorf("a new campaign dated %v: %+v, want 1 recipient first seen at the present (%v) at the latest", at, c, clock.now())
		}
	}
	// A copy of campaign a dated ahead joins it and counts at the present.
	res := observe(t, st, time.Date(2087, 3, 1, 0, 0, 0, 0, time.UTC), copyKeys(1), "far@x")
	if c := res.Campaign; c.ID != a.ID || c.Recipients != 2 || !c.First.Equal(base) {
		t.Errorf("a copy dated 2087: campaign %+v, want %08x of 2 recipients first seen %v", c, a.ID, base)
	}
	// A vote dated ahead is cast at the present.
	if err := st.RecordVote(ctx, store.Vote{Keys: copyKeys(1)[:1], Voter: "v@x", Kind: store.VoteBulk,
		Time: time.Date(2087, 3, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	votes, err := admin(t, st).ListVotes(ctx, store.VoteQuery{Voter: "v@x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(votes) == 0 {
		t.Errorf("a vote dated 2087: none listed")
	}
	for _, v := range votes {
		if v.Time.After(clock.now()) {
			t.Errorf("a vote dated 2087 is listed at %v, after the store's clock %v", v.Time, clock.now())
		}
	}

	// The present goes on, bucket by bucket, over two rings' worth.
	clock.add(time.Minute)
	pairs(t, st, &clock, l, 10, "present")

	// Out of order within the window: a campaign seen three buckets
	// back and now; a copy two buckets late joins it.
	at, ks := clock.now(), spreadKeys("imatch", 1<<21, 3)
	c := observe(t, st, at.Add(-3*l), ks, "late-a@x").Campaign
	observe(t, st, at, ks, "late-b@x")
	if late := observe(t, st, at.Add(-2*l), ks, "late-c@x").Campaign; late.ID != c.ID || late.Recipients != 3 {
		t.Errorf("a copy two buckets late: campaign %+v, want %08x of 3 recipients", late, c.ID)
	}
	// One dated before the window is no trouble for the present either.
	observe(t, st, at.Add(-3*w), ks, "old@x")
	if got := observe(t, st, at.Add(time.Second), ks, "late-d@x").Campaign; got.ID != c.ID || got.Recipients != 4 {
		t.Errorf("after a copy dated before the window: campaign %+v, want %08x of 4 recipients", got, c.ID)
	}
	// Campaign a was counted at base, the copy dated 2087 too: both have
	// left the window.
	if got := observe(t, st, clock.now(), copyKeys(2)).Campaign; got.Recipients != 0 {
		t.Errorf("campaign a a window later: %+v, want nothing left (its copies were counted at %v)", got, base)
	}
}

// clockSteppedBack: a host clock stepped back (NTP step, VM restore)
// leaves buckets ahead of the clock; the present is counted all the same.
func (s *suite) clockSteppedBack(t *testing.T) {
	w := 24 * time.Hour
	l := w / 4
	base := aligned(t0, w, 4).Add(time.Minute)
	var clock testClock
	clock.set(base.Add(2 * w))
	st := s.open(t, store.Params{Window: w, Buckets: 4, Now: clock.now})
	// Two days of traffic at a clock that was two days fast: pointers and
	// first sightings in every shard and every slot of the ring.
	for i := range 300 {
		observe(t, st, time.Time{}, spreadKeys("shingle", i*8, 8), fmt.Sprintf("fast%d@x", i))
		clock.add(2 * w / 300)
	}
	clock.set(base)
	pairs(t, st, &clock, l, 10, "stepped back")
}

// oldMessage: a message dated a window or more before the newest bucket
// its keys' pointers were written in (a forged or wrong Date replayed, a
// late retry), at a clock that has the newer bucket in its present, keeps
// those pointers: the next copy of the present joins its campaign by its
// keys. (The embedded store's ring refuses the old write; a Redis pointer
// string once gave its place to the old message, as to a clock stepped
// back, and the next copy started a campaign of its own.)
func (s *suite) oldMessage(t *testing.T) {
	w := 24 * time.Hour
	base := aligned(t0, w, 4).Add(time.Minute)
	var clock testClock
	clock.set(base.Add(time.Hour))
	st := s.open(t, store.Params{Window: w, Buckets: 4, Now: clock.now})
	keys := spreadKeys("imatch", 1<<22, 3)
	first := observe(t, st, base, keys, "a@x")
	observe(t, st, base.Add(-3*w), keys, "old@x")
	// Another key too: the copy's own campaign would have another ref, so
	// only the first copy's pointers can join it.
	next := observe(t, st, base.Add(time.Minute), append(keys, familyKey("shingle", 0, 0x51)), "b@x")
	if c := next.Campaign; c.ID != first.Campaign.ID || c.Recipients != 2 || len(c.Joined) != 3 {
		t.Errorf("the next copy: campaign %+v, want %08x of 2 recipients joined by its 3 keys", c, first.Campaign.ID)
	}
}

// oldCopies: two copies dated before the window of the store's present
// (a wrong Date replayed, a late retry) are counted and keep nothing: the
// second does not join the first, whatever keys they share, and the
// present is untouched. (The embedded store's rings hold the present's
// buckets and refuse the old writes; Redis wrote them to strings of the
// old bucket, and the second copy joined the first, 25 messages of the
// real stream on the Date clock.)
func (s *suite) oldCopies(t *testing.T) {
	w := 24 * time.Hour
	l := w / 4
	base := aligned(t0, w, 4).Add(time.Minute)
	var clock testClock
	clock.set(base.Add(time.Hour))
	st := s.open(t, store.Params{Window: w, Buckets: 4, Now: clock.now})
	// The present's traffic: pointers and first sightings in every shard
	// in each of the window's five buckets.
	for b := range 5 {
		for i := range 100 {
			observe(t, st, base.Add(time.Duration(b-4)*l), spreadKeys("shingle", (b*100+i)*8, 8), fmt.Sprintf("now%d-%d@x", b, i))
		}
	}
	keys := spreadKeys("imatch", 1<<24, 3)
	old := base.Add(-2 * w)
	for i, r := range []string{"old-a@x", "old-b@x"} {
		if c := observe(t, st, old.Add(time.Duration(i)*time.Minute), keys, r).Campaign; c.Recipients != 1 || len(c.Joined) != 0 {
			t.Errorf("old copy %d: campaign %+v, want its own of 1 recipient, joined by no key", i, c)
		}
	}
	if c := observe(t, st, base, keys, "now@x").Campaign; c.Recipients != 1 || len(c.Joined) != 0 {
		t.Errorf("the present's copy: campaign %+v, want its own of 1 recipient", c)
	}
}

// campaignAfterWindow: a campaign whose copies all left the window is
// gone, whatever its record's time to live: a copy of the same keys a
// window later (same ref) starts it afresh, its volume, networks and
// first time its own. (A Redis record outlived its window in a replay,
// whose time runs ahead of the keys' real-time TTLs, and carried its
// networks into the ref's next campaign.)
func (s *suite) campaignAfterWindow(t *testing.T) {
	w := 24 * time.Hour
	base := aligned(t0, w, 4).Add(time.Minute)
	var clock testClock
	clock.set(base.Add(3 * w))
	st := s.open(t, store.Params{Window: w, Buckets: 4, Now: clock.now})
	keys := spreadKeys("attach", 1<<23, 2)
	for i := range 3 {
		res, err := st.Observe(context.Background(), store.Observation{Keys: keys, Recipients: []string{fmt.Sprintf("r%d@x", i)},
			Time: base.Add(time.Duration(i) * time.Minute), Network: fmt.Sprintf("192.0.2.%d", i)})
		if err != nil || res.Campaign.Recipients != int64(i+1) || res.Campaign.Networks != int64(i+1) {
			t.Fatalf("copy %d: campaign %+v, %v; want %d recipients from %d networks", i, res.Campaign, err, i+1, i+1)
		}
	}
	later := base.Add(2 * w)
	res, err := st.Observe(context.Background(), store.Observation{Keys: keys, Recipients: []string{"r0@x"}, Time: later, Network: "198.51.100.1"})
	if c := res.Campaign; err != nil || c.Recipients != 1 || c.Networks != 1 || !c.First.Equal(later.Truncate(time.Second)) {
		t.Errorf("a copy two windows later: campaign %+v, %v; want 1 recipient from 1 network, first seen %v", c, err, later)
	}
}
