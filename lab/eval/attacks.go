package eval

import (
	"fmt"
	"html"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	xhtml "golang.org/x/net/html"
)

// Attack turns a base message into one copy of a campaign. Every attack is
// seeded by the copy's random source, so a campaign is reproducible.
type Attack struct {
	Name string
	// Class groups attacks in reports: "baseline", "malkin" (Malkin &
	// Venkatesan §3.4), "trick" (the spammers' tricks the issue names),
	// "extra" (further tricks of the same classes, to avoid tuning to the
	// named instances) and "combination".
	Class string
	Doc   string
	phase int // content edits (0) before presentation (1) before encoding (2)
	apply func(c *Copy)
}

// Copy is one campaign copy being built.
type Copy struct {
	*Mail
	Rng *rand.Rand
	Res *Resources
	// Campaign seeds what a sender fixes for the whole campaign (the
	// personalisation template), as opposed to what varies per copy.
	Campaign uint64
	doc      *htmlDoc
	post     []func(string) string // rewrites of the rendered HTML
}

// Resources are the word lists and texts attacks draw from.
type Resources struct {
	// Vocab holds common words of legitimate mail (the "good words" and
	// the words Malkin's attacks add and substitute).
	Vocab []string
	// Noise holds paragraphs of real text from a corpus neither the
	// lexicon nor the ham stream uses (Reuters).
	Noise []string
}

// NewCopy starts a copy of base for a recipient.
func NewCopy(base *Mail, to Person, rng *rand.Rand, res *Resources) *Copy {
	m := base.Clone()
	m.To = to
	return &Copy{Mail: m, Rng: rng, Res: res}
}

// Apply runs attacks on the copy in phase order and returns the message.
func (c *Copy) Apply(attacks ...*Attack) []byte {
	as := slices.Clone(attacks)
	slices.SortStableFunc(as, func(a, b *Attack) int { return a.phase - b.phase })
	for _, a := range as {
		a.apply(c)
	}
	c.finish()
	return c.Render()
}

// htmlDoc returns the parsed HTML body, or nil for a plain-text message.
func (c *Copy) htmlDoc() *htmlDoc {
	if c.doc == nil && c.HTML != "" {
		c.doc = parseHTML(c.HTML)
	}
	return c.doc
}

// needHTML gives a plain-text message an HTML body with the same text
// (keeping the plain alternative), for tricks that need HTML.
func (c *Copy) needHTML() *htmlDoc {
	if c.HTML == "" && c.doc == nil {
		c.HTML = textToHTML(c.Plain)
	}
	return c.htmlDoc()
}

func (c *Copy) finish() {
	if c.doc != nil {
		c.HTML = c.doc.String()
		c.doc = nil
	}
	for _, f := range c.post {
		c.HTML = f(c.HTML)
	}
	c.post = nil
}

// htmlWords rewrites a share of the words of the HTML body's text only.
func (c *Copy) htmlWords(rate float64, fn func(w string) string) {
	d := c.needHTML()
	for _, t := range d.textNodes() {
		t.Data = mapWords(t.Data, func(w string) string {
			if c.Rng.Float64() < rate {
				return fn(w)
			}
			return w
		})
	}
}

// Markers left in HTML text by word edits and turned into markup after
// rendering (the renderer would escape markup put in text).
const (
	markTag    = '\uE000'
	markEntity = '\uE001'
)

// editWords rewrites the words of the plain body and of the HTML body's
// text, each as its own stream.
func (c *Copy) editWords(ed wordEditor) {
	if c.Plain != "" {
		c.Plain = mapWords(c.Plain, ed(countWords(c.Plain)))
	}
	if d := c.htmlDoc(); d != nil {
		nodes := d.textNodes()
		n := 0
		for _, t := range nodes {
			n += countWords(t.Data)
		}
		fn := ed(n)
		for _, t := range nodes {
			t.Data = mapWords(t.Data, fn)
		}
	}
}

