package signature

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzCanonicalize checks the form of the canonical output on any input:
// non-empty tokens of valid UTF-8 without spaces, a letters stream without
// spaces whose Subject part ends on a character, consistent stats, lines
// in order within the tokens, the first the Subject's, and the same result
// twice.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		"Buy V1@GR@ now", "V i a g r a", "Рaypal ве\u200bрификация", "東京都に住んで", "\u202Eargaiv",
		"|<|\\/|()", "a b\n> c d\n-- \ne f", "x\n\n____\n\ny", "$1.99 US$5 100mg", "ΑΘΗΝΑ σας", "a\u0301\u0302\u0303", "www.x.com a@b.c http://x",
		"東京、大阪。「安い」！", "ＦＲＥＥ　ｍｏｎｅｙ", "fr33 c@$h 4 u!!! on 12/25/2026 at 10:30", "--==**## __",
	} {
		f.Add(s, "name")
	}
	f.Fuzz(func(t *testing.T, text, strip string) {
		src := Source{Subject: text, Parts: []string{text, strings.ToUpper(text)}, Strip: []string{strip}, Domains: []string{text}}
		d := Canonicalize(src)
		for _, tok := range d.Tokens {
			if tok == "" || !utf8.ValidString(tok) || strings.ContainsFunc(tok, unicode.IsSpace) {
				t.Errorf("bad token %q", tok)
			}
		}
		if !utf8.ValidString(d.Letters) || strings.ContainsFunc(d.Letters, unicode.IsSpace) {
			t.Errorf("bad letters %q", d.Letters)
		}
		if d.SubjectLetters < 0 || d.SubjectLetters > len(d.Letters) || !utf8.ValidString(d.Letters[d.SubjectLetters:]) {
			t.Errorf("subject letters %d of %q", d.SubjectLetters, d.Letters)
		}
		if d.Stats.Words != len(d.Tokens) {
			t.Errorf("Words=%d for %d tokens", d.Stats.Words, len(d.Tokens))
		}
		for _, dom := range d.Domains {
			if dom == "" || !utf8.ValidString(dom) {
				t.Errorf("bad domain %q", dom)
			}
		}
		parts := 0
		for i, l := range d.Lines {
			if l.Start < 0 || int(l.Start) > len(d.Tokens) || i > 0 && l.Start < d.Lines[i-1].Start {
				t.Errorf("line %d starts at %d (%d tokens): %v", i, l.Start, len(d.Tokens), d.Lines)
			}
			if l.Mark&LinePart != 0 {
				parts++
			}
			if (l.Mark&LineSubject != 0) != (i == 0) {
				t.Errorf("line %d marked %b", i, l.Mark)
			}
		}
		if parts < 1 || parts > 3 { // a text without tokens gives its mark to the next
			t.Errorf("%d lines marked as a text's first, want 1 to 3: %v", parts, d.Lines)
		}
		again := Canonicalize(src)
		if !slices.Equal(again.Lines, d.Lines) {
			t.Errorf("lines not deterministic: %v vs %v", again.Lines, d.Lines)
		}
		if strings.Join(again.Tokens, " ") != strings.Join(d.Tokens, " ") || again.Letters != d.Letters || again.Stats != d.Stats || again.SubjectLetters != d.SubjectLetters {
			t.Errorf("not deterministic: %q vs %q", again.Tokens, d.Tokens)
		}
	})
}
