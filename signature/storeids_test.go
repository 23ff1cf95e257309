package signature

import (
	"slices"
	"testing"
)

// StoreIDs gives exactly what StoreID gives key by key.
func TestStoreIDs(t *testing.T) {
	p := DefaultSetParams()
	p.Secret, p.Lexicon = testSecret(t), testLexicon(t)
	s, err := NewSet(p)
	if err != nil {
		t.Fatal(err)
	}
	keys := []Key{
		{Family: FamilyIMatch, Index: 0, Hash: 0},
		{Family: FamilyIMatch, Index: 21, Hash: 1<<64 - 1},
		{Family: FamilyShingle, Index: 3, Hash: 0xab},
		{Family: FamilyCharShingle, Index: 255, Hash: 0x0123456789abcdef},
		{Family: FamilySift, Index: 1, Hash: 0xab},
		{Family: Family(77), Index: 9, Hash: 42},
	}
	want := make([]string, len(keys))
	for i, k := range keys {
		want[i] = s.StoreID(k)
	}
	if got := s.StoreIDs(keys); !slices.Equal(got, want) {
		t.Errorf("StoreIDs = %q\nwant %q", got, want)
	}
	if got := s.StoreIDs(nil); got != nil {
		t.Errorf("StoreIDs(nil) = %q", got)
	}
}
