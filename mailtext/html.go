package mailtext

import (
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// The visible text of HTML is computed on golang.org/x/net/html's Tokenizer
// (adapted in htmltok.go not to copy every tag),
// not on html.Parse: the tree builder gives up on deep nesting (512 open
// elements), which a sender can provoke on purpose, while the tokenizer
// streams any input. The walker keeps its own stack of computed styles with
// the end-tag rules browsers apply to unclosed p, li, td, tr… elements, so
// an unclosed hiding element does not hide the rest of the message.

const (
	maxHTMLDepth = 256      // style frames kept; deeper elements inherit
	maxHTMLBuf   = 4 << 20  // tokenizer buffer: one token at most this large
	maxAttrLen   = 16 << 10 // attribute values looked at
	maxClasses   = 16       // class names looked up per element
	minFontPx    = 4        // text smaller than this (px) is not readable
	minAlpha     = 0.1      // text more transparent than this is not seen
)

// htmlResult is the visible text of one HTML part and what was hidden.
type htmlResult struct {
	text         string
	visible      int // characters of visible text
	hidden       int // characters of hidden text
	comment      int // characters inside comments
	domains      []string
	depthLimited bool
}

// frame is the computed style of an open element.
type frame struct {
	tag     atom.Atom
	name    string // for elements without an atom (custom tags)
	none    bool   // not rendered, and no descendant can bring it back
	clip    bool   // rendered as a box nobody sees (zero size, off-screen…)
	visHid  bool   // visibility:hidden (a descendant may set visible)
	drop    bool   // raw text that is not content (script, style, title…)
	alpha   float32
	font    float32 // px
	fg      rgba
	bg      rgba
	bgKnown bool // false under a background image
	block   bool
	reverse bool // unicode-bidi:bidi-override with direction:rtl: shown reversed
	hidden  bool // computed: text here is invisible
}

func (f *frame) computeHidden() {
	a := f.alpha * f.fg.a
	f.hidden = f.none || f.clip || f.visHid || f.font < minFontPx || a < minAlpha ||
		f.bgKnown && lowContrast(blend(f.fg, f.bg, a), f.bg)
}

// htmlExtractor is reused across parts to keep its buffers.
type htmlExtractor struct {
	stack    []frame
	overflow int // elements opened past maxHTMLDepth and not yet closed
	out      []byte
	sp, nl   bool // a space or a line break is pending
	sheet    styleSheet
	res      htmlResult
	classBuf []string
	tok      tokenizer
	links    domainMemo // of the links, reset with the text they point into
	// onHidden, when set (tests, diagnostics), receives each hidden text.
	onHidden func(text []byte, f *frame)
}

func (x *htmlExtractor) release() {
	if cap(x.out) > 1<<20 {
		x.out = nil
	}
	x.tok.release()
	x.sheet.reset()
	x.links = domainMemo{}
}

var rootFrame = frame{alpha: 1, font: 16, fg: black, bg: white, bgKnown: true, block: true}

// extract returns the visible text of an HTML document or fragment.
func (x *htmlExtractor) extract(src string) htmlResult {
	x.stack = append(x.stack[:0], rootFrame)
	x.stack[0].computeHidden()
	x.overflow = 0
	x.out = x.out[:0]
	x.sp, x.nl = false, false
	x.res = htmlResult{}
	x.sheet.reset()
	x.readStyleBlocks(src)

	z := &x.tok
	z.reset(src, maxHTMLBuf)
	for {
		switch z.Next() {
		case html.ErrorToken:
			x.res.text = string(x.out)
			return x.res
		case html.TextToken:
			x.text(z.Text())
		case html.StartTagToken, html.SelfClosingTagToken:
			// A self-closing non-void element is a start tag in HTML
			// (<span style="display:none"/> hides what follows).
			x.startTag(z)
		case html.EndTagToken:
			name, _ := z.TagName()
			x.endTag(atom.Lookup(name), name)
		case html.CommentToken:
			x.res.comment += countChars(z.Text())
		}
	}
}

func (x *htmlExtractor) top() *frame { return &x.stack[len(x.stack)-1] }

// text handles a text token.
func (x *htmlExtractor) text(t []byte) {
	f := x.top()
	if f.drop {
		return
	}
	n := countChars(t)
	if n == 0 {
		if len(t) > 0 && !f.hidden {
			x.sp = true
		}
		return
	}
	if f.hidden {
		x.res.hidden += n
		if x.onHidden != nil {
			x.onHidden(t, f)
		}
		return
	}
	x.res.visible += n
	if f.reverse {
		// Shown right to left: mark it with RIGHT-TO-LEFT OVERRIDE and POP
		// DIRECTIONAL FORMATTING, which the canonicaliser reads as displayed.
		x.emit([]byte("\u202E"))
		x.emit(t)
		x.out = append(x.out, "\u202C"...)
		return
	}
	x.emit(t)
}

// emit appends visible text, collapsing whitespace as HTML renders it.
func (x *htmlExtractor) emit(t []byte) {
	for i := 0; i < len(t); {
		c := t[i]
		if htmlByte[c]&hbSpace != 0 {
			x.sp = true
			i++
			continue
		}
		if c == 0xC2 && i+1 < len(t) && t[i+1] == 0xA0 { // NBSP
			x.sp = true
			i += 2
			continue
		}
		if x.nl {
			if len(x.out) > 0 {
				x.out = append(x.out, '\n')
			}
			x.nl, x.sp = false, false
		} else if x.sp {
			if len(x.out) > 0 && x.out[len(x.out)-1] != '\n' {
				x.out = append(x.out, ' ')
			}
			x.sp = false
		}
		j := i + 1
		for j < len(t) && htmlByte[t[j]]&(hbSpace|hbC2) == 0 {
			j++
		}
		x.out = append(x.out, t[i:j]...)
		i = j
	}
}

// countChars counts the characters of t that are not whitespace.
func countChars(t []byte) int {
	n := 0
	for i := 0; i < len(t); i++ {
		switch htmlByte[t[i]] {
		case 0:
			n++
		case hbC2:
			if i+1 < len(t) && t[i+1] == 0xA0 { // NBSP
				i++
			} else {
				n++
			}
		}
	}
	return n
}

// htmlByte classifies bytes for emit and countChars in one lookup: HTML's
// white space, UTF-8 continuation bytes, and 0xC2, which begins NBSP.
const (
	hbSpace = 1 << iota
	hbCont
	hbC2
)

var htmlByte = func() (t [256]uint8) {
	for _, c := range []byte(" \t\n\r\f") {
		t[c] = hbSpace
	}
	for c := 0x80; c < 0xC0; c++ {
		t[c] = hbCont
	}
	t[0xC2] = hbC2
	return t
}()

func isVoid(a atom.Atom) bool {
	switch a {
	case atom.Area, atom.Base, atom.Br, atom.Col, atom.Embed, atom.Hr, atom.Img, atom.Input,
		atom.Keygen, atom.Link, atom.Meta, atom.Param, atom.Source, atom.Track, atom.Wbr:
		return true
	}
	return false
}

func isBlock(a atom.Atom) bool {
	switch a {
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Center, atom.Dd, atom.Details,
		atom.Dialog, atom.Dir, atom.Div, atom.Dl, atom.Dt, atom.Fieldset, atom.Figcaption, atom.Figure,
		atom.Footer, atom.Form, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Header,
		atom.Hgroup, atom.Li, atom.Main, atom.Menu, atom.Nav, atom.Ol, atom.P, atom.Pre, atom.Section,
		atom.Summary, atom.Table, atom.Tbody, atom.Thead, atom.Tfoot, atom.Tr, atom.Ul,
		atom.Caption, atom.Body, atom.Html, atom.Option, atom.Legend, atom.Listing, atom.Plaintext, atom.Xmp:
		return true
	}
	return false
}

// closesP lists the start tags that close an open <p> (HTML's "close a p
// element" step).
func closesP(a atom.Atom) bool {
	switch a {
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Center, atom.Details, atom.Dialog,
		atom.Dir, atom.Div, atom.Dl, atom.Fieldset, atom.Figcaption, atom.Figure, atom.Footer, atom.Form,
		atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Header, atom.Hgroup, atom.Hr, atom.Li,
		atom.Dd, atom.Dt, atom.Main, atom.Menu, atom.Nav, atom.Ol, atom.P, atom.Pre, atom.Section,
		atom.Summary, atom.Ul, atom.Listing, atom.Plaintext, atom.Xmp:
		return true
	}
	return false
}

// isScope reports elements that stop the search for an element to close.
func isScope(a atom.Atom) bool {
	switch a {
	case atom.Td, atom.Th, atom.Table, atom.Caption, atom.Html, atom.Button, atom.Object,
		atom.Marquee, atom.Template, atom.Applet:
		return true
	}
	return false
}

// closeImplied pops the innermost open element among targets, unless an
// element in stops comes first.
func (x *htmlExtractor) closeImplied(targets []atom.Atom, stops func(atom.Atom) bool) {
	for i := len(x.stack) - 1; i > 0; i-- {
		t := x.stack[i].tag
		for _, g := range targets {
			if t == g {
				x.popTo(i)
				return
			}
		}
		if stops(t) {
			return
		}
	}
}

var (
	liTargets    = []atom.Atom{atom.Li}
	ddTargets    = []atom.Atom{atom.Dd, atom.Dt}
	trTargets    = []atom.Atom{atom.Tr}
	cellTargets  = []atom.Atom{atom.Td, atom.Th}
	pTargets     = []atom.Atom{atom.P}
	optTargets   = []atom.Atom{atom.Option}
	tbodyTargets = []atom.Atom{atom.Tbody, atom.Thead, atom.Tfoot}
	hTargets     = []atom.Atom{atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6}
)

func stopList(a atom.Atom) bool  { return a == atom.Ul || a == atom.Ol || isScope(a) }
func stopDl(a atom.Atom) bool    { return a == atom.Dl || isScope(a) }
func stopTable(a atom.Atom) bool { return a == atom.Table || a == atom.Html || a == atom.Template }
func stopRow(a atom.Atom) bool   { return a == atom.Tr || stopTable(a) }
func stopSel(a atom.Atom) bool   { return a == atom.Select || a == atom.Datalist || isScope(a) }

func (x *htmlExtractor) implyEnd(a atom.Atom) {
	if closesP(a) {
		x.closeImplied(pTargets, isScope)
	}
	switch a {
	case atom.Li:
		x.closeImplied(liTargets, stopList)
	case atom.Dd, atom.Dt:
		x.closeImplied(ddTargets, stopDl)
	case atom.Tr:
		x.closeImplied(trTargets, stopTable)
	case atom.Td, atom.Th:
		x.closeImplied(cellTargets, stopRow)
	case atom.Tbody, atom.Thead, atom.Tfoot:
		x.closeImplied(tbodyTargets, stopTable)
	case atom.Option:
		x.closeImplied(optTargets, stopSel)
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		// A heading directly inside a heading closes it.
		t := x.top().tag
		for _, h := range hTargets {
			if t == h && len(x.stack) > 1 {
				x.popTo(len(x.stack) - 1)
				break
			}
		}
	}
}

// popTo closes the elements from the top of the stack down to index i.
func (x *htmlExtractor) popTo(i int) {
	for j := len(x.stack) - 1; j >= i; j-- {
		if x.stack[j].block && !x.stack[j].none {
			x.nl = true // a hidden block still takes its line, unless not rendered at all
		}
	}
	x.stack = x.stack[:i]
}

// element attributes the walker reads
type attrs struct {
	style, class, id, href, bgcolor, color, text, size, background string
	hidden                                                         bool
}

func (x *htmlExtractor) readAttrs(z *tokenizer, hasAttr bool, a *attrs) {
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = z.TagAttr()
		if len(v) > maxAttrLen {
			v = v[:maxAttrLen]
		}
		switch string(k) {
		case "style":
			a.style = string(v)
		case "class":
			a.class = string(v)
		case "id":
			a.id = string(v)
		case "href":
			a.href = string(v)
		case "bgcolor":
			a.bgcolor = string(v)
		case "color":
			a.color = string(v)
		case "text":
			a.text = string(v)
		case "size":
			a.size = string(v)
		case "background":
			a.background = string(v)
		case "hidden":
			a.hidden = true
		}
	}
}

