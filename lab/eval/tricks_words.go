package eval

import (
	"fmt"
	"html"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode"
)

// The tricks that change a copy's words: personal details, spinning,
// hash busters, hidden junk and broken spacing.

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
