package corpus

import (
	"strings"
	"testing"
)

func TestTRECIndex(t *testing.T) {
	for _, tc := range []struct {
		name, index string
		want        map[string]bool
		err         bool
	}{
		{"labels", "spam ../data/inmail.1\nham ../data/inmail.2\n", map[string]bool{"inmail.1": true, "inmail.2": false}, false},
		{"bad label", "spam ../data/inmail.1\nSPAM ../data/inmail.2\n", nil, true},
		{"missing path", "ham\n", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]bool{}
			err := TRECIndex("index", strings.NewReader(tc.index), got)
			if (err != nil) != tc.err {
				t.Fatalf("got error %v, want error %v", err, tc.err)
			}
			for k, v := range tc.want {
				if got[k] != v || len(got) != len(tc.want) {
					t.Errorf("got %v, want %v", got, tc.want)
					break
				}
			}
		})
	}
}
