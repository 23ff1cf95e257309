package mailtext

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzLimits are small, so that the fuzzer reaches them.
var fuzzLimits = Limits{MaxDepth: 8, MaxParts: 32, MaxTextBytes: 4096, MaxAttachments: 3, MaxAttachBytes: 256}

func addGoldenSeeds(f *testing.F) {
	files, _ := filepath.Glob("testdata/golden/*.eml")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(nested(12, "deep")))
	f.Add([]byte(imageMail("R0lGODlhAQABAIAAAP///wAAACwAAAAAAQABAAACAkQBADs=")))
	f.Add([]byte(imageMail("R0lGOD!!lhAQAB=AIAA\r\n%%%")))
	f.Add([]byte("Subject: x\nContent-Type: text/html\n\n<img src=\"http://h.example/i//A.gif?x#y\"><img src=\"www.h.example/1.gif\" width=1>"))
	// Branches the generated corpus did not reach: a charset only in a
	// <meta>, RFC 2231 parameters (continued, percent-encoded, a bad
	// escape), an encoded message/rfc822 (base64 and quoted-printable)
	// inside one that is not, and a plain alternative of two parts
	// compared with the HTML one.
	f.Add([]byte("Content-Type: text/html\n\n<html><head><META HTTP-EQUIV=\"Content-Type\" CONTENT=\"text/html; Charset='Windows-1251'\"></head><body>\xcf\xf0\xe8\xe2\xe5\xf2</body></html>"))
	f.Add([]byte("Content-Type: multipart/mixed; boundary*0=\"ab\"; boundary*1=cd\n\n--abcd\nContent-Type: text/plain; charset*=iso-8859-1'en'%A3%20rates%zz%4\n\n\xa3 5 only\n--abcd\nContent-Type: application/pdf; name*=utf-8''%E2%82%AC.pdf\nContent-Disposition: attachment; filename*0*=utf-8''a%20; filename*1=\"b \\\"c\\\".pdf\"\nContent-Transfer-Encoding: base64\n\nJVBERi0xLjQK\n--abcd--\n"))
	f.Add([]byte("Subject: outer\nContent-Type: message/rfc822\n\nSubject: middle\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: message/rfc822\nContent-Transfer-Encoding: base64\n\nU3ViamVjdDogaW5uZXIKCmhlbGxvIGZyb20gd2l0aGluCg==\n--b\nContent-Type: message/rfc822\nContent-Transfer-Encoding: quoted-printable\n\nSubject: =3D?utf-8?q?caf=C3=A9?=3D\n\nqp inner=20body=\n--b--\n"))
	f.Add([]byte(strings.Repeat("Content-Type: message/rfc822\n\n", 10) + "Subject: deep\n\nbottom"))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: message/rfc822\n\nSubject: cut short\nFrom: a@b\n--b\nContent-Type: text/plain\n\nafter\n--b--\n"))
	f.Add([]byte("Content-Type: multipart/alternative; boundary=o\n\n--o\nContent-Type: multipart/mixed; boundary=i\n\n--i\nContent-Type: text/plain\n\nfirst plain part about cheap watches\n--i\nContent-Type: text/plain\n\nsecond plain part\n--i--\n--o\nContent-Type: text/html\n\n<p>an entirely different html text about loans</p>\n--o--\n"))
}

