package detect

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/bundled"
	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// TestCheckUsesMessageTime replays one message to twelve recipients: an
// hour apart they add up to a bulk verdict, two days apart each copy is
// alone in the store's window.
func TestCheckUsesMessageTime(t *testing.T) {
	lex, err := bundled.Lexicon()
	if err != nil {
		t.Fatal(err)
	}
	sec, err := signature.NewSecret([]byte("time test secret 0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	p := signature.DefaultSetParams()
	p.Secret, p.Lexicon = sec, lex
	set, err := signature.NewSet(p)
	if err != nil {
		t.Fatal(err)
	}
	body := `The annual general meeting of the allotment society takes place in the
village hall next Thursday evening. We will discuss the water supply, the
new compost bins, the plot inspections and the summer show. Members who
cannot attend may send their questions to the secretary before Monday.`
	start := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		gap      time.Duration
		wantBulk int
	}{{time.Hour, 3}, {48 * time.Hour, 0}} {
		st, err := store.OpenEmbedded(store.EmbeddedOptions{Params: store.Params{Window: 24 * time.Hour, Secret: bytes.Repeat([]byte{7}, 32)}})
		if err != nil {
			t.Fatal(err)
		}
		th := map[signature.Family]int{}
		for _, s := range set.Signers() {
			th[s.Family()] = 10
		}
		e, err := New(Options{Limits: DefaultLimits, Set: set, Store: st, Thresholds: th})
		if err != nil {
			t.Fatal(err)
		}
		bulk := 0
		for i := range 12 {
			var h textproto.Header
			h.Add("Subject", "Allotment society meeting")
			v := e.Check(context.Background(), &Message{
				Header: h, Body: bytes.NewReader([]byte(body)),
				Recipients: []string{fmt.Sprintf("member%d@example.org", i)},
				Time:       start.Add(time.Duration(i) * tc.gap),
			})
			if v.Err != nil {
				t.Fatal(v.Err)
			}
			if v.Bulk {
				bulk++
			}
		}
		st.Close()
		if bulk != tc.wantBulk {
			t.Errorf("copies %s apart: %d bulk, want %d", tc.gap, bulk, tc.wantBulk)
		}
	}
}
