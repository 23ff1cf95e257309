package mailtext

import (
	"math"
	"testing"
)

// The CSS parsers reached from a message's HTML (style attributes,
// <style> blocks): stylesheets stay within their rule bound, and lengths
// and font sizes that parse are numbers, never NaN.
func FuzzCSS(f *testing.F) {
	for _, s := range []string{
		".a{color:#fff} #b > p.c, td { display:none; font-size:0 }",
		"@media screen{.x{color:red}} @import url(x); .y{visibility:hidden}",
		"/* c */ .a{background:rgb(1,2,3) url(x)} .b{color:hsla(120,100%,50%,.01)}",
		"font:0/0 a; clip:rect(0 0 0 0); text-indent:-9999px; left:-1e40px",
		"1e39px", "nan", "-0.em", "x-large", "calc(1px)", "{{{{}", "}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, css string) {
		var ss styleSheet
		ss.parse(css)
		if ss.rules > maxCSSRules {
			t.Fatalf("%d rules, bound %d", ss.rules, maxCSSRules)
		}
		var d decls
		parseDecls(css, &d, 16)
		if px, ok := parseLength(css, 16); ok && math.IsNaN(float64(px)) {
			t.Errorf("parseLength(%q) = NaN", css)
		}
		if px, ok := parseFontSize(css, 16); ok && math.IsNaN(float64(px)) {
			t.Errorf("parseFontSize(%q) = NaN", css)
		}
		parseColor(css, false)
		parseColor(css, true)
	})
}
