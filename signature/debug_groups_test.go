package signature

import (
	"strings"
	"testing"
)

func TestMeasureDebugGroups(t *testing.T) {
	needMeasure(t)
	b, ham, _ := measureData(t)
	lex, _ := b.Build(DefaultLexiconParams())
	sp := DefaultShingleParams()
	sp.Width, sp.Sample.Rows = 3, 3
	s, _ := NewShingle(testSecret(t), lex, sp)
	ng := len(newsgroups(t, "test"))
	by := map[Key][]int{}
	for i, d := range ham[:ng] {
		ks, _ := s.Sign(d, nil)
		for _, k := range ks {
			by[k] = append(by[k], i)
		}
	}
	for k, ids := range by {
		if len(ids) >= 5 {
			t.Logf("key %v: %d docs", k, len(ids))
			for _, i := range ids[:3] {
				toks := ham[i].Tokens
				t.Logf("   %d toks: %s ... %s", len(toks), strings.Join(toks[:min(12, len(toks))], " "), strings.Join(toks[max(0, len(toks)-25):], " "))
			}
		}
	}
}
