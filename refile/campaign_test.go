package refile

import (
	"errors"
	"regexp"
	"testing"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// A verdict's campaign is the store's; without one (a store that counts
// none), it is named by the first I-Match key, as a hash; without a key
// or a verdict, none.
func TestCampaignOf(t *testing.T) {
	keys := []signature.Key{{Family: signature.FamilyShingle, Hash: 1}, {Family: signature.FamilyIMatch, Hash: 2}, {Family: signature.FamilyIMatch, Index: 1, Hash: 3}}
	ids := []string{"s1:shingle.0:01", "s1:imatch.0:02", "s1:imatch.1:03"}
	v := detect.Verdict{Analysis: &detect.Analysis{Keys: keys}, IDs: ids}
	name := CampaignOf(v)
	if !regexp.MustCompile(`^i[0-9a-f]{16}$`).MatchString(name) {
		t.Fatalf("CampaignOf = %q, want i and 16 hex digits", name)
	}
	other := v
	other.IDs = []string{"s1:shingle.0:01", "s1:imatch.0:ff", "s1:imatch.1:03"}
	if CampaignOf(other) == name {
		t.Error("another first I-Match key gives the same name")
	}
	counted := v
	counted.Campaign = store.Campaign{ID: 0xc0ffee, Recipients: 3}
	if got := CampaignOf(counted); got != "00c0ffee" || got != counted.CampaignID() {
		t.Errorf("with the store's campaign: CampaignOf = %q, want %q as the verdict names it", got, counted.CampaignID())
	}
	for what, v := range map[string]detect.Verdict{
		"no I-Match key": {Analysis: &detect.Analysis{Keys: keys[:1]}, IDs: ids[:1]},
		"unsigned":       {Unsigned: true, Analysis: &detect.Analysis{}},
		"store error":    {Err: errors.New("down"), Analysis: &detect.Analysis{Keys: keys}, IDs: ids},
		"no analysis":    {},
	} {
		if got := CampaignOf(v); got != "" {
			t.Errorf("%s: CampaignOf = %q, want none", what, got)
		}
	}
}
