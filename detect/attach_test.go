package detect

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"math/rand/v2"
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

// offerGIF draws image spam's offer (dark bars, lines of text, on white)
// with 200 noise dots of its own per seed, as the real stream's image
// spam randomises each copy's image, and per stamp one cell of the 8×8
// shape grid in its white margin painted black, as image spam stamps a
// recipient's code or a random mark on each copy (the stamps' cells are
// in the grid's last two rows, one band of the shape).
func offerGIF(t *testing.T, seed uint64, stamps ...int) []byte {
	t.Helper()
	img := image.NewPaletted(image.Rect(0, 0, 360, 240), color.Palette{color.White, color.Black, color.RGBA{0xc0, 0x20, 0x20, 0xff}})
	for line := range 6 {
		for y := 20 + line*36; y < 38+line*36; y++ {
			for x := 30 + line*9; x < 300-line*20; x++ {
				img.SetColorIndex(x, y, 1)
			}
		}
	}
	r := rand.New(rand.NewPCG(seed, 7))
	for range 200 {
		img.SetColorIndex(r.IntN(360), r.IntN(240), uint8(1+r.IntN(2)))
	}
	cells := [][2]int{{6, 0}, {7, 0}, {6, 6}, {7, 6}, {6, 7}, {7, 7}} // row, column: white but for noise
	for _, s := range stamps {
		for y := cells[s][0] * 30; y < cells[s][0]*30+30; y++ {
			for x := cells[s][1] * 45; x < cells[s][1]*45+45; x++ {
				img.SetColorIndex(x, y, 1)
			}
		}
	}
	var b bytes.Buffer
	if err := gif.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Image spam whose copies differ is counted as one campaign; the tenth
// copy is bulk:
//   - randomised: the image randomised per copy (other noise dots, so other
//     bytes), padded with a short text of its own, is counted by the
//     image's shape;
//   - stamped: every copy stamped differently (a cell or two of its shape
//     flipped, in one band), so that no two copies have the same shape, is
//     counted by the shape's near keys (exact shape keys count each copy
//     alone);
//   - filler: the randomised image beside a filler of 150 random words of
//     its own per copy, over short_text, which no text family joins, is
//     counted by the shape of its sole image (SoleImage).
func TestVariedImageSpam(t *testing.T) {
	words := strings.Fields("harbour lantern meadow quarrel saddle thimble velvet whisper orchard pebble candle ribbon tunnel garden window silver kettle ladder")
	stamps := [][]int{{0}, {1}, {2}, {3}, {4}, {5}, {0, 1}, {2, 3}, {4, 5}, {0, 5}, {1, 4}}
	tests := []struct {
		name string
		copy func(i int) (img []byte, text string)
	}{
		{"randomised", func(i int) ([]byte, string) {
			r := rand.New(rand.NewPCG(uint64(i), 3))
			r.Shuffle(len(words), func(a, b int) { words[a], words[b] = words[b], words[a] })
			return offerGIF(t, uint64(i)), strings.Join(words[:12], " ")
		}},
		{"stamped", func(i int) ([]byte, string) { return offerGIF(t, 1, stamps[i]...), "" }},
		{"filler", func(i int) ([]byte, string) {
			r := rand.New(rand.NewPCG(uint64(i), 5))
			filler := make([]string, 150)
			for j := range filler {
				w := make([]byte, 4+r.IntN(6))
				for k := range w {
					w[k] = byte('a' + r.IntN(26))
				}
				filler[j] = string(w)
			}
			return offerGIF(t, uint64(i)), strings.Join(filler, " ")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixtureSet(t, emptyStore(t), true, true)
			for i := range threshold {
				img, text := tc.copy(i)
				msg := imageMessage(img, text, fmt.Sprintf("u%d@example.test", i))
				msg.Client = netip.AddrFrom4([4]byte{203, 0, byte(i), 9})
				v := f.e.Check(context.Background(), msg)
				if v.Err != nil || v.Unsigned {
					t.Fatalf("copy %d: verdict %+v", i, v)
				}
				if want := i+1 >= threshold; v.Bulk != want {
					t.Errorf("copy %d: got bulk %v (volumes %v), want %v", i, v.Bulk, v.Volumes, want)
				}
			}
		})
	}
}

// remoteMessage is an HTML message whose offer is remote images (imgs,
// whole tags) and whose only words are hidden: a title and an unclosed
// style, as the real stream's remote-image spam hides a paragraph.
func remoteMessage(subject, imgs, rcpt string) *Message {
	var h textproto.Header
	h.Set("Subject", subject)
	h.Set("Content-Type", "text/html")
	body := "<html><head><title>The university system has five campuses and an online school</title></head><body>" +
		imgs + "<style>\r\nNot one of these taxes existed a hundred years ago.\r\n"
	return &Message{Header: h, Body: strings.NewReader(body), Recipients: []string{rcpt}}
}

// Remote-image spam, each copy's images on another host and with another
// query, is one campaign by the set of its image paths: the tenth copy is
// bulk. Two shops' image-only newsletters that share a logo and a spacer
// but not their offers stay apart: each counts its own recipients only.
func TestRemoteImageSpam(t *testing.T) {
	f := newFixtureSet(t, emptyStore(t), true, true)
	for i := range threshold {
		imgs := fmt.Sprintf(`<a href="http://h%d.example/x"><img src="http://www.h%d.example/Images//1.gif"></a><img src="http://h%d.example/images/2.GIF?id=%d">`, i, i, i, i)
		msg := remoteMessage(fmt.Sprintf("RE: MedHelp %d", 476116204050+i), imgs, fmt.Sprintf("u%d@example.test", i))
		msg.Client = netip.AddrFrom4([4]byte{198, 51, byte(i), 7})
		v := f.e.Check(context.Background(), msg)
		if v.Err != nil || v.Unsigned {
			t.Fatalf("copy %d: verdict %+v", i, v)
		}
		if want := i+1 >= threshold; v.Bulk != want || v.Volumes[signature.FamilyAttach] != int64(i+1) {
			t.Errorf("copy %d: got bulk %v, volumes %v; want bulk %v, attach volume %d", i, v.Bulk, v.Volumes, want, i+1)
		}
	}
	shared := `<img src="http://cdn.example/img/logo.png"><img src="http://cdn.example/img/spacer.gif" width="1" height="1">`
	shops := []string{`<img src="http://a.example/spring/sale.jpg">`, `<img src="http://b.example/offers/week17.jpg">`}
	for i := range 2 * (threshold - 1) {
		shop := i % 2
		msg := remoteMessage("This week's offers", shared+shops[shop], fmt.Sprintf("r%d@example.test", i))
		msg.Client = netip.AddrFrom4([4]byte{192, 0, 2, byte(shop)})
		v := f.e.Check(context.Background(), msg)
		if v.Err != nil || v.Unsigned || v.Bulk || v.Volumes[signature.FamilyAttach] != int64(i/2+1) {
			t.Errorf("shop %d, issue %d: got %+v, want not bulk, attach volume %d (its own shop's recipients)", shop, i/2, v, i/2+1)
		}
	}
}
