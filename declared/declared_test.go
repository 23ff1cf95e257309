package declared

import (
	"reflect"
	"strings"
	"testing"

	"github.com/emersion/go-message/textproto"
)

func TestParseAuthResults(t *testing.T) {
	tests := []struct {
		name, in string
		want     AuthResults
	}{
		{"opendkim", "mx.example.test;\n\tdkim=pass (1024-bit key) header.d=news.example header.i=@news.example header.a=rsa-sha256 header.s=s1 header.b=B+DACPBU;\n\tdkim-atps=neutral",
			AuthResults{"mx.example.test", []Result{
				{Method: "dkim", Value: "pass", Props: map[string]string{"header.d": "news.example", "header.i": "@news.example", "header.a": "rsa-sha256", "header.s": "s1", "header.b": "B+DACPBU"}},
				{Method: "dkim-atps", Value: "neutral"},
			}}},
		{"rfc 8601 example with version and comments", `example.com 1 (comment; with ;) ; spf=pass smtp.mailfrom=example.net (a "quoted" comment (nested)); dkim/1 = fail reason="bad sig" header.d = example.net`,
			AuthResults{"example.com", []Result{
				{Method: "spf", Value: "pass", Props: map[string]string{"smtp.mailfrom": "example.net"}},
				{Method: "dkim", Value: "fail", Reason: "bad sig", Props: map[string]string{"header.d": "example.net"}},
			}}},
		{"none", "example.org; none", AuthResults{AuthservID: "example.org"}},
		{"quoted id, padded b", `"mx.example.org"; dkim=pass header.b=abc= header.d=a.example`,
			AuthResults{"mx.example.org", []Result{{Method: "dkim", Value: "pass", Props: map[string]string{"header.b": "abc=", "header.d": "a.example"}}}}},
		{"junk result skipped", "mx; ===; dkim=pass header.d=x.example; ;",
			AuthResults{"mx", []Result{{Method: "dkim", Value: "pass", Props: map[string]string{"header.d": "x.example"}}}}},
		{"first property wins", "mx; dkim=pass header.d=a.example header.d=b.example",
			AuthResults{"mx", []Result{{Method: "dkim", Value: "pass", Props: map[string]string{"header.d": "a.example"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAuthResults(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v,\nwant %+v", got, tt.want)
			}
			if id := AuthservID(tt.in); id != tt.want.AuthservID {
				t.Errorf("AuthservID = %q, want %q", id, tt.want.AuthservID)
			}
		})
	}
	for _, bad := range []string{"", "  ", "; dkim=pass", "(only a comment)"} {
		if _, err := ParseAuthResults(bad); err == nil {
			t.Errorf("ParseAuthResults(%q): no error", bad)
		}
	}
}

func TestParseAuthResultsBounded(t *testing.T) {
	ar, err := ParseAuthResults("mx" + strings.Repeat("; dkim=pass header.d=x", 10000))
	if err != nil || len(ar.Results) != maxResults {
		t.Fatalf("got %d results, %v; want %d", len(ar.Results), err, maxResults)
	}
}

func TestParseSignature(t *testing.T) {
	got, err := ParseSignature(" v=1; a=rsa-sha256; c=relaxed/relaxed; d=News.Example; s=S1;\n\tt=1795689106; bh=s7A8=;\n\th=From:To:Subject:List-Unsubscribe:\n\t List-Unsubscribe-Post;\n\tb=B+DACPBU87Sv\n\t uLsJ==")
	want := Signature{Domain: "news.example", Selector: "s1", B: "B+DACPBU87SvuLsJ==",
		Headers: []string{"from", "to", "subject", "list-unsubscribe", "list-unsubscribe-post"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	if _, err := ParseSignature("v=1; s=x; b=abc"); err == nil {
		t.Error("a signature without d= and h= parsed")
	}
}

const (
	sigNews   = "v=1; a=rsa-sha256; d=news.example; s=s1; h=From:Subject:List-Unsubscribe:List-Unsubscribe-Post:List-Id; b=B+DACPBU87Svrl+Bal"
	sigFooter = "v=1; a=rsa-sha256; d=esp.example; s=k2; h=From:Feedback-ID; b=ZZZZ0000"
	arPass    = "mx.example.test; dkim=pass (1024-bit key) header.d=news.example header.i=@news.example header.s=s1 header.b=B+DACPBU"
)

func header(fields ...string) textproto.Header {
	var h textproto.Header
	for i := len(fields) - 2; i >= 0; i -= 2 { // textproto.Header.Add prepends
		h.Add(fields[i], fields[i+1])
	}
	return h
}

func TestJudge(t *testing.T) {
	newsletter := []string{"DKIM-Signature", sigNews, "From", "news@news.example",
		"List-Unsubscribe", "<https://news.example/u/1>", "List-Unsubscribe-Post", "List-Unsubscribe=One-Click"}
	tests := []struct {
		name    string
		h       textproto.Header
		trusted []string
		want    Judgement
	}{
		{"signed one-click newsletter", header(newsletter...), []string{arPass},
			Judgement{Declared: true, Domain: "news.example", Evidence: []string{OneClick}, Passed: 1}},
		{"no trusted result", header(newsletter...), nil,
			Judgement{Uncovered: []string{OneClick}}},
		{"signature failed", header(newsletter...), []string{strings.Replace(arPass, "pass", "fail", 1)},
			Judgement{Uncovered: []string{OneClick}}},
		{"the verifier's fail beats a later forged pass", header(newsletter...),
			[]string{strings.Replace(arPass, "pass", "fail", 1), arPass},
			Judgement{Uncovered: []string{OneClick}}},
		{"a spf result first does not hide the dkim one", header(newsletter...),
			[]string{"mx.example.test; spf=pass smtp.mailfrom=news.example", arPass},
			Judgement{Declared: true, Domain: "news.example", Evidence: []string{OneClick}, Passed: 1}},
		{"pass for another signature's b=", header(newsletter...), []string{strings.Replace(arPass, "B+DACPBU", "XXXXXXXX", 1)},
			Judgement{Uncovered: []string{OneClick}}},
		{"pass without the signature in the message", header(newsletter[2:]...), []string{arPass},
			Judgement{Uncovered: []string{OneClick}}},
		{"one-click without List-Unsubscribe-Post is no declaration", header(newsletter[:6]...), []string{arPass},
			Judgement{}},
		{"List-Unsubscribe-Post not covered", header("DKIM-Signature", strings.Replace(sigNews, ":List-Unsubscribe-Post", "", 1),
			"List-Unsubscribe", "<https://news.example/u/1>", "List-Unsubscribe-Post", "List-Unsubscribe=One-Click"), []string{arPass},
			Judgement{Domain: "news.example", Uncovered: []string{OneClick}, Passed: 1}},
		{"list-id covered, precedence not", header(append(newsletter[:2:2], "List-Id", "<news.news.example>", "Precedence", " Bulk ")...), []string{arPass},
			Judgement{Declared: true, Domain: "news.example", Evidence: []string{ListID}, Uncovered: []string{Precedence}, Passed: 1}},
		{"feedback-id under the second signature, no header.b", header("DKIM-Signature", sigNews, "DKIM-Signature", sigFooter, "Feedback-ID", "1:2:esp"),
			[]string{"mx.example.test; dkim=pass header.d=news.example header.b=B+DACPBU; dkim=pass header.i=@esp.example"},
			Judgement{Declared: true, Domain: "esp.example", Evidence: []string{FeedbackID}, Passed: 2}},
		{"precedence junk is no declaration", header("Precedence", "junk"), []string{arPass}, Judgement{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Judge(&tt.h, tt.trusted); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v,\nwant %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseAuthResults(f *testing.F) {
	f.Add(arPass)
	f.Add(`example.com 1 (c (n)); spf=pass smtp.mailfrom=a; dkim/1=fail reason="x\"y" header.d=b`)
	f.Add("x; none")
	// A DKIM-Signature value: ParseSignature reads every input too.
	f.Add("v=1; a=rsa-sha256; d=Example.COM; s=s1; i=@example.com; l=100; t=1700000000; x=1700086400; h=from:to:subject; bh=x; b=y")
	f.Fuzz(func(t *testing.T, v string) {
		ar, err := ParseAuthResults(v)
		if err == nil && ar.AuthservID == "" {
			t.Fatal("no error and no authserv-id")
		}
		if len(ar.Results) > maxResults {
			t.Fatalf("%d results", len(ar.Results))
		}
		ParseSignature(v)
	})
}

// BenchmarkJudge is the cost declared bulk adds to every message: a
// signed newsletter with its verifier's result (the most work Judge does).
func BenchmarkJudge(b *testing.B) {
	h := header("Received", "from a by b", "DKIM-Signature", sigNews, "From", "news@news.example", "To", "a@example.test",
		"Subject", "Garden News", "Message-ID", "<x@news.example>", "Date", "Thu, 26 Nov 2026 10:00:00 +0000",
		"List-Id", "<news.news.example>", "List-Unsubscribe", "<https://news.example/u/1>",
		"List-Unsubscribe-Post", "List-Unsubscribe=One-Click", "MIME-Version", "1.0", "Content-Type", "text/plain")
	trusted := []string{arPass}
	b.ReportAllocs()
	for b.Loop() {
		if !Judge(&h, trusted).Declared {
			b.Fatal("not declared")
		}
	}
}
