package mailtext

import (
	"strings"
	"testing"
)

func htmlText(src string) htmlResult {
	var x htmlExtractor
	return x.extract(src)
}

// TestHTMLHidden checks each class of hiding trick: the visible text must
// be exactly what a reader sees, and hidden text must be counted.
func TestHTMLHidden(t *testing.T) {
	tests := []struct {
		name, html, want string
	}{
		{"display none", `a<div style="display:none">x</div>b`, "ab"},
		{"display none important", `a<span style="DISPLAY: none !important">x</span>b`, "ab"},
		{"visibility hidden", `a <span style="visibility:hidden">x</span> b`, "a b"},
		{"visibility collapse", `a <span style="visibility:collapse">x</span> b`, "a b"},
		{"visibility overridden by child", `<div style="visibility:hidden">x <b style="visibility:visible">y</b></div>`, "y"},
		{"hidden attribute", `a <p hidden>x</p> b`, "a b"},
		{"font-size zero", `a <span style="font-size:0">x</span> b`, "a b"},
		{"font-size 0px", `a <span style="font-size:0px">x</span> b`, "a b"},
		{"font-size tiny pt", `a <span style="font-size:2pt">x</span> b`, "a b"},
		{"font-size tiny em", `a <span style="font-size:.1em">x</span> b`, "a b"},
		{"font-size tiny percent", `a <span style="font-size:5%">x</span> b`, "a b"},
		{"font shorthand", `a <span style="font:0/0 a">x</span> b`, "a b"},
		{"font-size restored by child", `<div style="font-size:0">x<span style="font-size:14px">y</span></div>`, "y"},
		{"readable small font", `<span style="font-size:10px">small</span>`, "small"},
		{"legacy font size 1 is readable", `<font size="1">small</font>`, "small"},
		{"opacity zero", `a <span style="opacity:0">x</span> b`, "a b"},
		{"opacity tiny", `a <span style="opacity:0.05">x</span> b`, "a b"},
		{"opacity nested product", `<div style="opacity:.3"><span style="opacity:.3">x</span></div>y`, "y"},
		{"filter opacity", `a <span style="filter:opacity(0)">x</span> b`, "a b"},
		{"white on white", `a <span style="color:#fff">x</span> b`, "a b"},
		{"near white on white", `a <span style="color:#fafafa">x</span> b`, "a b"},
		{"named white", `a <span style="color:White">x</span> b`, "a b"},
		{"rgb white", `a <span style="color:rgb(255, 255, 255)">x</span> b`, "a b"},
		{"hsl white", `a <span style="color:hsl(0, 0%, 100%)">x</span> b`, "a b"},
		{"font color near white", `a <font color="#fefefe">x</font> b`, "a b"},
		{"font color legacy hex without #", `a <font color="ffffff">x</font> b`, "a b"},
		{"transparent", `a <span style="color:transparent">x</span> b`, "a b"},
		{"rgba alpha zero", `a <span style="color:rgba(0,0,0,0)">x</span> b`, "a b"},
		{"hex alpha zero", `a <span style="color:#00000000">x</span> b`, "a b"},
		{"text fill transparent", `a <span style="-webkit-text-fill-color:transparent">x</span> b`, "a b"},
		{"black on black cell", `<table><tr><td bgcolor="black"><font color="#000">x</font></td><td>y</td></tr></table>`, "y"},
		{"dark blue on black", `<div style="background-color:#000"><span style="color:#000030">x</span> y</div>`, ""},
		{"white on black is visible", `<div style="background:#000;color:#fff">seen</div>`, "seen"},
		{"body text equals bgcolor", `<body bgcolor="#336699" text="#336699">x<p style="color:#fff">y</p></body>`, "y"},
		{"background image makes colour unknown", `<div style="background-image:url(a.png);color:#fff">seen</div>`, "seen"},
		{"semi-transparent background blends", `<div style="background:#000"><p style="background:rgba(255,255,255,.5);color:#808080">x</p></div>`, ""},
		{"zero box", `a <div style="width:0;height:0;overflow:hidden">x</div> b`, "a\nb"},
		{"max-height zero", `a <div style="max-height:0;overflow:hidden">x</div> b`, "a\nb"},
		{"one pixel box", `a <div style="height:1px;width:1px;overflow:hidden">x</div> b`, "a\nb"},
		{"zero height without overflow is visible", `<div style="height:0">seen</div>`, "seen"},
		{"line-height zero clipped", `a <div style="line-height:0;overflow:hidden">x</div> b`, "a\nb"},
		{"off-screen left", `a <span style="position:absolute;left:-9999px">x</span> b`, "a b"},
		{"off-screen top em", `a <span style="position:absolute;top:-100em">x</span> b`, "a b"},
		{"translate off-screen", `a <span style="transform:translateX(-9999px)">x</span> b`, "a b"},
		{"percent off-screen", `a <span style="position:absolute;left:-100%">x</span> b`, "a b"},
		{"text-indent", `a <p style="text-indent:-10000px">x</p> b`, "a\nb"},
		{"margin shorthand", `a <p style="margin:0 0 0 -5000px">x</p> b`, "a\nb"},
		{"small negative margin is visible", `<p style="margin-left:-10px">seen</p>`, "seen"},
		{"clip rect zero", `a <span style="position:absolute;clip:rect(0 0 0 0)">x</span> b`, "a b"},
		{"clip-path inset", `a <span style="clip-path:inset(50%)">x</span> b`, "a b"},
		{"transform scale zero", `a <span style="transform:scale(0)">x</span> b`, "a b"},
		{"zoom", `a <span style="zoom:0.01">x</span> b`, "a b"},
		{"mso-hide", `a <span style="mso-hide:all">x</span> b`, "a b"},
		{"class rule", `<style>.h{display:none}</style>a <span class="x h">x</span> b`, "a b"},
		{"class rule after use", `a <span class="h">x</span> b<style>.h { visibility : hidden }</style>`, "a b"},
		{"tag.class rule", `<style>span.h{font-size:0}</style>a <span class="h">x</span> b`, "a b"},
		{"id rule", `<style>#z{color:#fff}</style>a <span id="z">x</span> b`, "a b"},
		{"descendant selector", `<style>div .h{opacity:0}</style>a <span class="h">x</span> b`, "a b"},
		{"tag rule", `<style>em{display:none}</style>a <em>x</em> b`, "a b"},
		{"tag after combinator ignored", `<style>.desktop_hide table, #t img+div { display:none }</style><table><tr><td>seen</td></tr></table><div>too</div>`, "seen\ntoo"},
		{"media rule ignored", `<style>@media (max-width:600px){.m{display:none}}</style><p class="m">seen</p>`, "seen"},
		{"inline beats class", `<style>.h{display:none}</style><p class="h" style="display:block">seen</p>`, "seen"},
		{"comment inside inline style", `a <span style="display:/**/none">x</span> b`, "a b"},
		{"bidi override marked", `<span style="unicode-bidi:bidi-override; direction: rtl">argaiv</span>`, "\u202eargaiv\u202c"},
		{"css comments", `<style>/* .x{display:block} */ .x{display:none}</style>a<i class="x">x</i>`, "a"},
		{"template", `a<template>x</template>b`, "ab"},
		{"script and style", `a<script>x</script><style>p{}</style>b`, "ab"},
		{"title", `<title>x</title>a`, "a"},
		{"comment", `a<!-- x -->b`, "ab"},
		{"word split by hidden span", `Vi<span style="display:none">zz</span>agra`, "Viagra"},
		{"self-closed span still hides", `a <span style="display:none"/>x</span> b`, "a b"},
		{"unclosed hiding p closed by next p", `<p style="display:none">x<p>seen`, "seen"},
		{"unclosed hiding li", `<ul><li style="display:none">x<li>seen</ul>`, "seen"},
		{"unclosed hiding td", `<table><tr><td style="display:none">x<td>seen</table>`, "seen"},
		{"entities", `Caf&eacute; &amp; tea&nbsp;time &#x263A;`, "Café & tea time ☺"},
		{"block elements break lines", `<div>a</div><div>b</div><p>c</p>d<br>e`, "a\nb\nc\nd\ne"},
		{"table cells spaced", `<table><tr><td>a</td><td>b</td></tr><tr><td>c</td></tr></table>`, "a b\nc"},
		{"whitespace collapsed", "a \n\t  b", "a b"},
		{"text in head is visible", `<head>seen</head>`, "seen"},
		{"bgcolor on row", `<table><tr bgcolor="#ffffff"><td><font color="white">x</font></td></tr></table>`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := htmlText(tc.html)
			if r.text != tc.want {
				t.Errorf("visible text of %q: got %q, want %q", tc.html, r.text, tc.want)
			}
			dropped := strings.Contains(tc.html, "<script") || strings.Contains(tc.html, "<title") || strings.Contains(tc.html, "<!--")
			if strings.Contains(tc.html, ">x<") && !dropped && r.hidden == 0 && !strings.Contains(tc.want, "x") {
				t.Errorf("hidden text of %q not counted", tc.html)
			}
		})
	}
}

