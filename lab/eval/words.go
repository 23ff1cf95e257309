package eval

import (
	"math/rand/v2"
	"strings"
	"unicode"
)

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// isSpace is what separates words in a body.
func isSpace(r rune) bool { return unicode.IsSpace(r) }

// mapWords rewrites each whitespace-separated word of s with fn, keeping
// the whitespace between words.
func mapWords(s string, fn func(w string) string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	start := -1
	for i, r := range s {
		if isSpace(r) {
			if start >= 0 {
				b.WriteString(fn(s[start:i]))
				start = -1
			}
			b.WriteRune(r)
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		b.WriteString(fn(s[start:]))
	}
	return b.String()
}

func countWords(s string) int {
	n := 0
	mapWords(s, func(w string) string { n++; return w })
	return n
}

// wordEditor edits one body, word by word in reading order. It is made
// per body with the number of words in it.
type wordEditor func(n int) func(w string) string

// Malkin & Venkatesan §3.4 attacks. The edit kinds.
const (
	editAdd = iota
	editDelete
	editChange
	editCombination
)

// intelligentEdit attacks the words in positions first+1, first+11,
// first+21, … so that every window of ten consecutive words holds one
// edit: first original words, an edit, then nine originals between edits;
// the combination alternates add, delete and change. With first = 8 it is
// the paper's attack on positions 9, 19, 29, … (the token-level version is
// signature.TestSiftTable2's). A campaign draws first per copy: with a
// fixed phase, deleting would make every copy the same.
func intelligentEdit(kind, first int, rng *rand.Rand, vocab []string) wordEditor {
	return func(int) func(string) string {
		run, target, op := 0, first, 0
		return func(w string) string {
			if run < target {
				run++
				return w
			}
			k := kind
			if kind == editCombination {
				k = op % 3
				op++
			}
			run, target = 0, 9
			switch k {
			case editAdd:
				run = 1 // the current word is kept after the added one
				return pick(rng, vocab) + " " + w
			case editDelete:
				return ""
			default:
				return pick(rng, vocab)
			}
		}
	}
}

// randomEdit makes 0.1n random edits of one kind (add, delete, change) or
// 0.035n of each (combination), as in the paper's random suite.
func randomEdit(kind int, rng *rand.Rand, vocab []string) wordEditor {
	return func(n int) func(string) string {
		if n == 0 {
			return func(w string) string { return w }
		}
		adds := make([]int, n)
		del := make([]bool, n)
		chg := make([]bool, n)
		count := func(rate float64) int { return int(rate*float64(n) + 0.5) }
		// Additions may land twice at one place; deletions and changes hit
		// distinct words.
		plan := func(k, c int) {
			if k == editAdd {
				for range c {
					adds[rng.IntN(n)]++
				}
				return
			}
			for _, i := range rng.Perm(n)[:min(c, n)] {
				if k == editDelete {
					del[i] = true
				} else {
					chg[i] = true
				}
			}
		}
		if kind == editCombination {
			c := count(0.035)
			plan(editAdd, c)
			plan(editDelete, c)
			plan(editChange, c)
		} else {
			plan(kind, count(0.1))
		}
		i := -1
		return func(w string) string {
			i++
			if i >= n {
				return w
			}
			var b strings.Builder
			for range adds[i] {
				b.WriteString(pick(rng, vocab) + " ")
			}
			switch {
			case del[i]:
				return strings.TrimSuffix(b.String(), " ")
			case chg[i]:
				b.WriteString(pick(rng, vocab))
			default:
				b.WriteString(w)
			}
			return b.String()
		}
	}
}

func pick[T any](rng *rand.Rand, list []T) T {
	if len(list) == 0 {
		var zero T
		return zero
	}
	return list[rng.IntN(len(list))]
}
