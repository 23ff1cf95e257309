package mailtext

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// imageMail is an HTML message with one base64 image/gif part whose body
// is b64 (any text, valid base64 or not).
func imageMail(b64 string) string {
	return "Subject: look\r\nMIME-Version: 1.0\r\nContent-Type: multipart/related; boundary=\"b1\"\r\n\r\n" +
		"--b1\r\nContent-Type: text/html\r\n\r\n<img src=\"cid:x\">\r\n" +
		"--b1\r\nContent-Type: image/gif\r\nContent-Transfer-Encoding: base64\r\nContent-ID: <x>\r\n\r\n" +
		b64 + "\r\n--b1--\r\n"
}

// wrapped is base64 of b in lines of 76 characters, as mailers write it.
func wrapped(b []byte, eol string) string {
	s := base64.StdEncoding.EncodeToString(b)
	var out strings.Builder
	for len(s) > 76 {
		out.WriteString(s[:76] + eol)
		s = s[76:]
	}
	out.WriteString(s)
	return out.String()
}

func TestAttachmentsKept(t *testing.T) {
	img := bytes.Repeat([]byte("GIF89a pixels "), 300)
	pdf := []byte("%PDF-1.4 a small document")
	mixed := "Subject: two\nContent-Type: multipart/mixed; boundary=m\n\n" +
		"--m\nContent-Type: multipart/alternative; boundary=a\n\n" +
		"--a\nContent-Type: text/plain\n\nhello\n" +
		"--a\nContent-Type: multipart/related; boundary=r\n\n" +
		"--r\nContent-Type: text/html\n\n<p>hello</p>\n" +
		"--r\nContent-Type: image/gif\nContent-Transfer-Encoding: base64\n\n" + wrapped(img, "\n") + "\n--r--\n" +
		"--a--\n" +
		"--m\nContent-Type: application/pdf\nContent-Disposition: attachment; filename=x.pdf\n\n" + string(pdf) + "\n" +
		"--m\nContent-Type: text/calendar\n\nBEGIN:VCALENDAR\n" +
		"--m--\n"
	for _, tc := range []struct {
		name string
		msg  string
		want []Attachment
	}{
		{"crlf", imageMail(wrapped(img, "\r\n")), []Attachment{{"image/gif", img}}},
		{"lf, one line", strings.ReplaceAll(imageMail(base64.StdEncoding.EncodeToString(img)), "\r\n", "\n"), []Attachment{{"image/gif", img}}},
		{"nested, in an alternative not shown, and attached", mixed, []Attachment{{"image/gif", img}, {"application/pdf", pdf}}},
		{"text only", "Subject: x\n\nhello\n", nil},
		{"empty part", imageMail(""), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx := Extract(strings.NewReader(tc.msg), DefaultLimits)
			if len(tx.Attachments) != len(tc.want) {
				t.Fatalf("got %d attachments %+v, want %d", len(tx.Attachments), tx.Attachments, len(tc.want))
			}
			for i, a := range tx.Attachments {
				if a.ContentType != tc.want[i].ContentType || !bytes.Equal(a.Data, tc.want[i].Data) {
					t.Errorf("attachment %d: got %s %d bytes, want %s %d bytes", i, a.ContentType, len(a.Data), tc.want[i].ContentType, len(tc.want[i].Data))
				}
			}
			if tx.Stats.AttachSkipped != 0 {
				t.Errorf("got %d skipped, want 0", tx.Stats.AttachSkipped)
			}
		})
	}
}

func TestAttachmentLimits(t *testing.T) {
	img := bytes.Repeat([]byte{0, 1, 2, 3, 250}, 2000) // 10,000 bytes
	one := imageMail(wrapped(img, "\r\n"))
	for _, tc := range []struct {
		name      string
		lim       Limits
		msg       string
		kept, skp int
	}{
		{"within", Limits{MaxAttachBytes: 10000}, one, 1, 0},
		{"one byte too large", Limits{MaxAttachBytes: 9999}, one, 0, 1},
		{"none", Limits{MaxAttachments: -1}, one, 0, 0},
		{"count", Limits{MaxAttachments: 2}, "Content-Type: multipart/mixed; boundary=m\n\n" +
			strings.Repeat("--m\nContent-Type: image/png\n\nabc\n", 5) + "--m--\n", 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx := Extract(strings.NewReader(tc.msg), tc.lim)
			if len(tx.Attachments) != tc.kept || tx.Stats.AttachSkipped != tc.skp {
				t.Errorf("got %d kept, %d skipped; want %d, %d", len(tx.Attachments), tx.Stats.AttachSkipped, tc.kept, tc.skp)
			}
			// The rest is read as without attachments either way.
			if tc.msg == one && tx.Subject != "look" {
				t.Errorf("got subject %q, want look", tx.Subject)
			}
		})
	}
}