func (x *htmlExtractor) startTag(z *tokenizer) {
	name, hasAttr := z.TagName()
	a := atom.Lookup(name)
	switch a {
	case atom.Br:
		if !x.top().hidden {
			x.nl = true
		}
		return
	case atom.Hr:
		if !x.top().hidden {
			x.nl = true
		}
		return
	}
	x.implyEnd(a)
	var at attrs
	x.readAttrs(z, hasAttr, &at)

	parent := x.top()
	f := *parent
	f.tag, f.name = a, ""
	if a == 0 {
		f.name = string(name)
	}
	f.block = isBlock(a)
	f.drop = parent.drop

	switch a {
	case atom.Script, atom.Style, atom.Title, atom.Noscript, atom.Iframe, atom.Noembed, atom.Noframes, atom.Object, atom.Textarea:
		// Raw text that is not shown as text; <noscript> content is shown by
		// readers that run no script, but the tokenizer gives it as raw
		// markup (a known gap).
		f.drop = true
	case atom.Template:
		f.none = true // template content is never rendered
	case atom.Body:
		if c, ok := parseColor(at.text, true); ok {
			f.fg = c
		}
	case atom.Font:
		if c, ok := parseColor(at.color, true); ok {
			f.fg = c
		}
		if px, ok := legacyFontSize(at.size); ok {
			f.font = px
		}
	}
	if at.bgcolor != "" {
		if c, ok := parseColor(at.bgcolor, true); ok && c.a > 0 {
			f.bg, f.bgKnown = blend(c, parent.bg, c.a), true
		}
	}
	if at.background != "" {
		f.bgKnown = false
	}
	if at.hidden {
		f.none = true
	}

	var d decls
	styled := false
	if !x.sheet.empty() {
		if r := x.sheet.byTag[a]; r != nil {
			mergeDecls(&d, r)
			styled = true
		}
		if at.class != "" && x.sheet.byClass != nil {
			x.classBuf = x.classBuf[:0]
			for _, c := range strings.Fields(strings.ToLower(at.class)) {
				if len(x.classBuf) == maxClasses {
					break
				}
				x.classBuf = append(x.classBuf, c)
			}
			for _, c := range x.classBuf {
				if r := x.sheet.byClass[c]; r != nil {
					mergeDecls(&d, r)
					styled = true
				}
			}
		}
		if at.id != "" && x.sheet.byID != nil {
			if r := x.sheet.byID[strings.ToLower(strings.TrimSpace(at.id))]; r != nil {
				mergeDecls(&d, r)
				styled = true
			}
		}
	}
	if at.style != "" {
		var inline decls
		parseDecls(at.style, &inline, parent.font)
		mergeDecls(&d, &inline)
		styled = true
	}
	if styled {
		applyStyle(&f, &d, parent)
	}
	f.computeHidden()

	if (a == atom.A || a == atom.Area) && at.href != "" && !f.hidden {
		if dom, ok := linkDomain(at.href, &x.links); ok {
			x.res.domains = append(x.res.domains, dom)
		}
	}
	if f.block && !f.none {
		x.nl = true
	} else if (a == atom.Td || a == atom.Th) && !f.none {
		x.sp = true
	}
	if isVoid(a) {
		return
	}
	if len(x.stack) >= maxHTMLDepth {
		x.overflow++
		x.res.depthLimited = true
		return
	}
	x.stack = append(x.stack, f)
}

