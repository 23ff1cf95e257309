package explain

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/mailtext"
	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// A report survives JSON both ways (the command prints what the daemon's
// endpoint sent), and every verdict, failed or unsigned, gets its reasons.
func TestReport(t *testing.T) {
	th := func(signature.Family) int { return 10 }
	a := &detect.Analysis{
		Text:     &mailtext.Text{Subject: "hi", Parts: []mailtext.Part{{ContentType: "text/html", Text: "a\nb"}}, Stats: mailtext.Stats{HiddenChars: 7}},
		Doc:      &signature.Doc{Tokens: []string{"hi", "a", "b"}, Stats: signature.DocStats{Removed: 2}},
		Keys:     []signature.Key{{Family: signature.FamilyIMatch, Index: 0, Hash: 1}, {Family: signature.FamilyIMatch, Index: 1, Hash: 2}},
		Explains: []signature.Explain{{Family: signature.FamilyIMatch, Keys: 2}, {Family: signature.FamilyShingle, Declined: "too few words"}},
	}
	tests := []struct {
		name string
		v    detect.Verdict
		res  store.Result
		why  string
	}{
		{"counted", detect.Verdict{Bulk: true, Base: true, Family: signature.FamilyIMatch, Volume: 30, Level: 7, LevelWhy: []string{"volume 3.00× the threshold", "undeclared: +1"},
			IDs: []string{"s1:imatch.0:1", "s1:imatch.1:2"}, Analysis: a}, store.Result{Volumes: []int64{30, 4}, Votes: []store.Tally{{}, {NotBulk: 1}}}, "undeclared: +1"},
		{"campaign votes", detect.Verdict{Family: signature.FamilyIMatch, Volume: 30, IDs: []string{"s1:imatch.0:1", "s1:imatch.1:2"}, Analysis: a},
			store.Result{Volumes: []int64{30, 30}, Votes: make([]store.Tally, 2), Campaign: store.Campaign{ID: 0x7f3a91c2, Recipients: 30, First: time.Unix(1e9, 0).UTC()},
				CampaignVotes: store.Tally{NotBulk: 3, Bulk: 1}}, "Campaign 7f3a91c2: 30 recipients, 0 networks, 0 senders, first seen 2001-09-09T01:46:40Z\n  votes: 3 not bulk, 1 bulk\n"},
		{"exempt sender", detect.Verdict{Bulk: true, Base: true, Family: signature.FamilyIMatch, Volume: 30, Level: 7, ExemptSender: "partner.example",
			IDs: []string{"s1:imatch.0:1", "s1:imatch.1:2"}, Analysis: a}, store.Result{Volumes: []int64{30, 4}},
			"  header: no; family=imatch; volume=30; level=4; kind=undeclared; exempt=sender\n  level 4: \n  kind: undeclared\n" +
				"  volumes: the store as it is now; this message's own recipients are not added\n" +
				"  exempt: the site's verifier passed the DKIM signature of partner.example, in actions.except_senders, and From is in that domain: counted, never tagged or routed\n"},
		{"store failed", detect.Verdict{Err: errors.New("down"), Analysis: a}, store.Result{}, "the store could not be read"},
		{"unsigned", detect.Verdict{Unsigned: true, Analysis: a}, store.Result{}, "no family could sign"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New("m.eml", tt.v, tt.res, th)
			b, err := json.Marshal(&r)
			if err != nil {
				t.Fatal(err)
			}
			var back Report
			if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, r) {
				t.Fatalf("JSON round trip: %v\n got %+v\nwant %+v", err, back, r)
			}
			var text strings.Builder
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"== m.eml", "7 characters of HTML text hidden", "2 zero-width", "shingle       declined: too few words", tt.why} {
				if !strings.Contains(text.String(), want) {
					t.Errorf("text lacks %q:\n%s", want, text.String())
				}
			}
			if tt.name == "exempt sender" && (r.Verdict.Bulk || r.Verdict.ExemptSender != "partner.example" || strings.Contains(text.String(), "not bulk to a recipient?")) {
				t.Errorf("exempt sender: verdict %+v; want not bulk, exempt by partner.example, no false-tag advice", r.Verdict)
			}
			if tt.name == "counted" && (r.Families[0].Volume != 30 || r.Families[0].Keys[1].NotBulk != 1 || r.Verdict.Level != 7) {
				t.Errorf("families %+v, level %d", r.Families, r.Verdict.Level)
			}
		})
	}
}
