package signature

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestCanonicalizeLines: Canonicalize marks each text's lines in its one
// pass, with what their raw text shows; lines without tokens are folded
// into the next, keeping a separator's mark, and stripped tokens are not
// counted.
func TestCanonicalizeLines(t *testing.T) {
	type ln struct {
		words string
		mark  LineMark
	}
	for _, c := range []struct {
		name  string
		src   Source
		lines []ln
	}{
		{"subject and part", Source{Subject: "Hello there", Parts: []string{"one two\nthree four"}},
			[]ln{{"heio there", LinePart | LineSubject}, {"one two", LinePart}, {"thre four", 0}}},
		{"empty subject, blank lines", Source{Parts: []string{"\n\n  one two\n\n\nthree"}},
			[]ln{{"", LinePart | LineSubject}, {"one two", LinePart}, {"thre", 0}}},
		{"quoted lines", Source{Parts: []string{"mine here\n> yours there\n  | tabie row\nmine again"}},
			[]ln{{"", LinePart | LineSubject}, {"mine here", LinePart}, {"yours there", LineQuoted}, {"tabie row", LineQuoted}, {"mine again", 0}}},
		{"signature delimiter", Source{Parts: []string{"the offer\n-- \nJohn Smith", "next part\n--\n"}},
			[]ln{{"", LinePart | LineSubject}, {"the ofer", LinePart}, {"john smith", LineSep}, {"next part", LinePart}, {"", LineSep}}},
		{"footer and quoted header", Source{Parts: []string{"text\n______\nlist footer\n-----Original Message-----\nold"}},
			[]ln{{"", LinePart | LineSubject}, {"text", LinePart}, {"ist foter", LineSep}, {"originai mesage", LineSep}, {"oid", 0}}},
		{"not separators", Source{Parts: []string{"ab\n-- bc\n--- cd\n___ de\n-xy"}},
			[]ln{{"", LinePart | LineSubject}, {"ab", LinePart}, {"bc", 0}, {"cd", 0}, {"de", 0}, {"xy", 0}}},
		{"a separator does not cut the next part", Source{Parts: []string{"ab cd\n-- ", "de fg"}},
			[]ln{{"", LinePart | LineSubject}, {"ab cd", LinePart}, {"de fg", LinePart}}},
		{"letters spaced across a line break", Source{Parts: []string{"go V i\na g r a now\n> quoted"}},
			[]ln{{"", LinePart | LineSubject}, {"go vi agra", LinePart}, {"now", 0}, {"quoted", LineQuoted}}},
		{"non-ASCII text", Source{Parts: []string{"Привет мир\n> цитата"}},
			[]ln{{"", LinePart | LineSubject}, {"привет мир", LinePart}, {"цитата", LineQuoted}}},
		{"stripped words", Source{Parts: []string{"dear alice smith\nalice\nhello"}, Strip: []string{"alice"}},
			[]ln{{"", LinePart | LineSubject}, {"dear smith", LinePart}, {"", 0}, {"heio", 0}}},
	} {
		d := Canonicalize(c.src)
		var got []ln
		for i, l := range d.Lines {
			end := len(d.Tokens)
			if i+1 < len(d.Lines) {
				end = int(d.Lines[i+1].Start)
			}
			got = append(got, ln{strings.Join(d.Tokens[l.Start:end], " "), l.Mark})
		}
		if !slices.Equal(got, c.lines) {
			t.Errorf("%s: lines %q, want %q", c.name, got, c.lines)
		}
	}
}

// offerCopy is a copy of a short offer (three lines of 8+ words) padded
// with news lines of its own, more than the offer, in an order of its own.
func offerCopy(i int) Source {
	offer := []string{
		"Our licensed pharmacy ships your order discreetly within three business days worldwide",
		"Save up to eighty percent on brand medication compared with your local drugstore",
		"Order before Friday and receive a free bonus pack with every purchase you make",
	}
	news := strings.Fields("council budget roads schools mayor river bridge harbour museum library garden station market theatre")
	var lines []string
	for j := range 8 {
		lines = append(lines, fmt.Sprintf("The %s meeting discussed the %s and the %s for the coming %s season", news[(i+j)%14], news[(2*i+j+3)%14], news[(i+3*j+5)%14], news[(i*j+7)%14]))
	}
	lines = append(lines, offer...)
	// A copy's own order: the keys must not depend on where a line is.
	for j := range lines {
		k := (j*7 + i*3) % len(lines)
		lines[j], lines[k] = lines[k], lines[j]
	}
	return Source{Subject: fmt.Sprintf("News digest %d for our valued readers this very week", i), Parts: []string{strings.Join(lines, "\n")}}
}

