package mailtext

import (
	"strconv"
	"strings"

	"golang.org/x/net/html/atom"
)

// rgba is a colour; a is the alpha in [0,1].
type rgba struct {
	r, g, b uint8
	a       float32
}

var (
	black = rgba{0, 0, 0, 1}
	white = rgba{255, 255, 255, 1}
)

// contrastMin is SpamAssassin's threshold (HTML.pm, html_font_invisible):
// text whose luminance-weighted distance to its background is below it is
// invisible.
const contrastMin = 12

// lowContrast reports whether fg on bg is unreadable, using SpamAssassin's
// luminance-weighted distance sqrt((.2126Δr)²+(.7152Δg)²+(.0722Δb)²).
func lowContrast(fg, bg rgba) bool {
	dr := 0.2126 * (float32(fg.r) - float32(bg.r))
	dg := 0.7152 * (float32(fg.g) - float32(bg.g))
	db := 0.0722 * (float32(fg.b) - float32(bg.b))
	return dr*dr+dg*dg+db*db < contrastMin*contrastMin
}

// blend composes c with alpha a over bg (opaque).
func blend(c, bg rgba, a float32) rgba {
	if a >= 1 {
		return rgba{c.r, c.g, c.b, 1}
	}
	if a < 0 {
		a = 0
	}
	mix := func(x, y uint8) uint8 { return uint8(float32(x)*a + float32(y)*(1-a) + 0.5) }
	return rgba{mix(c.r, bg.r), mix(c.g, bg.g), mix(c.b, bg.b), 1}
}

// parseColor reads a CSS colour: #rgb[a], #rrggbb[aa], rgb[a](), hsl[a](),
// transparent, or a named colour. legacy also accepts the bare hex digits
// of old HTML attributes (bgcolor="ffffff").
func parseColor(v string, legacy bool) (rgba, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return rgba{}, false
	}
	v = strings.ToLower(v)
	if v[0] == '#' {
		return parseHexColor(v[1:])
	}
	if strings.HasPrefix(v, "rgb") {
		return parseFuncColor(v, false)
	}
	if strings.HasPrefix(v, "hsl") {
		return parseFuncColor(v, true)
	}
	if v == "transparent" {
		return rgba{0, 0, 0, 0}, true
	}
	if c, ok := namedColors[v]; ok {
		return rgba{uint8(c >> 16), uint8(c >> 8), uint8(c), 1}, true
	}
	if legacy && (len(v) == 6 || len(v) == 3) {
		return parseHexColor(v)
	}
	return rgba{}, false
}

func parseHexColor(h string) (rgba, bool) {
	var d [8]int
	if len(h) != 3 && len(h) != 4 && len(h) != 6 && len(h) != 8 {
		return rgba{}, false
	}
	for i := 0; i < len(h); i++ {
		d[i] = unhex(h[i])
		if d[i] < 0 {
			return rgba{}, false
		}
	}
	switch len(h) {
	case 3, 4:
		c := rgba{uint8(d[0] * 17), uint8(d[1] * 17), uint8(d[2] * 17), 1}
		if len(h) == 4 {
			c.a = float32(d[3]*17) / 255
		}
		return c, true
	default:
		c := rgba{uint8(d[0]<<4 | d[1]), uint8(d[2]<<4 | d[3]), uint8(d[4]<<4 | d[5]), 1}
		if len(h) == 8 {
			c.a = float32(d[6]<<4|d[7]) / 255
		}
		return c, true
	}
}

// parseFuncColor reads rgb(), rgba(), hsl() and hsla() in comma or space
// syntax, with an optional "/ alpha".
func parseFuncColor(v string, hsl bool) (rgba, bool) {
	open := strings.IndexByte(v, '(')
	closeP := strings.IndexByte(v, ')')
	if open < 0 || closeP < open {
		return rgba{}, false
	}
	args := strings.FieldsFunc(v[open+1:closeP], func(r rune) bool { return r == ',' || r == ' ' || r == '/' || r == '\t' })
	if len(args) < 3 {
		return rgba{}, false
	}
	var x [4]float64
	x[3] = 1
	for i := 0; i < len(args) && i < 4; i++ {
		a := args[i]
		pct := strings.HasSuffix(a, "%")
		a = strings.TrimSuffix(strings.TrimSuffix(a, "%"), "deg")
		f, err := strconv.ParseFloat(a, 64)
		if err != nil {
			return rgba{}, false
		}
		switch {
		case i == 3 && pct:
			f /= 100
		case i < 3 && pct && !hsl:
			f = f * 255 / 100
		case i > 0 && i < 3 && hsl:
			f /= 100 // saturation and lightness are percentages
		}
		x[i] = f
	}
	if hsl {
		r, g, b := hslToRGB(x[0], x[1], x[2])
		x[0], x[1], x[2] = r, g, b
	}
	c := rgba{clamp8(x[0]), clamp8(x[1]), clamp8(x[2]), float32(min(max(x[3], 0), 1))}
	return c, true
}

