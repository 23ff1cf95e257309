package eval

import (
	"fmt"
	"html"
	"math/rand/v2"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The tricks that change how the words are written: lookalike letters,
// invisible characters, order, charsets, good words and noise, leetspeak,
// case, punctuation and markup.

var latinToLookalike = map[rune][]rune{
	'a': {'а', 'ɑ'}, 'c': {'с', 'ϲ'}, 'e': {'е'}, 'i': {'і', 'ı'}, 'j': {'ј'}, 'o': {'о', 'ο'}, 'p': {'р', 'ρ'},
	's': {'ѕ'}, 'x': {'х', 'χ'}, 'y': {'у'}, 'v': {'ν'}, 'h': {'һ'},
	'A': {'А', 'Α'}, 'B': {'В', 'Β'}, 'C': {'С'}, 'E': {'Е', 'Ε'}, 'H': {'Н', 'Η'}, 'I': {'І', 'Ι'}, 'K': {'К', 'Κ'},
	'M': {'М', 'Μ'}, 'N': {'Ν'}, 'O': {'О', 'Ο'}, 'P': {'Р', 'Ρ'}, 'S': {'Ѕ'}, 'T': {'Т', 'Τ'}, 'X': {'Х', 'Χ'},
	'Y': {'У', 'Υ'}, 'Z': {'Ζ'},
}

var cyrillicToLatin = map[rune]rune{
	'а': 'a', 'е': 'e', 'о': 'o', 'р': 'p', 'с': 'c', 'у': 'y', 'х': 'x', 'і': 'i',
	'А': 'A', 'В': 'B', 'Е': 'E', 'К': 'K', 'М': 'M', 'Н': 'H', 'О': 'O', 'Р': 'P', 'С': 'C', 'Т': 'T', 'Х': 'X',
}

var accents = map[rune][]rune{
	'a': {'á', 'à', 'â', 'ä', 'ã'}, 'e': {'é', 'è', 'ê', 'ë'}, 'i': {'í', 'ì', 'î', 'ï'},
	'o': {'ó', 'ò', 'ô', 'ö', 'õ'}, 'u': {'ú', 'ù', 'û', 'ü'}, 'n': {'ñ'}, 'c': {'ç'}, 'y': {'ý', 'ÿ'},
}

// mathBold maps ASCII letters to MATHEMATICAL BOLD letters.
func mathBold(r rune) rune {
	switch {
	case r >= 'A' && r <= 'Z':
		return 0x1D400 + (r - 'A')
	case r >= 'a' && r <= 'z':
		return 0x1D41A + (r - 'a')
	}
	return r
}

func fullwidth(r rune) rune {
	if r > 0x20 && r < 0x7F {
		return r - 0x21 + 0xFF01
	}
	return r
}

func homoglyphs(c *Copy) {
	cyr := c.cyrillic()
	mode := c.Rng.IntN(5) // 0 lookalikes, 1 fullwidth, 2 mathematical, 3 accents, 4 all
	rate := 0.2 + 0.3*c.Rng.Float64()
	word := func(w string) string {
		m := mode
		if m == 4 {
			m = c.Rng.IntN(4)
		}
		var b strings.Builder
		for _, r := range w {
			switch {
			case m == 0 && cyr:
				if l, ok := cyrillicToLatin[r]; ok && c.Rng.IntN(2) == 0 {
					r = l
				}
			case m == 0:
				if l, ok := latinToLookalike[r]; ok && c.Rng.IntN(2) == 0 {
					r = l[c.Rng.IntN(len(l))]
				}
			case m == 1:
				r = fullwidth(r)
			case m == 2:
				r = mathBold(r)
			case m == 3:
				if l, ok := accents[r]; ok && c.Rng.IntN(2) == 0 {
					r = l[c.Rng.IntN(len(l))]
				}
			}
			b.WriteRune(r)
		}
		return b.String()
	}
	c.eachWord(rate, word)
	if c.Rng.IntN(2) == 0 {
		c.Subject = mapWords(c.Subject, func(w string) string {
			if c.Rng.Float64() < rate {
				return word(w)
			}
			return w
		})
	}
}

var invisibleChars = []string{"\u200b", "\u200c", "\u200d", "\u2060", "\u00ad", "\ufeff", "\u2063", "\u034f", "\u200e"}

func zeroWidth(c *Copy) {
	rate := 0.2 + 0.4*c.Rng.Float64()
	set := invisibleChars
	if c.Rng.IntN(2) == 0 {
		set = []string{pick(c.Rng, invisibleChars)}
	}
	ins := func(w string) string {
		for range 1 + c.Rng.IntN(3) {
			rs := []rune(w)
			if len(rs) < 2 {
				return w
			}
			i := 1 + c.Rng.IntN(len(rs)-1)
			w = string(rs[:i]) + pick(c.Rng, set) + string(rs[i:])
		}
		return w
	}
	c.eachWord(rate, ins)
	c.Subject = mapWords(c.Subject, func(w string) string {
		if c.Rng.Float64() < rate {
			return ins(w)
		}
		return w
	})
}

func reorder(c *Copy) {
	if c.Plain != "" {
		c.Plain = shuffleText(c.Rng, c.Plain)
	}
	if d := c.htmlDoc(); d != nil && !d.reorder(c.Rng) {
		// One block: shuffle the sentences of its longest text.
		var longest *string
		for _, t := range d.textNodes() {
			if longest == nil || len(t.Data) > len(*longest) {
				longest = &t.Data
			}
		}
		if longest != nil {
			*longest = shuffleSentences(c.Rng, *longest)
		}
	}
}

// shuffleText shuffles paragraphs, or lines when there is one paragraph,
// or sentences when there is one line.
func shuffleText(rng *rand.Rand, s string) string {
	if paras := splitParagraphs(s); len(paras) >= 2 {
		rng.Shuffle(len(paras), func(i, j int) { paras[i], paras[j] = paras[j], paras[i] })
		return strings.Join(paras, "\n\n") + "\n"
	}
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) >= 2 {
		rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
		return strings.Join(lines, "\n") + "\n"
	}
	return shuffleSentences(rng, s)
}