// applyStyle applies computed declarations to a new frame.
func applyStyle(f *frame, d *decls, parent *frame) {
	switch d.display {
	case displayNone:
		f.none = true
	case displayBlock:
		f.block = true
	case displayInline:
		f.block = false
	}
	switch d.visibility {
	case 1:
		f.visHid = true
	case 2:
		f.visHid = false
	}
	if d.hasOpacity {
		f.alpha *= min(max(d.opacity, 0), 1)
	}
	if d.font != "" {
		if px, ok := parseFontSize(d.font, parent.font); ok {
			f.font = px
		}
	}
	if d.hasColor {
		f.fg = d.color
	}
	if d.hasBG && d.bg.a > 0 {
		f.bg, f.bgKnown = blend(d.bg, parent.bg, d.bg.a), parent.bgKnown || d.bg.a >= 1
	}
	if d.bgImage {
		f.bgKnown = false
	}
	if d.smallBox && d.overflow || d.offscreen || d.msoHide || d.clipped {
		f.clip = true
	}
	if d.bidi != 0 || d.rtl != 0 {
		f.reverse = d.bidi == 1 && d.rtl == 1
	}
}

func (x *htmlExtractor) endTag(a atom.Atom, name []byte) {
	switch a {
	case atom.Br: // </br> is read as <br>
		if !x.top().hidden {
			x.nl = true
		}
		return
	case atom.P:
		if !x.hasOpen(atom.P) && !x.top().hidden {
			x.nl = true // </p> without <p> is an empty paragraph
		}
	}
	if x.overflow > 0 {
		x.overflow--
		return
	}
	for i := len(x.stack) - 1; i > 0; i-- {
		f := &x.stack[i]
		if f.tag == a && (a != 0 || f.name == string(name)) {
			x.popTo(i)
			return
		}
	}
}