// editText rewrites the plain body and each HTML text node.
func (c *Copy) editText(fn func(string) string) {
	if c.Plain != "" {
		c.Plain = fn(c.Plain)
	}
	if d := c.htmlDoc(); d != nil {
		for _, t := range d.textNodes() {
			t.Data = fn(t.Data)
		}
	}
}

// Where a paragraph goes.
const (
	atStart = iota
	atEnd
	atRandom
)

// addParagraph adds a visible paragraph of text to both bodies.
func (c *Copy) addParagraph(text string, where int) {
	if c.Plain != "" {
		paras := splitParagraphs(c.Plain)
		i := len(paras)
		switch where {
		case atStart:
			i = 0
		case atRandom:
			i = c.Rng.IntN(len(paras) + 1)
		}
		paras = slices.Insert(paras, i, text)
		c.Plain = strings.Join(paras, "\n\n") + "\n"
	}
	if d := c.htmlDoc(); d != nil {
		parent := d.container()
		frag := "<p>" + html.EscapeString(text) + "</p>"
		nodes := parseFragment(frag)
		before := parent.FirstChild
		switch where {
		case atEnd:
			before = nil
		case atRandom:
			var kids []*xhtml.Node
			for k := parent.FirstChild; k != nil; k = k.NextSibling {
				kids = append(kids, k)
			}
			before = nil
			if i := c.Rng.IntN(len(kids) + 1); i < len(kids) {
				before = kids[i]
			}
		}
		for _, n := range nodes {
			parent.InsertBefore(n, before)
		}
	}
}

// insertWords inserts k words, each at a random word position.
func (c *Copy) insertWords(k int, word func() string) {
	c.editWords(func(n int) func(string) string {
		at := make([]int, n+1)
		for range k {
			at[c.Rng.IntN(n+1)]++
		}
		i := -1
		return func(w string) string {
			i++
			var b strings.Builder
			for range at[min(i, n)] {
				b.WriteString(word() + " ")
			}
			b.WriteString(w)
			if i == n-1 {
				for range at[n] {
					b.WriteString(" " + word())
				}
			}
			return b.String()
		}
	})
}

// eachWord rewrites a random share of words.
func (c *Copy) eachWord(rate float64, fn func(w string) string) {
	c.editWords(func(int) func(string) string {
		return func(w string) string {
			if c.Rng.Float64() < rate {
				return fn(w)
			}
			return w
		}
	})
}

// cyrillic reports whether the copy's text is mostly Cyrillic.
func (c *Copy) cyrillic() bool {
	cyr, lat := 0, 0
	for _, s := range []string{c.Subject, c.Plain, c.HTML} {
		for _, r := range s {
			switch {
			case unicode.Is(unicode.Cyrillic, r):
				cyr++
			case unicode.Is(unicode.Latin, r):
				lat++
			}
		}
	}
	return cyr > lat/2
}

// Attacks returns every attack, in report order.
func Attacks() []*Attack {
	var out []*Attack
	out = append(out, &Attack{Name: "none", Class: "baseline", Doc: "identical copies, only the recipient (To) differs", apply: func(*Copy) {}})
	kinds := []string{"add", "delete", "change", "combination"}
	for k, kind := range kinds {
		k := k
		out = append(out, &Attack{Name: "malkin-intelligent-" + kind, Class: "malkin",
			Doc:   "Malkin & Venkatesan §3.4: one " + kind + " edit in every ten words (words 9, 19, 29, … with a phase drawn per copy)",
			apply: func(c *Copy) { c.editWords(intelligentEdit(k, c.Rng.IntN(10), c.Rng, c.Res.Vocab)) }})
	}
	for k, kind := range kinds {
		k := k
		doc := "Malkin & Venkatesan §3.4: 10 % random " + kind + " edits"
		if k == editCombination {
			doc = "Malkin & Venkatesan §3.4: 3.5 % random adds, deletes and changes each"
		}
		out = append(out, &Attack{Name: "malkin-random-" + kind, Class: "malkin", Doc: doc,
			apply: func(c *Copy) { c.editWords(randomEdit(k, c.Rng, c.Res.Vocab)) }})
	}
	out = append(out, tricks()...)
	out = append(out, extras()...)
	out = append(out, combinations()...)
	out = append(out, recipientNames()...)
	return out
}