// TestHTMLHiddenCounts checks the visible/hidden/comment character counts.
func TestHTMLHiddenCounts(t *testing.T) {
	r := htmlText(`<p>abc de</p><span style="display:none">12345</span><!-- comment -->`)
	if r.visible != 5 || r.hidden != 5 || r.comment != 7 {
		t.Errorf("counts: got visible=%d hidden=%d comment=%d, want 5 5 7", r.visible, r.hidden, r.comment)
	}
}

// TestHTMLDeepNesting checks that deep nesting neither fails nor hides the
// text, and that the style stack is bounded.
func TestHTMLDeepNesting(t *testing.T) {
	const n = 100000
	src := strings.Repeat("<div>", n) + "deep" + strings.Repeat("</div>", n) + " after"
	var x htmlExtractor
	r := x.extract(src)
	if r.text != "deep\nafter" {
		t.Errorf("got %q, want %q", r.text, "deep\nafter")
	}
	if !r.depthLimited {
		t.Error("depth limit not reported")
	}
	if len(x.stack) > maxHTMLDepth {
		t.Errorf("style stack grew to %d frames, limit %d", len(x.stack), maxHTMLDepth)
	}
	// A hiding element above the limit still hides what is under it.
	src = `<div style="display:none">` + strings.Repeat("<b>", 1000) + "x" + strings.Repeat("</b>", 1000) + "</div>seen"
	if r := x.extract(src); r.text != "seen" || r.hidden != 1 {
		t.Errorf("hidden under deep nesting: got %q hidden=%d", r.text, r.hidden)
	}
}