func (x *htmlExtractor) hasOpen(a atom.Atom) bool {
	for i := len(x.stack) - 1; i > 0; i-- {
		if x.stack[i].tag == a {
			return true
		}
		if isScope(x.stack[i].tag) {
			return false
		}
	}
	return false
}

// readStyleBlocks reads the rules of every <style> block first: CSS
// applies to elements before the block as well as after it.
func (x *htmlExtractor) readStyleBlocks(src string) {
	total := 0
	for total < maxCSSBytes {
		i := indexTagFold(src, "<style")
		if i < 0 {
			return
		}
		src = src[i+len("<style"):]
		gt := strings.IndexByte(src, '>')
		if gt < 0 {
			return
		}
		src = src[gt+1:]
		end := indexTagFold(src, "</style")
		if end < 0 {
			end = len(src)
		}
		css := src[:end]
		if len(css) > maxCSSBytes-total {
			css = css[:maxCSSBytes-total]
		}
		total += len(css) + 1
		x.sheet.parse(css)
		src = src[end:]
	}
}

// indexTagFold finds needle, which starts with '<', in s ignoring case.
func indexTagFold(s, needle string) int {
	n := len(needle)
	for i := 0; i+n <= len(s); i++ {
		c := s[i]
		if c != '<' {
			j := strings.IndexByte(s[i:], '<')
			if j < 0 {
				return -1
			}
			i += j - 1
			continue
		}
		if strings.EqualFold(s[i:i+n], needle) {
			return i
		}
	}
	return -1
}
