package milter

import (
	"errors"
	"reflect"
	"testing"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/signature"
)

// The level header goes beside the verdict header, within the band the
// verdict header says; incoming level headers and Authentication-Results
// of the site's authserv-id below the verifier's are removed first; the
// verifier's own reach the pipeline.
func TestLevelHeaderAndForgedResults(t *testing.T) {
	env := mtaclient.Envelope{From: "news@news.example", Rcpts: []string{"ann@example.test"}}
	msg := "Authentication-Results: mx.example.test; dkim=pass header.d=news.example\n" +
		"X-Bulk-Level: 0\n" +
		"Authentication-Results: other.example; dkim=pass header.d=x.example\n" +
		"Authentication-Results: mx.example.test; dkim=pass header.d=forged.example\n" +
		"Subject: hi\n" +
		"X-Bulk-Level: 1\n" +
		"Authentication-Results: mx.example.test; dkim=pass header.d=forged2.example\n\nbody\n"
	tests := []struct {
		name    string
		verdict detect.Verdict
		except  bool
		want    []string
	}{
		{"bulk, level 8", detect.Verdict{Bulk: true, Base: true, Family: signature.FamilyIMatch, Volume: 300, Level: 8},
			false, []string{`AddHeader "X-Bulk" "yes; family=imatch; volume=300; level=8; kind=undeclared"`, `AddHeader "X-Bulk-Level" "8"`}},
		{"not bulk, level 3", detect.Verdict{Family: signature.FamilyIMatch, Volume: 6, Level: 3},
			false, []string{`AddHeader "X-Bulk" "no; family=imatch; volume=6; level=3; kind=undeclared"`, `AddHeader "X-Bulk-Level" "3"`}},
		{"bulk but every recipient exempt: below 5", detect.Verdict{Bulk: true, Base: true, Family: signature.FamilyIMatch, Volume: 300, Level: 8},
			true, []string{`AddHeader "X-Bulk" "no; family=imatch; volume=300; level=4; kind=undeclared; exempt"`, `AddHeader "X-Bulk-Level" "4"`}},
		{"store failed: level 0", detect.Verdict{Err: errors.New("down")},
			false, []string{`AddHeader "X-Bulk" "no; error=store-unavailable"`, `AddHeader "X-Bulk-Level" "0"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, func(s *State) {
				s.Actions.LevelHeader, s.Actions.AuthservID = "X-Bulk-Level", "mx.example.test"
				if tc.except {
					s.Actions.Except = NewRecipients([]string{"ann@example.test"}, nil)
				}
			})
			h.pipe.verdict = func(*detect.Message) detect.Verdict { return tc.verdict }
			res := h.send(t, env, msg)
			want := append([]string{
				`ChangeHeader 2 "X-Bulk-Level" ""`, `ChangeHeader 1 "X-Bulk-Level" ""`,
				`ChangeHeader 4 "Authentication-Results" ""`, `ChangeHeader 3 "Authentication-Results" ""`,
			}, tc.want...)
			if got := mods(res); !reflect.DeepEqual(got, want) {
				t.Errorf("modifications:\n got %q\nwant %q", got, want)
			}
			h.pipe.mu.Lock()
			defer h.pipe.mu.Unlock()
			if got := h.pipe.seen[0].AuthResults; !reflect.DeepEqual(got, []string{"mx.example.test; dkim=pass header.d=news.example"}) {
				t.Errorf("trusted results %q", got)
			}
		})
	}
}