func shuffleSentences(rng *rand.Rand, s string) string {
	var sents []string
	start := 0
	for i := 0; i < len(s); i++ {
		if (s[i] == '.' || s[i] == '!' || s[i] == '?') && (i+1 == len(s) || s[i+1] == ' ') {
			sents = append(sents, strings.TrimSpace(s[start:i+1]))
			start = i + 1
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" {
		sents = append(sents, rest)
	}
	if len(sents) < 2 {
		return s
	}
	rng.Shuffle(len(sents), func(i, j int) { sents[i], sents[j] = sents[j], sents[i] })
	return strings.Join(sents, " ")
}

var (
	latinCharsets    = []string{"utf-8", "iso-8859-1", "iso-8859-15", "windows-1252", "utf-16", "utf-16le"}
	cyrillicCharsets = []string{"utf-8", "koi8-r", "windows-1251", "iso-8859-5", "ibm866", "utf-16"}
	transferCodings  = []string{"", "base64", "quoted-printable"}
)

func charset(c *Copy) {
	list := latinCharsets
	if c.cyrillic() {
		list = cyrillicCharsets
	}
	var ok []string
	c.finish()
	for _, l := range list {
		if c.CanEncode(l) {
			ok = append(ok, l)
		}
	}
	c.Charset = pick(c.Rng, ok)
	c.Subj8 = c.Charset
	c.CTE = pick(c.Rng, transferCodings)
}

func altMismatch(c *Copy) {
	c.needHTML()
	if c.Plain == "" {
		c.Plain = " "
	}
	n := 1 + c.Rng.IntN(3)
	paras := make([]string, n)
	for i := range paras {
		paras[i] = pick(c.Rng, c.Res.Noise)
	}
	c.AltPlain = strings.Join(paras, "\n\n")
}

func goodWords(c *Copy) {
	word := func() string { return pick(c.Rng, c.Res.Vocab) }
	mode := c.Rng.IntN(3)
	if mode != 1 {
		n := 0
		if c.Plain != "" {
			n = countWords(c.Plain)
		} else if d := c.htmlDoc(); d != nil {
			for _, t := range d.textNodes() {
				n += countWords(t.Data)
			}
		}
		c.insertWords(max(1, int(float64(n)*(0.05+0.10*c.Rng.Float64()))), word)
	}
	if mode != 0 {
		w := make([]string, 30+c.Rng.IntN(71))
		for i := range w {
			w[i] = word()
		}
		c.addParagraph(strings.Join(w, " "), pick(c.Rng, []int{atStart, atEnd}))
	}
}

func noiseText(c *Copy) {
	payload := 0
	if c.Plain != "" {
		payload = len(c.Plain)
	} else if d := c.htmlDoc(); d != nil {
		for _, t := range d.textNodes() {
			payload += len(t.Data)
		}
	}
	want := int(float64(payload) * (0.3 + 0.3*c.Rng.Float64()))
	where := c.Rng.IntN(3)
	for added := 0; added < want; {
		p := pick(c.Rng, c.Res.Noise)
		added += len(p)
		w := where
		if w == 2 {
			w = c.Rng.IntN(2)
		}
		c.addParagraph(p, w)
	}
}

var leet = map[rune][]string{
	'a': {"4", "@"}, 'e': {"3"}, 'i': {"1", "!"}, 'o': {"0"}, 's': {"5", "$"}, 't': {"7"}, 'l': {"1"}, 'g': {"9"},
	'A': {"4", "@"}, 'E': {"3"}, 'I': {"1"}, 'O': {"0"}, 'S': {"5", "$"}, 'T': {"7"},
	// Cyrillic: digits that look like the letters.
	'о': {"0"}, 'з': {"3"}, 'ч': {"4"}, 'б': {"6"}, 'в': {"8"}, 'а': {"@"}, 'О': {"0"}, 'З': {"3"}, 'Ч': {"4"}, 'Б': {"6"},
}

func leetspeak(c *Copy) {
	rate := 0.1 + 0.2*c.Rng.Float64()
	c.eachWord(rate, func(w string) string {
		var b strings.Builder
		for _, r := range w {
			if l, ok := leet[r]; ok && c.Rng.IntN(2) == 0 {
				b.WriteString(l[c.Rng.IntN(len(l))])
				continue
			}
			b.WriteRune(r)
		}
		return b.String()
	})
}

func caseNoise(c *Copy) {
	perLetter := c.Rng.IntN(2) == 0
	c.eachWord(0.3, func(w string) string {
		if !perLetter {
			if c.Rng.IntN(2) == 0 {
				return strings.ToUpper(w)
			}
			return strings.ToLower(w)
		}
		var b strings.Builder
		for _, r := range w {
			if c.Rng.IntN(2) == 0 {
				r = unicode.ToUpper(r)
			} else {
				r = unicode.ToLower(r)
			}
			b.WriteRune(r)
		}
		return b.String()
	})
}

func punctInWords(c *Copy) {
	seps := []string{".", "-", "*", "_", "'", "~"}
	sep := pick(c.Rng, seps)
	rate := 0.1 + 0.1*c.Rng.Float64()
	c.eachWord(rate, func(w string) string {
		if utf8.RuneCountInString(w) < 4 {
			return w
		}
		if c.Rng.IntN(2) == 0 {
			// Between every letter: V.i.a.g.r.a.
			return strings.Join(strings.Split(w, ""), sep)
		}
		return insertInside(c.Rng, w, func() string { return sep })
	})
}

func truncate(c *Copy) {
	keep := 0.70 + 0.25*c.Rng.Float64()
	c.editWords(func(n int) func(string) string {
		cut := int(float64(n) * keep)
		i := -1
		return func(w string) string {
			i++
			if i >= cut {
				return ""
			}
			return w
		}
	})
}

func subjectSpin(c *Copy) {
	s := c.Subject
	switch c.Rng.IntN(6) {
	case 0:
		s = pick(c.Rng, []string{"Re: ", "RE: ", "Fwd: ", "FW: ", "Fw: "}) + s
	case 1:
		s = strings.ToUpper(s)
	case 2:
		s += pick(c.Rng, []string{"!", "!!!", " ?", " :)", " ***", " ..."})
	case 3:
		s = pick(c.Rng, []string{"Important: ", "Urgent - ", "News: ", "Hot: ", "Last chance: "}) + s
	case 4:
		s += " " + pick(c.Rng, c.Res.Vocab)
	default:
		s = strings.ToLower(s)
	}
	c.Subject = s
}

func tagsInWords(c *Copy) {
	tags := []string{"<b></b>", "<span></span>", "<!-- -->", "<font></font>", "<i></i>", `<span style="">`, "</span>", "<u></u>"}
	c.htmlWords(0.2+0.2*c.Rng.Float64(), func(w string) string {
		for range 1 + c.Rng.IntN(2) {
			w = insertInside(c.Rng, w, func() string { return string(markTag) })
		}
		return w
	})
	rng := c.Rng
	c.post = append(c.post, func(h string) string {
		var b strings.Builder
		for _, r := range h {
			if r == markTag {
				b.WriteString(pick(rng, tags))
				continue
			}
			b.WriteRune(r)
		}
		return b.String()
	})
}

func entities(c *Copy) {
	c.htmlWords(0.2+0.2*c.Rng.Float64(), func(w string) string {
		var b strings.Builder
		for _, r := range w {
			if unicode.IsLetter(r) && c.Rng.IntN(2) == 0 {
				b.WriteRune(markEntity)
			}
			b.WriteRune(r)
		}
		return b.String()
	})
	hex := c.Rng.IntN(2) == 0
	c.post = append(c.post, func(h string) string {
		var b strings.Builder
		marked := false
		for _, r := range h {
			switch {
			case r == markEntity:
				marked = true
			case marked && hex:
				fmt.Fprintf(&b, "&#x%x;", r)
				marked = false
			case marked:
				fmt.Fprintf(&b, "&#%d;", r)
				marked = false
			default:
				b.WriteRune(r)
			}
		}
		return b.String()
	})
}

func urlNoise(c *Copy) {
	for range 1 + c.Rng.IntN(3) {
		u := "http://" + pseudoWord(c.Rng) + "." + pick(c.Rng, []string{"com", "net", "info", "biz", "ru"}) + "/" +
			randString(c.Rng, alnum, 6+c.Rng.IntN(10)) + "?id=" + randString(c.Rng, "0123456789", 8)
		if d := c.htmlDoc(); d != nil && c.Rng.IntN(2) == 0 {
			d.insertFragment(`<p><a href="`+u+`">`+html.EscapeString(u)+`</a></p>`, c.Rng)
			if c.Plain != "" {
				c.Plain += "\n" + u + "\n"
			}
			continue
		}
		c.insertWords(1, func() string { return u })
	}
}