// TestLinesPaddedCopies: copies of a short offer padded past half with
// lines of their own share the offer's line keys, whatever the lines'
// order, and nothing else; another secret makes other keys.
func TestLinesPaddedCopies(t *testing.T) {
	l, err := NewLines(testSecret(t), DefaultLineParams())
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewLines(secretN(t, 77), DefaultLineParams())
	sign := func(s *Lines, src Source) []Key {
		keys, e := s.Sign(Canonicalize(src), nil)
		if e.Keys != len(keys) || e.Family != FamilyLines {
			t.Fatalf("explain %+v for %d keys", e, len(keys))
		}
		return keys
	}
	a, b := sign(l, offerCopy(1)), sign(l, offerCopy(2))
	if len(a) != 11 {
		t.Fatalf("got %d keys, want 11 (8 news lines and 3 offer lines; no Subject)", len(a))
	}
	shared := 0
	for _, k := range a {
		if slices.Contains(b, k) {
			shared++
		}
	}
	if shared != 3 {
		t.Errorf("two padded copies share %d line keys, want the offer's 3", shared)
	}
	for _, k := range sign(other, offerCopy(1)) {
		if slices.Contains(a, k) {
			t.Errorf("key %v made under two secrets", k)
		}
	}
}

// TestLinesLeftOut: short lines, quoted lines, the Subject and whatever
// follows a separator make no key; Keys bounds the keys to the smallest.
func TestLinesLeftOut(t *testing.T) {
	p := DefaultLineParams()
	l, _ := NewLines(testSecret(t), p)
	long := "this line has well over eight canonical words in it so it counts"
	for _, c := range []struct {
		name string
		src  Source
		keys int
	}{
		{"one line", Source{Parts: []string{long}}, 1},
		{"seven words", Source{Parts: []string{"only seven words are on this line"}}, 0},
		{"the subject", Source{Subject: long}, 0},
		{"quoted", Source{Parts: []string{"> " + long + "\n|" + long + " too"}}, 0},
		{"after a signature", Source{Parts: []string{"-- \n" + long}}, 0},
		{"after a footer, next part read", Source{Parts: []string{"_____\n" + long, long + " again"}}, 1},
		{"a repeated line once", Source{Parts: []string{long + "\n" + long}}, 1},
	} {
		keys, e := l.Sign(Canonicalize(c.src), nil)
		if len(keys) != c.keys || e.Keys != c.keys {
			t.Errorf("%s: %d keys (%+v), want %d", c.name, len(keys), e, c.keys)
		}
	}
	var many []string
	for i := range 3 * p.Keys {
		const alpha = "abcdefghijkmnoprstuvwxyz" // no l (read as i), no q
		many = append(many, long+" number "+string([]byte{alpha[i%24], 'q', alpha[i/24]}))
	}
	src := Source{Parts: []string{strings.Join(many, "\n")}}
	keys, _ := l.Sign(Canonicalize(src), nil)
	p.Keys = maxLineKeys
	all, _ := NewLines(testSecret(t), p)
	every, _ := all.Sign(Canonicalize(src), nil)
	slices.SortFunc(every, func(a, b Key) int { return cmp.Compare(a.Hash, b.Hash) })
	if len(every) != 3*DefaultLineParams().Keys || !slices.Equal(keys, every[:DefaultLineParams().Keys]) {
		t.Errorf("the %d keys are not the smallest %d of %d", len(keys), DefaultLineParams().Keys, len(every))
	}
}

// A Doc whose Lines do not fit its Tokens (not from Canonicalize) is
// signed without a panic, from the lines that fit.
func TestLinesBadDoc(t *testing.T) {
	l, _ := NewLines(testSecret(t), DefaultLineParams())
	toks := strings.Fields("a b c d e f g h i j")
	for _, c := range []struct {
		lines []Line
		keys  int
	}{
		{[]Line{{Start: 20, Mark: LinePart}}, 0},
		{[]Line{{Start: -3, Mark: LinePart}}, 0},
		{[]Line{{Start: 5, Mark: LinePart}, {Start: 2}}, 1}, // the second line, 2 to the end
	} {
		keys, _ := l.Sign(&Doc{Tokens: toks, Lines: c.lines}, nil)
		if len(keys) != c.keys {
			t.Errorf("lines %v: %d keys, want %d", c.lines, len(keys), c.keys)
		}
	}
}
