package eval

import (
	"bytes"
	"html"
	"math/rand/v2"
	"strings"

	xhtml "golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// htmlDoc is a parsed HTML body that attacks edit in place.
type htmlDoc struct {
	root *xhtml.Node
}

func parseHTML(s string) *htmlDoc {
	n, err := xhtml.Parse(strings.NewReader(s))
	if err != nil {
		// Only pathological nesting fails; start over from the text.
		n, _ = xhtml.Parse(strings.NewReader(textToHTML(s)))
	}
	return &htmlDoc{root: n}
}

func (d *htmlDoc) String() string {
	var b bytes.Buffer
	if err := xhtml.Render(&b, d.root); err != nil {
		return ""
	}
	return b.String()
}

// body returns the <body> element (the parser always makes one).
func (d *htmlDoc) body() *xhtml.Node {
	var find func(*xhtml.Node) *xhtml.Node
	find = func(n *xhtml.Node) *xhtml.Node {
		if n.Type == xhtml.ElementNode && n.DataAtom == atom.Body {
			return n
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if b := find(c); b != nil {
				return b
			}
		}
		return nil
	}
	if b := find(d.root); b != nil {
		return b
	}
	return d.root
}

// notText are elements whose text a reader never sees.
var notText = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Head: true, atom.Title: true,
	atom.Noscript: true, atom.Template: true, atom.Textarea: true, atom.Iframe: true, atom.Object: true,
}

// textNodes returns the body's text nodes in document order, outside
// elements that never show text.
func (d *htmlDoc) textNodes() []*xhtml.Node {
	var out []*xhtml.Node
	var walk func(*xhtml.Node)
	walk = func(n *xhtml.Node) {
		if n.Type == xhtml.ElementNode && notText[n.DataAtom] {
			return
		}
		if n.Type == xhtml.TextNode && strings.TrimSpace(n.Data) != "" {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(d.body())
	return out
}

// textToHTML turns plain text into a simple HTML body: blank lines separate
// paragraphs, line breaks become <br>.
func textToHTML(s string) string {
	var b strings.Builder
	b.WriteString("<html><body>\n")
	for _, para := range splitParagraphs(s) {
		lines := strings.Split(strings.TrimSpace(para), "\n")
		for i := range lines {
			lines[i] = html.EscapeString(strings.TrimRight(lines[i], "\r "))
		}
		b.WriteString("<p>" + strings.Join(lines, "<br>\n") + "</p>\n")
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

// splitParagraphs splits text at blank lines.
func splitParagraphs(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var out []string
	for _, p := range strings.Split(s, "\n\n") {
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseFragment parses an HTML fragment in the context of a <div>.
func parseFragment(s string) []*xhtml.Node {
	ctx := &xhtml.Node{Type: xhtml.ElementNode, Data: "div", DataAtom: atom.Div}
	nodes, err := xhtml.ParseFragment(strings.NewReader(s), ctx)
	if err != nil {
		return []*xhtml.Node{{Type: xhtml.TextNode, Data: s}}
	}
	return nodes
}

// insertAt inserts an HTML fragment into the body: before the child with
// index i of the largest text container (so hidden text sits among the
// visible paragraphs), or at the end.
func (d *htmlDoc) insertFragment(frag string, rng *rand.Rand) {
	parent := d.container()
	var kids []*xhtml.Node
	for c := parent.FirstChild; c != nil; c = c.NextSibling {
		kids = append(kids, c)
	}
	var before *xhtml.Node
	if len(kids) > 0 {
		if i := rng.IntN(len(kids) + 1); i < len(kids) {
			before = kids[i]
		}
	}
	for _, n := range parseFragment(frag) {
		parent.InsertBefore(n, before)
	}
}

// blockElems are the elements whose order is the paragraph order.
var blockElems = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Tr: true, atom.Li: true, atom.Table: true, atom.Blockquote: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Center: true, atom.Font: true, atom.Pre: true, atom.Ul: true, atom.Ol: true, atom.Tbody: true, atom.Td: true,
}

// container returns the element whose block children hold the most text:
// where the paragraphs are.
func (d *htmlDoc) container() *xhtml.Node {
	best, bestScore := d.body(), 0
	var walk func(*xhtml.Node)
	walk = func(n *xhtml.Node) {
		if n.Type == xhtml.ElementNode && notText[n.DataAtom] {
			return
		}
		blocks, text := 0, 0
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == xhtml.ElementNode && blockElems[c.DataAtom] {
				if t := textLen(c); t > 0 {
					blocks++
					text += t
				}
			}
		}
		if blocks >= 2 && text > bestScore {
			best, bestScore = n, text
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(d.body())
	return best
}

func textLen(n *xhtml.Node) int {
	if n.Type == xhtml.TextNode {
		return len(strings.TrimSpace(n.Data))
	}
	if n.Type == xhtml.ElementNode && notText[n.DataAtom] {
		return 0
	}
	t := 0
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		t += textLen(c)
	}
	return t
}

// reorder shuffles the block children of the paragraph container. It
// reports false when there are fewer than two paragraphs to shuffle.
func (d *htmlDoc) reorder(rng *rand.Rand) bool {
	parent := d.container()
	var blocks []*xhtml.Node
	var slots []int
	var kids []*xhtml.Node
	for c := parent.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == xhtml.ElementNode && blockElems[c.DataAtom] && textLen(c) > 0 {
			blocks = append(blocks, c)
			slots = append(slots, len(kids))
		}
		kids = append(kids, c)
	}
	if len(blocks) < 2 {
		return false
	}
	rng.Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
	for i, s := range slots {
		kids[s] = blocks[i]
	}
	for _, k := range kids {
		parent.RemoveChild(k)
	}
	for _, k := range kids {
		parent.AppendChild(k)
	}
	return true
}
