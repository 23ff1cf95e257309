package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/store"
)

// A message to 100,000 recipients (detect.Limits' default) is counted
// whole in calls of store.MaxRecipients, as detect makes them: the
// campaign's volume is every recipient, within the HyperLogLog's error,
// and a later copy to one more recipient sees it.
func testRecipientFlood(t *testing.T, s store.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const n = 100_000
	rcpts := make([]string, n)
	for i := range rcpts {
		rcpts[i] = fmt.Sprintf("user%06d@flood.example", i)
	}
	keys := []string{"v1:imatch.0:flood", "v1:shingle.0:flood"}
	var res store.Result
	for i := 0; i < n; i += store.MaxRecipients {
		var err error
		res, err = s.Observe(ctx, store.Observation{Keys: keys, Recipients: rcpts[i:min(i+store.MaxRecipients, n)], Time: t0()})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The HyperLogLogs' standard error is 0.81 %; 3 % is over three of it.
	const lo, hi = n * 97 / 100, n * 103 / 100
	if c := res.Campaign.Recipients; c < lo || c > hi {
		t.Errorf("campaign volume %d after %d recipients", c, n)
	}
	next, err := s.Observe(ctx, store.Observation{Keys: keys, Recipients: []string{"late@flood.example"}, Time: t0()})
	if err != nil {
		t.Fatal(err)
	}
	if next.Campaign.ID != res.Campaign.ID || next.Campaign.Recipients < lo || next.Volumes[0] < lo {
		t.Errorf("the next copy: campaign %+v volumes %v, want campaign %08x with about %d", next.Campaign, next.Volumes, res.Campaign.ID, n)
	}
}

func TestRecipientFloodEmbedded(t *testing.T) {
	s, err := store.OpenEmbedded(store.EmbeddedOptions{Params: store.Params{Now: t0}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testRecipientFlood(t, s)
}

func TestRecipientFloodRedis(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	s, err := store.NewRedis(context.Background(), store.RedisOptions{Addrs: []string{r.Addr()}, Timeout: 2 * time.Minute, Params: store.Params{Now: t0}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testRecipientFlood(t, s)
}