// AttackByName returns the named attack.
func AttackByName(name string) (*Attack, error) {
	for _, a := range Attacks() {
		if a.Name == name {
			return a, nil
		}
	}
	return nil, fmt.Errorf("unknown attack %q", name)
}

func tricks() []*Attack {
	return []*Attack{
		{Name: "personalise", Class: "trick", Doc: "recipient's name and address in the Subject, greeting, body and footer (the template fixed per campaign)", apply: personalise},
		{Name: "hashbuster", Class: "trick", Doc: "3–10 random strings (letters and digits, hex ids, pseudo-words, reference codes) in the Subject and body", apply: hashbuster},
		{Name: "hidden-text", Class: "trick", phase: 1, Doc: fmt.Sprintf("1–3 blocks of invisible HTML text (random words, real text or hash-busters) hidden by one of %d CSS/HTML techniques", len(hideTechniques)), apply: hiddenText},
		{Name: "spaces-in-words", Class: "trick", Doc: "spaces (or no-break spaces) inserted inside 10–25 % of words; spaces removed between 5 % of word pairs", apply: spacesInWords},
		{Name: "homoglyphs", Class: "trick", Doc: "letters swapped for lookalikes of another script (Cyrillic/Greek for Latin and back), fullwidth or mathematical letters, added accents", apply: homoglyphs},
		{Name: "zero-width", Class: "trick", Doc: "zero-width and other invisible format characters inside 20–60 % of words", apply: zeroWidth},
		{Name: "reorder", Class: "trick", Doc: "paragraphs (or lines, or sentences) in random order", apply: reorder},
		{Name: "charset", Class: "trick", phase: 2, Doc: "text parts and Subject in another charset (KOI8-R/Windows-1251/ISO-8859-5/IBM866 for Cyrillic, ISO-8859-1/-15/Windows-1252/UTF-16 for Latin) and transfer encoding (base64, quoted-printable, 8bit)", apply: charset},
		{Name: "alt-mismatch", Class: "trick", phase: 1, Doc: "text/plain alternative with unrelated real text, the campaign in the text/html alternative", apply: altMismatch},
		{Name: "good-words", Class: "trick", Doc: "out-of-context words of legitimate mail: 5–15 % scattered, or a visible block of 30–100", apply: goodWords},
	}
}

func extras() []*Attack {
	return []*Attack{
		{Name: "noise-text", Class: "extra", Doc: "visible paragraphs of real news text (30–60 % of the payload) before and/or after it", apply: noiseText},
		{Name: "leetspeak", Class: "extra", Doc: "letters written as digits and symbols in 10–30 % of words (v1@gr4)", apply: leetspeak},
		{Name: "case-noise", Class: "extra", Doc: "random capitalisation of letters or words", apply: caseNoise},
		{Name: "punct-in-words", Class: "extra", Doc: "dots, dashes, stars or underscores between the letters of 10–20 % of words", apply: punctInWords},
		{Name: "truncate", Class: "extra", Doc: "each copy ends after a random 70–95 % of the words", apply: truncate},
		{Name: "subject-spin", Class: "extra", Doc: "Subject varied per copy: Re:/Fwd: prefixes, case, punctuation, an extra word", apply: subjectSpin},
		{Name: "url-noise", Class: "extra", Doc: "per-copy tracking links with random hosts and paths in the text", apply: urlNoise},
		{Name: "spin", Class: "extra", Doc: "greeting, call to action and sign-off drawn per copy from small sets (spintax)", apply: spin},
		{Name: "tags-in-words", Class: "extra", Doc: "empty inline elements and comments inside 20–40 % of the HTML words (vi<b></b>ag<!-- -->ra)", apply: tagsInWords},
		{Name: "entities", Class: "extra", Doc: "letters of 20–40 % of the HTML words written as numeric character references (&#118;iagra)", apply: entities},
	}
}

