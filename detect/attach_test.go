package detect

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/signature"
)

// imageMessage is an HTML message whose offer is an inline GIF (img, its
// bytes) and whose text is text (none for image spam).
func imageMessage(img []byte, text, rcpt string) *Message {
	var h textproto.Header
	h.Set("Subject", "")
	h.Set("Content-Type", `multipart/related; boundary="b"`)
	body := "--b\r\nContent-Type: text/html\r\n\r\n<p>" + text + "</p><img src=\"cid:i\">\r\n" +
		"--b\r\nContent-Type: image/gif\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		base64.StdEncoding.EncodeToString(img) + "\r\n--b--\r\n"
	return &Message{Header: h, Body: strings.NewReader(body), Recipients: []string{rcpt}}
}

// Image spam (no text any family signs) is counted by its image, the same
// from every sender; a message with text is counted by its text alone,
// so a logo does not tie different messages together.
func TestImageSpam(t *testing.T) {
	f := newFixtureSet(t, emptyStore(t), true, true)
	img := bytes.Repeat([]byte("GIF89a buy pills now "), 100)
	for i := range threshold {
		msg := imageMessage(img, "", fmt.Sprintf("u%d@example.test", i))
		msg.Client = netip.AddrFrom4([4]byte{198, 51, byte(i), 7})
		v := f.e.Check(context.Background(), msg)
		if v.Err != nil || v.Unsigned {
			t.Fatalf("copy %d: verdict %+v", i, v)
		}
		if got := v.Volumes[signature.FamilyAttach]; got != int64(i+1) {
			t.Errorf("copy %d: got attach volume %d, want %d", i, got, i+1)
		}
		if want := i+1 >= threshold; v.Bulk != want {
			t.Errorf("copy %d: got bulk %v, want %v", i, v.Bulk, want)
		}
	}
	// The same image beside text of its own: the text families sign it,
	// the image gives no key.
	personal := imageMessage(img, "Dear Anna, here are the minutes of yesterday's meeting about the garden, the budget for the new fence and the list of volunteers for the spring cleaning. "+
		"Please tell me before Friday whether you can bring the ladder and the tools, and whether your brother still wants to help with the hedges.", "anna@example.test")
	a := f.e.Analyze(personal)
	for _, k := range a.Keys {
		if k.Family == signature.FamilyAttach {
			t.Fatalf("got an attach key for a message whose text is signed (%d keys)", len(a.Keys))
		}
	}
	if len(a.Keys) == 0 {
		t.Fatal("the text was not signed")
	}
}

// Without the attachment family the walk reads no part it would digest.
func TestAttachOffSkipsParts(t *testing.T) {
	f := newFixtureSet(t, emptyStore(t), true, false)
	a := f.e.Analyze(imageMessage([]byte("GIF89a"), "", "u@example.test"))
	if n := len(a.Text.Attachments); n != 0 {
		t.Errorf("got %d parts digested, want 0", n)
	}
}