func clamp8(f float64) uint8 {
	if f < 0 {
		return 0
	}
	if f > 255 {
		return 255
	}
	return uint8(f + 0.5)
}

func hslToRGB(h, s, l float64) (r, g, b float64) {
	s, l = min(max(s, 0), 1), min(max(l, 0), 1)
	h = h - 360*float64(int(h/360))
	if h < 0 {
		h += 360
	}
	c := (1 - abs(2*l-1)) * s
	hp := h / 60
	x := c * (1 - abs(hp-2*float64(int(hp/2))-1))
	var r1, g1, b1 float64
	switch {
	case hp < 1:
		r1, g1 = c, x
	case hp < 2:
		r1, g1 = x, c
	case hp < 3:
		g1, b1 = c, x
	case hp < 4:
		g1, b1 = x, c
	case hp < 5:
		r1, b1 = x, c
	default:
		r1, b1 = c, x
	}
	m := l - c/2
	return (r1 + m) * 255, (g1 + m) * 255, (b1 + m) * 255
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// length units relative to the font size are resolved against em (px).
func parseLength(v string, em float32) (px float32, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	i := 0
	if v[0] == '-' || v[0] == '+' {
		i++
	}
	for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
		i++
	}
	num, unit := v[:i], strings.TrimSpace(v[i:])
	f, err := strconv.ParseFloat(num, 32)
	if err != nil {
		return 0, false
	}
	n := float32(f)
	switch unit {
	case "", "px":
		return n, true // unitless: quirks mode reads px
	case "pt":
		return n * 4 / 3, true
	case "pc":
		return n * 16, true
	case "in":
		return n * 96, true
	case "cm":
		return n * 37.8, true
	case "mm":
		return n * 3.78, true
	case "q":
		return n * 0.945, true
	case "em", "rem":
		return n * em, true
	case "ex", "ch":
		return n * em / 2, true
	case "%":
		return n * em / 100, true
	case "vw", "vh", "vmin", "vmax":
		if n == 0 {
			return 0, true
		}
		return n * 8, true // a small viewport, 800 px
	}
	return 0, false
}

var fontKeywords = map[string]float32{
	"xx-small": 9, "x-small": 10, "small": 13, "medium": 16,
	"large": 18, "x-large": 24, "xx-large": 32, "xxx-large": 48,
}

// parseFontSize reads a font-size value against the parent's size.
func parseFontSize(v string, parent float32) (float32, bool) {
	v = strings.TrimSpace(v)
	if px, ok := fontKeywords[v]; ok {
		return px, true
	}
	switch v {
	case "smaller":
		return parent * 0.83, true
	case "larger":
		return parent * 1.2, true
	}
	if strings.HasPrefix(v, "calc(") || strings.HasPrefix(v, "clamp(") || strings.HasPrefix(v, "min(") || strings.HasPrefix(v, "max(") {
		// Read the first length inside: calc(0px + 0em), min(0px, 1em).
		inner := strings.FieldsFunc(v[strings.IndexByte(v, '(')+1:], func(r rune) bool {
			return r == ' ' || r == ',' || r == '(' || r == ')' || r == '+' || r == '*'
		})
		if len(inner) > 0 {
			return parseLength(inner[0], parent)
		}
		return 0, false
	}
	px, ok := parseLength(v, parent)
	if ok && px < 0 {
		return parent, true // negative sizes are invalid
	}
	return px, ok
}

// legacyFontSize maps <font size=N> (1–7, or ±N relative to 3) to px.
func legacyFontSize(v string) (float32, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	rel := v[0] == '+' || v[0] == '-'
	n, err := strconv.Atoi(strings.TrimPrefix(v, "+"))
	if err != nil {
		return 0, false
	}
	if rel {
		n += 3
	}
	n = min(max(n, 1), 7)
	return [...]float32{0, 10, 13, 16, 18, 24, 32, 48}[n], true
}

