package detect_test

import (
	"context"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/store"
)

// deadlineStore is an embedded store that remembers whether its last
// Observe had a deadline.
type deadlineStore struct {
	*store.Embedded
	had bool
}

func (s *deadlineStore) Observe(ctx context.Context, o store.Observation) (store.Result, error) {
	_, s.had = ctx.Deadline()
	return s.Embedded.Observe(ctx, o)
}

type unbudgetedStore struct{ *deadlineStore }

func (unbudgetedStore) Unbudgeted() {}

// A store across a network gets the per-message budget; a store that
// says it needs none (detect.Unbudgeted, the daemon's embedded store)
// gets the caller's context as it is, and no timer a message.
func TestStoreBudget(t *testing.T) {
	for _, unbudgeted := range []bool{false, true} {
		e, err := store.OpenEmbedded(store.EmbeddedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		ds := &deadlineStore{Embedded: e}
		var st detect.Store = ds
		if unbudgeted {
			st = unbudgetedStore{ds}
		}
		eng := benchEngine(t, st)
		body := strings.Repeat("a message long enough to be signed by the families, word after word. ", 20)
		m := &detect.Message{Body: strings.NewReader(body), Recipients: []string{"u@example.test"}}
		m.Header.Set("Subject", "budget")
		if v := eng.Check(context.Background(), m); v.Err != nil || v.Unsigned {
			t.Fatalf("unbudgeted=%v: verdict %+v", unbudgeted, v)
		}
		if ds.had == unbudgeted {
			t.Errorf("unbudgeted=%v: the store's context had a deadline: %v", unbudgeted, ds.had)
		}
	}
}
