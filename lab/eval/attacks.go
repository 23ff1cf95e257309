package eval

import (
	"fmt"
	"html"
	"math/rand/v2"
	"slices"
	"strconv"
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

func personalise(c *Copy) {
	p := c.To
	first, last := p.First, p.Last
	local, _, _ := strings.Cut(p.Address, "@")
	// The template is the campaign's: where the name goes and how the
	// greeting reads do not change from copy to copy, the recipient does.
	tpl := rand.New(rand.NewPCG(c.Campaign, 0x9e3779b9))
	greetings := []string{
		"Dear " + first + ",", "Hi " + first + " " + last + ",", "Hello " + strings.ToUpper(first) + "!",
		first + ", good news for you.", "Dear Mr./Ms. " + last + ",", "Attention " + p.Name + " (" + p.Address + ")",
	}
	c.addParagraph(greetings[tpl.IntN(len(greetings))], atStart)
	switch tpl.IntN(4) {
	case 0:
		c.Subject = first + ", " + c.Subject
	case 1:
		c.Subject = c.Subject + " - " + p.Name
	case 2:
		c.Subject = c.Subject + " for " + strings.ToLower(first)
	}
	if tpl.IntN(10) < 7 {
		footers := []string{
			"This message was sent to " + p.Address + ".",
			"You are receiving this e-mail because " + p.Address + " subscribed.",
			"To unsubscribe " + p.Address + " visit http://unsub.example.com/?e=" + p.Address,
			"Account: " + local + " / " + p.Name,
		}
		c.addParagraph(footers[tpl.IntN(len(footers))], atEnd)
	}
	if tpl.IntN(2) == 0 {
		what := []string{first, p.Name, last, local}[tpl.IntN(4)]
		c.insertWords(1+tpl.IntN(2), func() string { return what })
	}
}

// spin varies the boilerplate per copy, as spintax templates do: the
// greeting, the sign-off and a call to action drawn from small sets.
func spin(c *Copy) {
	greetings := []string{"Hello,", "Hi there,", "Dear friend,", "Greetings,", "Good day,", "Dear customer,", "Hey,", "Attention please,"}
	actions := []string{"Act now!", "Do not miss out.", "Reply today.", "Order while stocks last.", "Click below to learn more.", "This offer ends soon.", "Call us now.", "See for yourself."}
	closings := []string{"Best regards,", "Sincerely,", "Thank you,", "Kind regards,", "Cheers,", "Yours truly,", "All the best,", "Warm wishes,"}
	c.addParagraph(pick(c.Rng, greetings), atStart)
	c.addParagraph(pick(c.Rng, actions), atRandom)
	c.addParagraph(pick(c.Rng, closings)+" "+pick(c.Rng, []string{"The Team", "Customer Service", "Sales Department", "Your Support Team"}), atEnd)
}

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func randString(rng *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// pseudoWord is a pronounceable string no dictionary holds.
func pseudoWord(rng *rand.Rand) string {
	const cons, vows = "bcdfghjklmnprstvwz", "aeiou"
	n := 2 + rng.IntN(3)
	var b strings.Builder
	for range n {
		b.WriteByte(cons[rng.IntN(len(cons))])
		b.WriteByte(vows[rng.IntN(len(vows))])
	}
	if rng.IntN(2) == 0 {
		b.WriteByte(cons[rng.IntN(len(cons))])
	}
	return b.String()
}

// hashString is one random "hash-buster" string of a kind chosen per copy.
func hashString(rng *rand.Rand, kind int) string {
	switch kind {
	case 0:
		return randString(rng, alnum, 6+rng.IntN(11))
	case 1:
		return randString(rng, "0123456789abcdef", 8+rng.IntN(9))
	case 2:
		return pseudoWord(rng)
	default:
		return strings.ToUpper(randString(rng, "ABCDEFGHJKLMNPQRSTUVWXYZ", 2)) + "-" + strconv.Itoa(10000+rng.IntN(90000)) + "-" + randString(rng, "ABCDEFGHJKLMNPQRSTUVWXYZ", 2)
	}
}

func hashbuster(c *Copy) {
	kind := c.Rng.IntN(4)
	h := func() string { return hashString(c.Rng, kind) }
	if c.Rng.IntN(2) == 0 {
		if c.Rng.IntN(2) == 0 {
			c.Subject += " [" + h() + "]"
		} else {
			c.Subject = h() + " " + c.Subject
		}
	}
	k := 3 + c.Rng.IntN(8)
	c.insertWords(k, h)
	if c.Rng.IntN(2) == 0 {
		c.addParagraph("ref: "+h()+" "+h(), atEnd)
	}
}

// hideTechniques wrap content so that a reader does not see it.
var hideTechniques = []string{
	`<div style="display:none">%s</div>`,
	`<span style="display: none !important">%s</span>`,
	`<span style="visibility:hidden">%s</span>`,
	`<span style="font-size:0px">%s</span>`,
	`<p style="font-size:1px;line-height:1px;color:#ffffff">%s</p>`,
	`<font size="1" color="#FFFFFF">%s</font>`,
	`<span style="color:#fefefe">%s</span>`,
	`<span style="color:rgb(255,255,255)">%s</span>`,
	`<div style="opacity:0">%s</div>`,
	`<div style="position:absolute;left:-9999px;top:-9999px">%s</div>`,
	`<div style="height:0;overflow:hidden">%s</div>`,
	`<div style="display:none;max-height:0;overflow:hidden;mso-hide:all">%s</div>`,
	`<!-- %s -->`,
	`<div hidden>%s</div>`,
	`<span style="color:transparent">%s</span>`,
	`<style>.h%[2]d{display:none}</style><p class="h%[2]d">%[1]s</p>`,
	`<div style="text-indent:-9999px;white-space:nowrap;overflow:hidden">%s</div>`,
	`<span style="font-size:0.01em">%s</span>`,
	`<div style="transform:scale(0)">%s</div>`,
	`<div style="position:absolute;clip:rect(0 0 0 0)">%s</div>`,
	`<span style="font-size:0">%s</span>`,
	`<font color="white">%s</font>`,
	`<span style="color:#FFF">%s</span>`,
	`<div style="width:1px;height:1px;overflow:hidden">%s</div>`,
	`<span style="display:inline-block;max-width:0;max-height:0;overflow:hidden;mso-hide:all">%s</span>`,
	`<table><tr><td style="display:NONE">%s</td></tr></table>`,
	`<span style="visibility : hidden">%s</span>`,
	`<span style="font-size: 0pt; line-height: 0">%s</span>`,
	`<span style="color: rgba(0,0,0,0)">%s</span>`,
	`<span style="-webkit-text-fill-color:transparent;color:transparent">%s</span>`,
	`<div style="margin-left:-5000px">%s</div>`,
	`<div style="transform:translateX(-9999px)">%s</div>`,
	`<span style="zoom:0.01">%s</span>`,
	`<div style="clip-path:inset(50%%)">%s</div>`,
	`<table bgcolor="#000000"><tr><td><font color="#010101">%s</font></td></tr></table>`,
	`<div style="opacity:0.02;position:absolute">%s</div>`,
	`<span style="font:0/0 a">%s</span>`,
	`<div style="line-height:0;font-size:1px;color:#fdfdfd">%s</div>`,
}

// junk is text a trick adds: a word salad, real text, or hash-busters.
func (c *Copy) junk() string {
	switch c.Rng.IntN(3) {
	case 0:
		n := 20 + c.Rng.IntN(61)
		w := make([]string, n)
		for i := range w {
			w[i] = pick(c.Rng, c.Res.Vocab)
		}
		return strings.Join(w, " ")
	case 1:
		return pick(c.Rng, c.Res.Noise)
	default:
		n := 5 + c.Rng.IntN(11)
		w := make([]string, n)
		kind := c.Rng.IntN(4)
		for i := range w {
			w[i] = hashString(c.Rng, kind)
		}
		return strings.Join(w, " ")
	}
}

func hiddenText(c *Copy) {
	d := c.needHTML()
	for range 1 + c.Rng.IntN(3) {
		t := pick(c.Rng, hideTechniques)
		content := html.EscapeString(c.junk())
		if strings.HasPrefix(t, "<!--") {
			content = strings.ReplaceAll(content, "--", "")
		}
		frag := fmt.Sprintf(t, content)
		if strings.Contains(t, "%[2]d") {
			frag = fmt.Sprintf(t, content, c.Rng.IntN(1000))
		}
		d.insertFragment(frag, c.Rng)
	}
}

// insertInside inserts sep at a random place strictly inside a word of at
// least four letters.
func insertInside(rng *rand.Rand, w string, sep func() string) string {
	rs := []rune(w)
	letters := 0
	for _, r := range rs {
		if unicode.IsLetter(r) {
			letters++
		}
	}
	if letters < 4 {
		return w
	}
	i := 1 + rng.IntN(len(rs)-1)
	return string(rs[:i]) + sep() + string(rs[i:])
}

func spacesInWords(c *Copy) {
	rate := 0.10 + 0.15*c.Rng.Float64()
	seps := []string{" ", " ", "  ", "\u00a0", " \u00a0"}
	c.eachWord(rate, func(w string) string {
		return insertInside(c.Rng, w, func() string { return pick(c.Rng, seps) })
	})
	c.editText(func(s string) string { return removeSpaces(c.Rng, s, 0.05) })
}

// removeSpaces joins a share of adjacent words by removing the single
// space between them.
func removeSpaces(rng *rand.Rand, s string, rate float64) string {
	b := []byte(s)
	out := b[:0:0]
	for i := 0; i < len(b); i++ {
		if b[i] == ' ' && i > 0 && i+1 < len(b) && b[i-1] != ' ' && b[i+1] != ' ' &&
			b[i-1] != '\n' && b[i+1] != '\n' && rng.Float64() < rate {
			continue
		}
		out = append(out, b[i])
	}
	return string(out)
}

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