// decls is the effect of a list of CSS declarations on an element.
type decls struct {
	display    int8 // 0 unset, displayNone, displayBlock, displayInline
	visibility int8 // 0 unset, 1 hidden, 2 visible
	hasOpacity bool
	opacity    float32
	font       string // font-size value, resolved against the parent later
	hasColor   bool
	color      rgba
	hasBG      bool
	bg         rgba
	bgImage    bool
	smallBox   bool // a height or width of at most 1px
	overflow   bool // overflow hidden or clip
	offscreen  bool // moved 500px or more off the page
	msoHide    bool // mso-hide:all (Outlook hides it)
	clipped    bool // clip/clip-path/transform/zoom to nothing
	bidi       int8 // 0 unset, 1 unicode-bidi:bidi-override, 2 other
	rtl        int8 // 0 unset, 1 direction:rtl, 2 ltr
}

const (
	displayNone = 1 + iota
	displayBlock
	displayInline
)

// offscreenPx is how far off the page a negative offset must push text
// for it to count as hidden.
const offscreenPx = -500

// parseDecls reads declarations "prop: value; …" into d (later ones win).
// em is the parent's font size, for relative lengths.
func parseDecls(s string, d *decls, em float32) {
	if strings.Contains(s, "/*") {
		s = stripCSSComments(s) // "display:/**/none" is display:none
	}
	for len(s) > 0 {
		end := declEnd(s)
		decl := s[:end]
		if end < len(s) {
			s = s[end+1:]
		} else {
			s = ""
		}
		colon := strings.IndexByte(decl, ':')
		if colon < 0 {
			continue
		}
		prop := strings.ToLower(strings.TrimSpace(decl[:colon]))
		val := strings.ToLower(strings.TrimSpace(decl[colon+1:]))
		if i := strings.Index(val, "!important"); i >= 0 {
			val = strings.TrimSpace(val[:i])
		}
		applyDecl(prop, val, d, em)
	}
}

// declEnd finds the ';' ending a declaration, skipping parentheses and
// quotes (url(data:…;base64,…) contains ';').
func declEnd(s string) int {
	depth := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			if depth > 0 {
				depth--
			}
		case c == ';' && depth == 0:
			return i
		}
	}
	return len(s)
}

func applyDecl(prop, val string, d *decls, em float32) {
	switch prop {
	case "display":
		switch {
		case val == "none":
			d.display = displayNone
		case strings.HasPrefix(val, "inline") || val == "contents":
			d.display = displayInline
		default:
			d.display = displayBlock
		}
	case "visibility":
		switch val {
		case "hidden", "collapse":
			d.visibility = 1
		case "visible":
			d.visibility = 2
		}
	case "opacity":
		if f, ok := parseNumberOrPct(val); ok {
			d.hasOpacity, d.opacity = true, f
		}
	case "filter":
		if i := strings.Index(val, "opacity("); i >= 0 {
			arg := val[i+len("opacity("):]
			if j := strings.IndexByte(arg, ')'); j >= 0 {
				if f, ok := parseNumberOrPct(arg[:j]); ok {
					d.hasOpacity, d.opacity = true, f
				}
			}
		}
	case "font-size":
		d.font = val
	case "font":
		// "font: 0/0 a" is a classic way to hide text.
		for _, tok := range strings.Fields(val) {
			if i := strings.IndexByte(tok, '/'); i >= 0 {
				tok = tok[:i]
			}
			if _, ok := fontKeywords[tok]; ok {
				d.font = tok
				break
			}
			if tok != "" && (tok[0] >= '0' && tok[0] <= '9' || tok[0] == '.') {
				if _, ok := parseLength(tok, em); ok && !isBareWeight(tok) {
					d.font = tok
					break
				}
			}
		}
	case "color", "-webkit-text-fill-color":
		if c, ok := parseColor(val, false); ok {
			d.hasColor, d.color = true, c
		}
	case "background-color":
		if c, ok := parseColor(val, false); ok {
			d.hasBG, d.bg, d.bgImage = true, c, false
		}
	case "background":
		if strings.Contains(val, "url(") || strings.Contains(val, "gradient(") {
			d.bgImage = true
		}
		for _, tok := range splitCSSValue(val) {
			if c, ok := parseColor(tok, false); ok {
				d.hasBG, d.bg = true, c
				break
			}
		}
	case "background-image":
		if strings.Contains(val, "url(") || strings.Contains(val, "gradient(") {
			d.bgImage = true
		}
	case "height", "max-height", "width", "max-width", "line-height":
		if px, ok := parseLength(val, em); ok && px <= 1 {
			if prop == "line-height" && !strings.HasSuffix(val, "px") && val != "0" {
				break // a unitless line-height is a multiplier
			}
			d.smallBox = true
		}
	case "overflow", "overflow-x", "overflow-y":
		if strings.Contains(val, "hidden") || strings.Contains(val, "clip") {
			d.overflow = true
		}
	case "left", "top", "right", "bottom", "margin-left", "margin-top", "margin", "text-indent", "inset":
		for _, tok := range strings.Fields(val) {
			if offscreen(tok, em) {
				d.offscreen = true
			}
		}
	case "mso-hide":
		if val == "all" {
			d.msoHide = true
		}
	case "clip":
		if strings.HasPrefix(val, "rect(") {
			all := true
			for _, tok := range strings.FieldsFunc(val[5:], func(r rune) bool { return r == ',' || r == ' ' || r == ')' }) {
				if px, ok := parseLength(tok, em); !ok || px > 1 {
					all = false
				}
			}
			if all {
				d.clipped = true
			}
		}
	case "clip-path":
		if strings.HasPrefix(val, "inset(") {
			if f := strings.Fields(strings.Trim(val[6:], ")")); len(f) > 0 {
				if p, ok := parseNumberOrPct(f[0]); ok && p >= 0.5 {
					d.clipped = true
				}
			}
		} else if strings.HasPrefix(val, "circle(0") || strings.HasPrefix(val, "polygon(0 0)") {
			d.clipped = true
		}
	case "transform":
		if i := strings.Index(val, "translate"); i >= 0 {
			v := val[i:]
			if j := strings.IndexByte(v, '('); j >= 0 {
				for _, tok := range strings.FieldsFunc(v[j+1:], func(r rune) bool { return r == ',' || r == ' ' || r == ')' }) {
					if offscreen(tok, em) {
						d.offscreen = true
					}
				}
			}
		}
		if i := strings.Index(val, "scale"); i >= 0 {
			v := val[i:]
			if j := strings.IndexByte(v, '('); j >= 0 {
				args := strings.FieldsFunc(v[j+1:], func(r rune) bool { return r == ',' || r == ' ' || r == ')' })
				for k := 0; k < len(args) && k < 2; k++ {
					if f, err := strconv.ParseFloat(args[k], 32); err == nil && abs(f) < 0.1 {
						d.clipped = true
					}
				}
			}
		}
	case "unicode-bidi":
		d.bidi = 2
		if strings.Contains(val, "override") {
			d.bidi = 1
		}
	case "direction":
		d.rtl = 2
		if val == "rtl" {
			d.rtl = 1
		}
	case "zoom":
		if f, ok := parseNumberOrPct(val); ok && f < 0.1 {
			d.clipped = true
		}
	}
}