// A broken base64 image is kept as far as it decodes, with the
// defect recorded; the text around it is read as usual.
func TestAttachmentBrokenBase64(t *testing.T) {
	tx := Extract(strings.NewReader(imageMail("R0lGOD!!lhAQAB=AIAA\r\n%%%\r\nAAAA")), DefaultLimits)
	found := false
	for _, d := range tx.Defects {
		found = found || d.Kind == DefectBase64
	}
	if !found {
		t.Errorf("got defects %v, want %s", tx.Defects, DefectBase64)
	}
	if tx.Subject != "look" || len(tx.Parts) != 1 {
		t.Errorf("got subject %q and %d parts, want look and 1", tx.Subject, len(tx.Parts))
	}
}

// An attachment keeps the buffer it was decoded into: the parts after it,
// in the same message and in the next message the pooled walker reads,
// decode into buffers of their own and never overwrite it.
func TestAttachmentsOwnTheirBytes(t *testing.T) {
	blob := func(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }
	x, y, z, raw := blob('x', 3000), blob('y', 5000), blob('z', 4000), blob('r', 2000)
	part := func(ct, cte, body string) string {
		return "--m\r\nContent-Type: " + ct + "\r\nContent-Transfer-Encoding: " + cte + "\r\n\r\n" + body + "\r\n"
	}
	mail := func(parts ...string) string {
		return "Content-Type: multipart/mixed; boundary=m\r\n\r\n" + strings.Join(parts, "") + "--m--\r\n"
	}
	a := Extract(strings.NewReader(mail(
		part("image/gif", "base64", wrapped(x, "\r\n")),
		part("text/plain", "base64", wrapped([]byte(strings.Repeat("weekly offers ", 300)), "\r\n")),
		part("application/octet-stream", "8bit", string(raw)),
		part("text/plain", "7bit", strings.Repeat("garden tools ", 300)),
		part("image/png", "quoted-printable", string(y)),
	)), DefaultLimits)
	b := Extract(strings.NewReader(mail(part("image/gif", "base64", wrapped(z, "\r\n")))), DefaultLimits)
	for _, tc := range []struct {
		name string
		tx   *Text
		want [][]byte
	}{{"first message", a, [][]byte{x, raw, y}}, {"second message", b, [][]byte{z}}} {
		if len(tc.tx.Attachments) != len(tc.want) {
			t.Fatalf("%s: %d attachments, want %d", tc.name, len(tc.tx.Attachments), len(tc.want))
		}
		for i, at := range tc.tx.Attachments {
			if !bytes.Equal(at.Data, tc.want[i]) {
				t.Errorf("%s: attachment %d (%s) overwritten: %.20q…", tc.name, i, at.ContentType, at.Data)
			}
		}
	}
	if len(a.Parts) == 0 || !strings.Contains(a.Parts[0].Text, "weekly offers") {
		t.Errorf("the text between the attachments: %+v", a.Parts)
	}
}

// BenchmarkExtractAttachments: a message with three 100 KB base64 images.
func BenchmarkExtractAttachments(b *testing.B) {
	img := bytes.Repeat([]byte("GIF89a\x01\x00\x01\x00\x00\xff\x00,"), 100_000/14)
	msg := "Content-Type: multipart/mixed; boundary=m\r\n\r\n--m\r\nContent-Type: text/plain\r\n\r\nsee the pictures\r\n"
	for range 3 {
		msg += "--m\r\nContent-Type: image/gif\r\nContent-Transfer-Encoding: base64\r\n\r\n" + wrapped(img, "\r\n") + "\r\n"
	}
	msg += "--m--\r\n"
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if tx := Extract(strings.NewReader(msg), DefaultLimits); len(tx.Attachments) != 3 {
			b.Fatalf("%d attachments", len(tx.Attachments))
		}
	}
}