func combinations() []*Attack {
	pool := append(tricks(), extras()...)
	var one []*Attack
	for _, a := range pool {
		if a.Name != "personalise" && a.Name != "hashbuster" {
			one = append(one, a)
		}
	}
	heavy := append(slices.Clone(pool), &Attack{Name: "malkin-random-combination", apply: func(c *Copy) {
		c.editWords(randomEdit(editCombination, c.Rng, c.Res.Vocab))
	}})
	return []*Attack{
		{Name: "personal+hashbuster+1", Class: "combination", Doc: "personalise and hash-busters on every copy, plus one other trick drawn per copy",
			apply: func(c *Copy) {
				c.applyAll([]*Attack{trick("personalise"), trick("hashbuster"), one[c.Rng.IntN(len(one))]})
			}},
		{Name: "stack-3", Class: "combination", Doc: "personalise plus three tricks drawn per copy from every trick above and the Malkin random combination",
			apply: func(c *Copy) {
				as := []*Attack{trick("personalise")}
				for _, i := range c.Rng.Perm(len(heavy))[:3] {
					as = append(as, heavy[i])
				}
				c.applyAll(as)
			}},
	}
}

// recipientNames are the attacks of issue 22 on the stripping of the
// recipient's name (detect's personalWords): the display name the To or
// Cc field gives the recipient is made of the body's own words, a
// different random 40 % of them for each copy, so that stripping "her
// name" deletes different words from each copy. They are listed apart
// from the tricks so that the combinations' draws stay as they were.
func recipientNames() []*Attack {
	return []*Attack{
		{Name: "display-name", Class: "extra", Doc: "the To display name of each copy is a different random 40 % of the body's words",
			apply: func(c *Copy) { c.To.Name = c.bodyWords(0.4) }},
		{Name: "display-name-short", Class: "extra", Doc: "the To display name of each copy is four of the body's words, capitalised like a name, drawn per copy",
			apply: func(c *Copy) { c.To.Name = c.nameOfBodyWords(4) }},
		{Name: "display-name-cc", Class: "extra", Doc: "as display-name, through Cc: To names a list address, Cc names the recipient with 40 % of the body's words",
			apply: func(c *Copy) {
				c.Cc = Person{Name: c.bodyWords(0.4), Address: c.To.Address}
				c.To = Person{Name: "Members", Address: "members@list.example.org"}
			}},
	}
}

// bodyWords returns a random share of the words of the copy's text, in
// order.
func (c *Copy) bodyWords(rate float64) string {
	text := c.Plain
	if d := c.htmlDoc(); d != nil && strings.TrimSpace(text) == "" {
		var b strings.Builder
		for _, t := range d.textNodes() {
			b.WriteString(t.Data + " ")
		}
		text = b.String()
	}
	var out []string
	for _, w := range strings.Fields(text) {
		if c.Rng.Float64() < rate {
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
}

// nameOfBodyWords returns n words of the copy's text that look like a
// name (letters only, capitalised), drawn at random: the most a name
// stripped from the text may have.
func (c *Copy) nameOfBodyWords(n int) string {
	var letters []string
	for _, w := range strings.Fields(c.bodyWords(1)) {
		w = strings.Trim(w, ".,;:!?\"'()")
		if utf8.RuneCountInString(w) >= 3 && strings.IndexFunc(w, func(r rune) bool { return !unicode.IsLetter(r) }) < 0 {
			letters = append(letters, w)
		}
	}
	var out []string
	for range min(n, len(letters)) {
		w := []rune(strings.ToLower(letters[c.Rng.IntN(len(letters))]))
		w[0] = unicode.ToUpper(w[0])
		out = append(out, string(w))
	}
	return strings.Join(out, " ")
}

// trick returns a trick by name.
func trick(name string) *Attack {
	for _, a := range tricks() {
		if a.Name == name {
			return a
		}
	}
	panic("eval: no trick " + name)
}

// applyAll applies attacks in phase order without rendering.
func (c *Copy) applyAll(as []*Attack) {
	as = slices.Clone(as)
	slices.SortStableFunc(as, func(a, b *Attack) int { return a.phase - b.phase })
	for _, a := range as {
		a.apply(c)
	}
}