// TestHTMLLinks checks which link targets give domains.
func TestHTMLLinks(t *testing.T) {
	r := htmlText(`<a href="http://a.example.com/">x</a><a href="mailto:b@example.org">m</a>` +
		`<a style="display:none" href="http://hidden.example.net/">h</a><div style="display:none"><a href="http://c.example.net">c</a></div>` +
		`<a href="https://d.example.co.uk/">d</a><area href="https://e.example.io/">`)
	got := strings.Join(r.domains, " ")
	if want := "example.com example.co.uk example.io"; got != want {
		t.Errorf("domains: got %q, want %q", got, want)
	}
}

func TestHTMLImages(t *testing.T) {
	for _, tc := range []struct {
		name, html, want string
	}{
		{"host, query and fragment dropped, case and slashes folded",
			`<IMG SRC="http://Host-1.example/Images//Offer_2.JPG?u=7#t"><img src='https://h2.example.net/i/w5unGx/a.gif'>`,
			"/images/offer_2.jpg /i/w5ungx/a.gif"},
		{"tracking pixels and spacers left out",
			`<img src="http://t.example/o/abc.gif" width=1 height=1><img src="http://t.example/s.gif" width="2px"><img src="http://t.example/b.gif" width="100%">`,
			"/b.gif"},
		{"hidden, cid, data and relative images left out; a bare host has no path",
			`<div style="display:none"><img src="http://h.example/x.gif"></div><img src="cid:part1"><img src="data:image/gif;base64,R0lG"><img src="/local.gif"><img src="http://h.example/">`,
			""},
		{"inside an unclosed style: raw text, as a browser reads it",
			`<img src="http://h.example/1.gif"><style>p{} <img src="http://h.example/2.gif">`,
			"/1.gif"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(htmlText(tc.html).images, " "); got != tc.want {
				t.Errorf("images: got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestExtractImages(t *testing.T) {
	alt := "Subject: x\nContent-Type: multipart/alternative; boundary=a\n\n" +
		"--a\nContent-Type: text/plain\n\nsee the pictures\n" +
		"--a\nContent-Type: text/html\n\n<img src=\"http://a.example/2.gif\"><img src=\"http://b.example/1.gif\"><img src=\"http://c.example/2.gif\">\n" +
		"--a--\n"
	tx := Extract(strings.NewReader(alt), DefaultLimits)
	// The reader is shown the plain text (the HTML has none) and sees the
	// HTML's images all the same, each once.
	if got, want := strings.Join(tx.Images, " "), "/2.gif /1.gif"; got != want {
		t.Errorf("images: got %q, want %q", got, want)
	}
}

// An entity in src is decoded in the tokenizer's scratch buffer, which a
// later attribute with an entity reuses: the path must not change.
func TestHTMLImageSrcEntity(t *testing.T) {
	r := htmlText(`<img src="http://h.example/a&#47;offer.gif" alt="x &amp; y" title="&lt;zzzzzzzzzzzzzzzzzzzz&gt;">`)
	if got, want := strings.Join(r.images, " "), "/a/offer.gif"; got != want {
		t.Errorf("images: got %q, want %q", got, want)
	}
}