// offscreen reports an offset that moves a box off the page: 500px or
// more to the left or top, or a full width (-100%).
func offscreen(tok string, em float32) bool {
	if strings.HasSuffix(tok, "%") {
		f, err := strconv.ParseFloat(strings.TrimSuffix(tok, "%"), 32)
		return err == nil && f <= -100
	}
	px, ok := parseLength(tok, em)
	return ok && px <= offscreenPx
}

// isBareWeight reports a font-weight such as 400 in a font shorthand.
func isBareWeight(tok string) bool {
	if len(tok) != 3 || tok[1] != '0' || tok[2] != '0' {
		return false
	}
	return tok[0] >= '1' && tok[0] <= '9'
}

func parseNumberOrPct(v string) (float32, bool) {
	v = strings.TrimSpace(v)
	pct := strings.HasSuffix(v, "%")
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 32)
	if err != nil {
		return 0, false
	}
	if pct {
		f /= 100
	}
	return float32(f), true
}

// splitCSSValue splits a value on spaces outside parentheses.
func splitCSSValue(v string) []string {
	var out []string
	depth, start := 0, -1
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '(':
			depth++
		case c == ')':
			if depth > 0 {
				depth--
			}
		case (c == ' ' || c == '\t' || c == ',') && depth == 0:
			if start >= 0 {
				out = append(out, v[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, v[start:])
	}
	return out
}

// styleSheet holds the rules of <style> blocks that a simple selector can
// apply: tag, .class, #id, tag.class, and the last compound of a
// descendant selector when it names a class or id (".a .b" is read as
// ".b", which can only hide more; ".a td" is ignored, it would hide every
// cell).
type styleSheet struct {
	byClass map[string]*decls
	byID    map[string]*decls
	byTag   map[atom.Atom]*decls
	rules   int
}

// maxCSSBytes and maxCSSRules bound the stylesheet work per HTML part.
const (
	maxCSSBytes = 256 << 10
	maxCSSRules = 2048
)

func (ss *styleSheet) reset() {
	clear(ss.byClass)
	clear(ss.byID)
	clear(ss.byTag)
	ss.rules = 0
}

func (ss *styleSheet) empty() bool { return ss.rules == 0 }

// parse adds the rules of one stylesheet. @media, @supports and other
// at-rule blocks are skipped: the desktop view is the one judged, and
// "hide on mobile" rules would otherwise hide visible text.
func (ss *styleSheet) parse(css string) {
	css = stripCSSComments(css)
	for len(css) > 0 && ss.rules < maxCSSRules {
		open := strings.IndexByte(css, '{')
		if open < 0 {
			return
		}
		prelude := strings.TrimSpace(css[:open])
		body, rest := cssBlock(css[open+1:])
		css = rest
		if strings.HasPrefix(prelude, "@") {
			// An at-rule block; a statement at-rule before a rule
			// (@import …;) ends at ';' and the prelude keeps the rest.
			if semi := strings.LastIndexByte(prelude, ';'); semi >= 0 && !strings.HasPrefix(strings.TrimSpace(prelude[semi+1:]), "@") {
				ss.addRule(strings.TrimSpace(prelude[semi+1:]), body)
			}
			continue
		}
		if semi := strings.LastIndexByte(prelude, ';'); semi >= 0 {
			prelude = strings.TrimSpace(prelude[semi+1:])
		}
		ss.addRule(prelude, body)
	}
}

// cssBlock returns the content of a block whose '{' was just consumed, and
// the text after its matching '}'.
func cssBlock(s string) (body, rest string) {
	depth := 1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return s[:i], s[i+1:]
			}
		}
	}
	return s, ""
}

