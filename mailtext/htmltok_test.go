package mailtext

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// tokens lists what a tokenizer gives for src, in the form both
// tokenizers' methods allow: type, text, tag name, attributes.
func tokens(next func() html.TokenType, text func() []byte, name func() ([]byte, bool), attr func() ([]byte, []byte, bool)) []string {
	var out []string
	for {
		tt := next()
		switch tt {
		case html.ErrorToken:
			return out
		case html.TextToken, html.CommentToken, html.DoctypeToken:
			out = append(out, fmt.Sprintf("%v %q", tt, text()))
		default:
			n, more := name()
			s := fmt.Sprintf("%v %q", tt, n)
			for more {
				var k, v []byte
				k, v, more = attr()
				s += fmt.Sprintf(" %q=%q", k, v)
			}
			out = append(out, s)
		}
	}
}

func xnetTokens(src string, maxBuf int) []string {
	z := html.NewTokenizer(strings.NewReader(src))
	z.SetMaxBuf(maxBuf)
	return tokens(z.Next, z.Text, z.TagName, z.TagAttr)
}

func ourTokens(z *tokenizer, src string, maxBuf int) []string {
	z.reset(src, maxBuf)
	return tokens(z.Next, z.Text, z.TagName, z.TagAttr)
}

// FuzzTokenizerAsXNet holds the adapted tokenizer to x/net's: the same
// tokens, texts, names and attributes for any input, with and without a
// buffer limit, and from a tokenizer reused as the extractor reuses it.
func FuzzTokenizerAsXNet(f *testing.F) {
	for _, s := range []string{
		`<p style="display:none">x</p>y`,
		`<A HREF="http://x/?a=1&amp;b=2&copy=3&copy;&not&notin;&notit;&#65;&#x41;&#0;&#x110000;&#128;&am">T&eacute;&ampx&lt</A>`,
		`<div class=a CLASS=b class='c' id="&NotNestedGreaterGreater;&nGt;&fjlig;"/>x<br/ ><p a=/>`,
		"<title>a<b>c&amp;</b>\r\nd</title><script><!--<script>x</script>--></script><textarea>&lt;</textarea>",
		"<style>p{}</style><xmp><b></xmp><plaintext><p>&amp;",
		"<!-- a --!><!--><!---><!DOCTYPE html><!doctyp><?xml x?></ a><//><a\x00b c\x00d=e\x00f>\x00&#0;",
		"<a b='\r\nc\rd'  e = f g=\">\" h>i</a><!--x--",
		`<a ` + strings.Repeat(`x=1 X=2 `, 40) + `y=3>`,
		`<a =b c==d></a b=c>`,
	} {
		f.Add(s)
	}
	if files, _ := filepath.Glob("testdata/golden/*.eml"); len(files) > 0 {
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil && strings.Contains(strings.ToLower(string(b)), "<html") {
				f.Add(string(b))
			}
		}
	}
	var z tokenizer
	f.Fuzz(func(t *testing.T, src string) {
		for _, maxBuf := range []int{0, 1, 7, 40} {
			want := xnetTokens(src, maxBuf)
			got := ourTokens(&z, src, maxBuf)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				for i := range max(len(got), len(want)) {
					var g, w string
					if i < len(got) {
						g = got[i]
					}
					if i < len(want) {
						w = want[i]
					}
					if g != w {
						t.Fatalf("maxBuf %d, token %d: got %s, want (x/net) %s", maxBuf, i, g, w)
					}
				}
			}
		}
	})
}
