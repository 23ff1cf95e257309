package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/daemon"
	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/store"
)

// TestMeasureRescue measures how votes carry over to other copies of a
// randomised campaign (campaign(): personalised, four random words per
// copy) under the daemon's real pipeline and policy, over many secrets:
// how often a voter's next copy is rescued for her, how often a new
// recipient's copy is rescued after V distinct voters, and how often a
// different message that quotes the campaign's footer inherits a vote. It
// is a measurement, not a pass/fail test: run it with
//
//	BULKMILTER_MEASURE=1 go test -run TestMeasureRescue -v ./cmd/milterd/
//
// docs/feedback.md quotes its output.
func TestMeasureRescue(t *testing.T) {
	if os.Getenv("BULKMILTER_MEASURE") == "" {
		t.Skip("measurement; set BULKMILTER_MEASURE=1 to run it")
	}
	const trials, copies = 100, 20
	var userRescued, quoteRescued int
	globalRescued := map[int]int{}
	for trial := range trials {
		for _, voters := range []int{0, 3, 5} {
			c := config.Default()
			c.DataDir = t.TempDir() // a new secret each trial
			rt, err := daemon.NewRuntime(&c, slog.New(slog.DiscardHandler), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(trial), uint64(voters)))
			check := func(i, r int, raw []byte) detect.Verdict {
				if raw == nil {
					raw = campaign(i, recipientAddr(r), recipientName(r), rng)
				}
				return rt.Engine().Check(context.Background(), parseRaw(t, raw, recipientAddr(r)))
			}
			vote := func(i, r int) {
				raw := campaign(i, recipientAddr(r), recipientName(r), rng)
				a := rt.Engine().Analyze(parseRaw(t, raw, recipientAddr(r)))
				ids := make([]string, len(a.Keys))
				for k, key := range a.Keys {
					ids[k] = rt.Engine().StoreID(key)
				}
				if err := rt.Store().RecordVote(context.Background(), store.Vote{Keys: ids, Voter: recipientAddr(r), Kind: store.VoteNotBulk}); err != nil {
					t.Fatal(err)
				}
			}
			for i := 1; i <= copies; i++ {
				check(i, i, nil)
			}
			if voters == 0 {
				// One voter: her own copy, then her next copy and a message
				// quoting the footer, both sent to her.
				vote(copies+1, 12)
				if v := check(copies+2, 12, nil); !v.Bulk {
					userRescued++
				}
				// The quoting message is itself a mass mailing (to 12
				// others first), so only her vote could rescue it for her.
				for r := 40; r < 52; r++ {
					check(0, r, footerQuote(recipientAddr(r)))
				}
				v := check(0, 12, footerQuote(recipientAddr(12)))
				if !v.Base {
					t.Fatalf("the quoting mailing is not bulk by volume: %s", v.Header(false))
				}
				if !v.Bulk {
					quoteRescued++
				}
			} else {
				for k := range voters {
					vote(copies+1+k, 30+k)
				}
				if v := check(copies+10, 99, nil); !v.Bulk {
					globalRescued[voters]++
				}
			}
			rt.Close()
		}
	}
	t.Logf("over %d secrets, a campaign of %d randomised copies:", trials, copies)
	t.Logf("  voter's next copy rescued for her:                  %d/%d", userRescued, trials)
	t.Logf("  new recipient's copy rescued after 3 voters:        %d/%d", globalRescued[3], trials)
	t.Logf("  new recipient's copy rescued after 5 voters:        %d/%d", globalRescued[5], trials)
	t.Logf("  other mailing quoting the footer rescued for voter: %d/%d", quoteRescued, trials)
}

// footerQuote is a different message that ends with the campaign's footer
// paragraph, as a message quoting a newsletter or sharing its template.
func footerQuote(rcpt string) []byte {
	return []byte(fmt.Sprintf(`From: "Tenants" <board@tenants.example>
To: <%s>
Subject: Minutes of the tenants meeting

Dear neighbours,
the tenants association met on Tuesday evening in the community room. We discussed
the broken elevator in the north staircase, the new recycling bins in the courtyard,
and the proposal to plant trees along the parking lot. The landlord promised to repair
the elevator before the end of the month.

Visit our store for discounted seed collections, organic fertilizer and
durable tools. Members receive free shipping on every order this month.

Happy gardening,
The Garden Weekly team
`, rcpt))
}

func parseRaw(t testing.TB, raw []byte, rcpt string) *detect.Message {
	br := bufio.NewReader(bytes.NewReader(raw))
	h, err := textproto.ReadHeader(br)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(br)
	return &detect.Message{Header: h, Body: bytes.NewReader(body), Recipients: []string{rcpt}}
}