// checkText asserts the invariants every Text keeps: valid UTF-8,
// limits respected.
func checkText(t *testing.T, tx *Text, lim Limits) {
	t.Helper()
	if !utf8.ValidString(tx.Subject) {
		t.Errorf("subject not UTF-8: %q", tx.Subject)
	}
	total := 0
	for _, p := range tx.Parts {
		if !utf8.ValidString(p.Text) {
			t.Errorf("part not UTF-8: %q", p.Text)
		}
		switch p.ContentType {
		case "text/plain", "text/html", "message/rfc822":
		default:
			t.Errorf("unexpected part type %q", p.ContentType)
		}
		total += len(p.Text)
	}
	if total != tx.Stats.TextBytes {
		t.Errorf("TextBytes=%d, parts hold %d", tx.Stats.TextBytes, total)
	}
	if tx.Stats.TextBytes > lim.MaxTextBytes {
		t.Errorf("kept %d bytes of text, limit %d", tx.Stats.TextBytes, lim.MaxTextBytes)
	}
	if tx.Stats.Parts > lim.MaxParts {
		t.Errorf("visited %d parts, limit %d", tx.Stats.Parts, lim.MaxParts)
	}
	if tx.Stats.MaxDepth > lim.MaxDepth {
		t.Errorf("depth %d, limit %d", tx.Stats.MaxDepth, lim.MaxDepth)
	}
	if len(tx.Domains) > maxDomains {
		t.Errorf("%d domains", len(tx.Domains))
	}
	for _, d := range tx.Domains {
		if d == "" || !utf8.ValidString(d) || strings.ContainsAny(d, " /\\@") {
			t.Errorf("bad domain %q", d)
		}
	}
	if len(tx.Images) > maxImages {
		t.Errorf("%d images", len(tx.Images))
	}
	for _, p := range tx.Images {
		if len(p) < 2 || len(p) > maxImagePath || p[0] != '/' || strings.Contains(p, "//") || strings.ContainsAny(p, "?#ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			t.Errorf("bad image path %q", p)
		}
	}
	if len(tx.Attachments) > max(lim.MaxAttachments, 0) {
		t.Errorf("%d attachments kept, limit %d", len(tx.Attachments), lim.MaxAttachments)
	}
	for _, a := range tx.Attachments {
		if len(a.Data) == 0 || len(a.Data) > lim.MaxAttachBytes || strings.HasPrefix(a.ContentType, "text/") || strings.HasPrefix(a.ContentType, "multipart/") {
			t.Errorf("bad attachment %+v (limit %d bytes)", a, lim.MaxAttachBytes)
		}
	}
	seen := map[DefectKind]bool{}
	for _, d := range tx.Defects {
		if seen[d.Kind] {
			t.Errorf("defect %s recorded twice", d.Kind)
		}
		seen[d.Kind] = true
	}
}

// FuzzExtract fuzzes the MIME walk.
func FuzzExtract(f *testing.F) {
	addGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, msg []byte) {
		tx := Extract(bytes.NewReader(msg), fuzzLimits)
		checkText(t, tx, fuzzLimits)
	})
}

// FuzzHTML fuzzes the visible-text extractor.
func FuzzHTML(f *testing.F) {
	for _, s := range []string{
		`<p style="display:none">x</p>y`,
		`<style>.a{color:#fff}</style><b class=a>x</b>`,
		`<table><tr><td bgcolor=black><font color=black>x`,
		`<div style="font:0/0 a;background:url(x);clip:rect(0 0 0 0)">`,
		`<a href="http://a@b.example.com:80/">x</a>&#x10FFFF;&amp`,
		`<img src="HTTP://x.example//A//b.GIF?id=1" width=600><img src=//y/1.gif height="1px">`,
		`<span style="color:hsla(120,100%,50%,.01);transform:scale(0,1)">`,
		strings.Repeat("<div>", 300) + "x",
		// The tokenizer's other states: doctype, comments (abrupt and
		// bogus), CDATA, a repeated attribute, CR LF and NUL in text.
		"<!DOCTYPE html><!-- a --!><!--><?x?><![CDATA[c]]></ x><p a=1 A=2 a>l\r\nm\x00</p>",
		`<font color="rgba(255,255,255,.5)" style="background:#fffffe">x</font><a href="http://bücher.example/">y</a>`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		var x htmlExtractor
		r := x.extract(src)
		if !utf8.ValidString(r.text) && utf8.ValidString(src) {
			t.Errorf("visible text not UTF-8: %q", r.text)
		}
		if len(r.text) > len(src)+len(src)/2+4 {
			t.Errorf("visible text (%d bytes) longer than its source (%d)", len(r.text), len(src))
		}
		if len(x.stack) > maxHTMLDepth {
			t.Errorf("style stack %d frames", len(x.stack))
		}
		if len(r.images) > maxImages {
			t.Errorf("%d images", len(r.images))
		}
		if r.visible < 0 || r.hidden < 0 || r.comment < 0 {
			t.Errorf("negative counts %+v", r)
		}
	})
}