func stripCSSComments(s string) string {
	if !strings.Contains(s, "/*") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "/*")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		j := strings.Index(s[i+2:], "*/")
		if j < 0 {
			return b.String()
		}
		s = s[i+2+j+2:]
	}
}

func (ss *styleSheet) addRule(selectors, body string) {
	if strings.IndexByte(body, '{') >= 0 {
		return // nested rules: not ours to read
	}
	var d decls
	parseDecls(body, &d, 16)
	if d == (decls{}) {
		return
	}
	for _, sel := range strings.Split(selectors, ",") {
		sel = strings.TrimSpace(strings.ToLower(sel))
		// The last compound of a descendant, child or sibling selector.
		combined := false
		if i := strings.LastIndexAny(sel, " >+~"); i >= 0 {
			sel, combined = sel[i+1:], true
		}
		if sel == "" || strings.ContainsAny(sel, ":[*") {
			continue
		}
		tag, rest := sel, ""
		if i := strings.IndexAny(sel, ".#"); i >= 0 {
			tag, rest = sel[:i], sel[i:]
		}
		if rest == "" && combined {
			// ".desktop-only table" must not hide every table: a bare tag
			// is only taken from a selector that is nothing else.
			continue
		}
		ss.rules++
		if rest == "" {
			if a := atom.Lookup([]byte(tag)); a != 0 {
				ss.byTag = addDecls(ss.byTag, a, &d)
			}
			continue
		}
		// Only the last simple class or id of "tag.a.b#c" is keyed;
		// the element must carry it, which is what matters.
		j := strings.LastIndexAny(rest, ".#")
		name := rest[j+1:]
		if name == "" {
			continue
		}
		if rest[j] == '.' {
			ss.byClass = addDecls(ss.byClass, name, &d)
		} else {
			ss.byID = addDecls(ss.byID, name, &d)
		}
	}
}

func addDecls[K comparable](m map[K]*decls, k K, d *decls) map[K]*decls {
	if m == nil {
		m = make(map[K]*decls)
	}
	if old, ok := m[k]; ok {
		mergeDecls(old, d)
		return m
	}
	c := *d
	m[k] = &c
	return m
}

// mergeDecls applies src over dst, later declarations winning.
func mergeDecls(dst, src *decls) {
	if src.display != 0 {
		dst.display = src.display
	}
	if src.visibility != 0 {
		dst.visibility = src.visibility
	}
	if src.hasOpacity {
		dst.hasOpacity, dst.opacity = true, src.opacity
	}
	if src.font != "" {
		dst.font = src.font
	}
	if src.hasColor {
		dst.hasColor, dst.color = true, src.color
	}
	if src.hasBG {
		dst.hasBG, dst.bg = true, src.bg
	}
	dst.bgImage = dst.bgImage || src.bgImage
	dst.smallBox = dst.smallBox || src.smallBox
	dst.overflow = dst.overflow || src.overflow
	dst.offscreen = dst.offscreen || src.offscreen
	dst.msoHide = dst.msoHide || src.msoHide
	dst.clipped = dst.clipped || src.clipped
	if src.bidi != 0 {
		dst.bidi = src.bidi
	}
	if src.rtl != 0 {
		dst.rtl = src.rtl
	}
}
