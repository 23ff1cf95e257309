package signature

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/color/palette"
	"image/draw"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"strings"
	"testing"
)

// offerImage draws an image-spam offer: dark bars (lines of text) on
// white, laid out by layout, with noise dots from seed (the per-copy
// randomisation of the real stream's image spam) and its width scaled by
// scale per cent.
func offerImage(layout uint64, seed uint64, scale int) *image.RGBA {
	w, h := 400*scale/100, 300
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	lr := rand.New(rand.NewPCG(layout, 1))
	for line := 0; line < 8; line++ {
		y0, x0 := 20+line*34, lr.IntN(w/3)
		x1 := x0 + w/4 + lr.IntN(w/2)
		for y := y0; y < y0+18; y++ {
			for x := x0; x < min(x1, w); x++ {
				img.Set(x, y, color.RGBA{0x20, 0x10, 0x60, 0xff})
			}
		}
	}
	nr := rand.New(rand.NewPCG(seed, 2))
	for range 300 {
		img.Set(nr.IntN(w), nr.IntN(h), color.RGBA{uint8(nr.Uint32()), uint8(nr.Uint32()), uint8(nr.Uint32()), 0xff})
	}
	return img
}

func encode(t testing.TB, format string, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	var err error
	switch format {
	case "gif":
		// Paletted first, to a palette of 16 greys, lest the encoder's
		// quantiser take seconds.
		pal := make(color.Palette, 16)
		for i := range pal {
			pal[i] = color.Gray{uint8(i * 17)}
		}
		p := image.NewPaletted(img.Bounds(), pal)
		draw.Draw(p, p.Rect, img, img.Bounds().Min, draw.Src)
		err = gif.Encode(&b, p, nil)
	case "png":
		err = png.Encode(&b, img)
	case "jpeg":
		err = jpeg.Encode(&b, img, &jpeg.Options{Quality: 75})
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestImageShape(t *testing.T) {
	for _, format := range []string{"gif", "png", "jpeg"} {
		t.Run(format, func(t *testing.T) {
			first, ok := imageShape(encode(t, format, offerImage(1, 1, 100)), pixels(1<<21), 0)
			if !ok {
				t.Fatal("no shape for an offer image")
			}
			// Copies with other noise and another width share the shape.
			for _, c := range []struct{ seed, scale int }{{2, 100}, {3, 100}, {4, 90}, {5, 120}} {
				if h, ok := imageShape(encode(t, format, offerImage(1, uint64(c.seed), c.scale)), pixels(1<<21), 0); !ok || h != first {
					t.Errorf("copy with noise %d at %d%%: got %016x %v, want %016x", c.seed, c.scale, h, ok, first)
				}
			}
			// Another offer's layout does not.
			for layout := uint64(2); layout < 6; layout++ {
				if h, _ := imageShape(encode(t, format, offerImage(layout, 1, 100)), pixels(1<<21), 0); h == first {
					t.Errorf("layout %d: got the first layout's shape %016x", layout, h)
				}
			}
		})
	}
}

// A part that is no image, a broken or truncated one, one beyond the
// pixel bound (told by its header alone), a tiny one and a blank one have
// no shape; the signer gives each its exact key.
func TestImageShapeRefused(t *testing.T) {
	good := encode(t, "png", offerImage(1, 1, 100))
	jpegPart := encode(t, "jpeg", offerImage(1, 1, 100))
	blank := image.NewPaletted(image.Rect(0, 0, 200, 100), palette.Plan9)
	tests := []struct {
		name string
		b    []byte
	}{
		{"not an image", bytes.Repeat([]byte("%PDF-1.4 "), 100)},
		{"truncated", good[:len(good)/2]},
		{"broken", append(append([]byte{}, good[:100]...), bytes.Repeat([]byte{0x55}, 2000)...)},
		{"huge canvas", hugePNG()},
		{"jpeg with a thousand scans", append(append([]byte{}, jpegPart[:len(jpegPart)-2]...), bytes.Repeat([]byte{0xff, 0xda, 0, 8, 1, 1, 0, 0, 0x3f, 0}, 1000)...)},
		{"tiny", encode(t, "gif", image.NewGray(image.Rect(0, 0, 12, 12)))},
		{"blank", encode(t, "gif", blank)},
	}
	a, err := NewAttach(testSecret(t), DefaultAttachParams())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if h, ok := imageShape(tc.b, pixels(1<<21), 0); ok {
				t.Errorf("got shape %016x, want none", h)
			}
			if k, _ := firstKey(a.keys(tc.b, pixels(1<<21), 0, true)); k.Index != 0 {
				t.Errorf("got key %v, want the exact key (index 0)", k)
			}
		})
	}
	if k, _ := firstKey(a.keys(good, pixels(1<<21), 300, true)); k.Index != 1 {
		t.Errorf("an offer image 400x300: got key %v, want a shape key (index 1)", k)
	}
	// Below the least side asked for, an image has no shape key: its
	// exact one, or none (and nothing decoded nor taken from the budget).
	left := 1 << 21
	if k, ok := firstKey(a.keys(good, &left, 301, true)); k.Index != 0 || !ok {
		t.Errorf("an image 400x300, 301 pixels a side asked: got key %v %v, want the exact key", k, ok)
	}
	if _, ok := firstKey(a.keys(good, &left, 301, false)); ok || left != 1<<21 {
		t.Errorf("an image 400x300, 301 pixels a side asked, no exact key: got a key, or %d pixels left; want none, all left", left)
	}
	// The pixel budget is the message's: 400×300 pixels leave room for
	// one image of them, and the second gets its exact key.
	left = 400*300 + 1000
	if k, _ := firstKey(a.keys(good, &left, 0, true)); k.Index != 1 || left != 1000 {
		t.Errorf("first image: got key %v, %d pixels left; want a shape key, 1000 left", k, left)
	}
	if k, _ := firstKey(a.keys(encode(t, "gif", offerImage(2, 1, 100)), &left, 0, true)); k.Index != 0 || left != 1000 {
		t.Errorf("second image: got key %v, %d pixels left; want the exact key, 1000 left", k, left)
	}
}

func pixels(n int) *int { return &n }

// firstKey returns the first of a part's keys, and whether it has any.
func firstKey(ks [shapeBands]Key, n int) (Key, bool) { return ks[0], n > 0 }

// opaque hides an image's type, so that greyGrid takes its generic path.
type opaque struct{ image.Image }

// greyGrid's paths for each image type agree with its generic one.
func TestGreyGridPaths(t *testing.T) {
	rgba := offerImage(1, 1, 100)
	for i := 3; i < len(rgba.Pix); i += 4 * 7 {
		rgba.Pix[i] = 0x80 // some translucent pixels, premultiplied below
		rgba.Pix[i-1], rgba.Pix[i-2], rgba.Pix[i-3] = rgba.Pix[i-1]/2, rgba.Pix[i-2]/2, rgba.Pix[i-3]/2
	}
	nrgba := image.NewNRGBA(rgba.Rect)
	draw.Draw(nrgba, nrgba.Rect, rgba, image.Point{}, draw.Src)
	gray := image.NewGray(rgba.Rect)
	draw.Draw(gray, gray.Rect, rgba, image.Point{}, draw.Src)
	pal := image.NewPaletted(rgba.Rect, palette.WebSafe)
	draw.Draw(pal, pal.Rect, rgba, image.Point{}, draw.Src)
	for _, img := range []image.Image{rgba, nrgba, gray, pal} {
		got, want := greyGrid(img, 8, 8), greyGrid(opaque{img}, 8, 8)
		for i := range got {
			if d := int(got[i]) - int(want[i]); d < -1 || d > 1 {
				t.Errorf("%T: cell %d: got %d, want %d (generic path)", img, i, got[i], want[i])
				break
			}
		}
	}
}

// hugePNG is a PNG header claiming 60,000×60,000 pixels and no data: the
// decoder must never be asked to allocate its canvas.
func hugePNG() []byte {
	b := []byte("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 17)
	copy(ihdr, "IHDR")
	binary.BigEndian.PutUint32(ihdr[4:], 60000)
	binary.BigEndian.PutUint32(ihdr[8:], 60000)
	ihdr[12], ihdr[13] = 8, 2 // 8-bit RGB
	b = binary.BigEndian.AppendUint32(b, 13)
	b = append(b, ihdr...)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(ihdr))
	return b
}

func FuzzImageShape(f *testing.F) {
	f.Add(encode(f, "gif", offerImage(1, 1, 50)))
	f.Add(encode(f, "png", offerImage(2, 1, 50)))
	f.Add(encode(f, "jpeg", offerImage(3, 1, 50)))
	f.Add(hugePNG())
	f.Fuzz(func(t *testing.T, b []byte) {
		h, ok := imageShape(b, pixels(1<<16), 0)
		if ok && (h == 0 || h == ^uint64(0)) {
			t.Errorf("got uniform shape %016x", h)
		}
	})
}

// With signed text, the Set signs the shapes of offer-sized images only of
// a message whose text has at most ShortText words (image spam padded with
// a quotation, not a newsletter's banner or a long text beside a picture),
// or, with SoleImage, whose only non-text part is such an image (image spam
// padded with a novel's sentences, not a newsletter of several parts).
func TestSetAttachShortText(t *testing.T) {
	offer := Attachment{Data: encode(t, "gif", offerImage(1, 1, 100))}
	banner := Attachment{Data: encode(t, "png", offerImage(2, 1, 100).SubImage(image.Rect(0, 0, 400, 60)))} // 60 pixels high
	short := "Trust not too much to appearances, said the old man, and the quiet sea agreed with him at last."
	long := strings.Repeat("The quarterly newsletter of our society, with the meeting agenda and the minutes. ", 10)
	tests := []struct {
		name      string
		text      string
		parts     []Attachment
		shortText int
		soleImage bool
		keys      int
		declined  string
	}{
		{"short text, offer", short, []Attachment{offer}, 100, false, shapeBands, ""},
		{"short text, banner", short, []Attachment{banner}, 100, false, 0, "the text is signed, and no image is an offer's size"},
		{"short text, not an image", short, []Attachment{part("pdf", 5000)}, 100, false, 0, "the text is signed, and no image is an offer's size"},
		{"short text, offer, off", short, []Attachment{offer}, 0, false, 0, "the text is signed"},
		{"long text, offer", long, []Attachment{offer}, 100, false, 0, "the text is signed"},
		{"long text, sole offer, sole image", long, []Attachment{offer}, 100, true, shapeBands, ""},
		{"long text, sole banner, sole image", long, []Attachment{banner}, 100, true, 0, "the text is signed, and no image is an offer's size"},
		{"long text, offer and banner, sole image", long, []Attachment{banner, offer}, 100, true, 0, "the text is signed"},
		{"long text, offer and a spacer, sole image", long, []Attachment{offer, part("gif", 43)}, 100, true, 0, "the text is signed"},
		{"short text, offer and banner, sole image", short, []Attachment{banner, offer}, 100, true, shapeBands, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := fixtureSetWith(t, func(p *SetParams) { p.Attach.ShortText, p.Attach.SoleImage = tc.shortText, tc.soleImage })
			d := textDoc(tc.text)
			d.Attachments = tc.parts
			keys, exps := s.Sign(d, nil, nil)
			var attach []Key
			for _, k := range keys {
				if k.Family == FamilyAttach {
					attach = append(attach, k)
				}
			}
			last := explainOf(exps, FamilyAttach)
			if len(attach) != tc.keys || len(keys) == len(attach) || last.Declined != tc.declined {
				t.Fatalf("got %d attach keys of %d, explain %+v; want %d, declined %q", len(attach), len(keys), last, tc.keys, tc.declined)
			}
			for _, k := range attach {
				if k.Index == 0 {
					t.Errorf("got key %v, want a near key of a shape (index 1 to %d)", k, shapeBands)
				}
			}
		})
	}
}

// BenchmarkAttach measures the attachment family's CPU a message (the
// image path): one 400×300 offer image per message in each format, a
// non-image part of the same size (the exact key: SHA-256 alone), and
// the worst case, 16 distinct 1,000×1,000 JPEGs, of which the pixel
// budget decodes one.
//
//	go test ./signature -run '^$' -bench Attach -benchtime 200x
func BenchmarkAttach(b *testing.B) {
	a, err := NewAttach(testSecret(b), DefaultAttachParams())
	if err != nil {
		b.Fatal(err)
	}
	big := func(seed uint64) []byte {
		img := image.NewRGBA(image.Rect(0, 0, 1000, 1000))
		draw.Draw(img, img.Rect, image.NewUniform(color.White), image.Point{}, draw.Src)
		draw.Draw(img, image.Rect(0, 0, 400, 300), offerImage(seed, seed, 100), image.Point{}, draw.Src)
		return encode(b, "jpeg", img)
	}
	var worst []Attachment
	for i := range 16 {
		worst = append(worst, Attachment{Data: big(uint64(i + 1))})
	}
	gifPart := encode(b, "gif", offerImage(1, 1, 100))
	cases := []struct {
		name  string
		parts []Attachment
		keys  int
	}{
		{"gif", []Attachment{{Data: gifPart}}, shapeBands},
		{"png", []Attachment{{Data: encode(b, "png", offerImage(1, 1, 100))}}, shapeBands},
		{"jpeg", []Attachment{{Data: encode(b, "jpeg", offerImage(1, 1, 100))}}, shapeBands},
		{"exact", []Attachment{part("pdf", len(gifPart))}, 1},
		{"jpeg-1000px-x16", worst, maxAttachKeys}, // one shape within the pixel budget, exact keys for the rest
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			d := &Doc{Attachments: c.parts}
			var dst []Key
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				dst, _ = a.Sign(d, dst[:0])
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/msg")
			if len(dst) != c.keys {
				b.Fatalf("got %d keys, want %d", len(dst), c.keys)
			}
		})
	}
}

// Shapes that differ within one band share that band's near key and no
// other; shapes that differ in two bands share none.
func TestNearKeys(t *testing.T) {
	a, err := NewAttach(testSecret(t), DefaultAttachParams())
	if err != nil {
		t.Fatal(err)
	}
	const h = 0x8181818181ff3fff // a real stream spam image's shape
	tests := []struct {
		name   string
		flip   uint64
		shared int
	}{
		{"same shape", 0, shapeBands},
		{"one cell", 1 << 5, 1},
		{"three cells of one band", 1<<17 | 1<<20 | 1<<31, 1},
		{"a whole band", 0xffff << 48, 1},
		{"one cell in each of two bands", 1<<5 | 1<<40, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ka, kb := a.nearKeys(h), a.nearKeys(h^tc.flip)
			shared := 0
			for i := range ka {
				if ka[i].Index != uint8(1+i) {
					t.Fatalf("key %d: index %d", i, ka[i].Index)
				}
				for j := range kb {
					if ka[i] == kb[j] {
						shared++
					}
				}
			}
			if shared != tc.shared {
				t.Errorf("got %d near keys shared, want %d", shared, tc.shared)
			}
		})
	}
}

// BenchmarkNearKeys measures what the near keys add to an image's shape
// key: four keyed hashes instead of one (the decoding, BenchmarkAttach,
// is the same).
func BenchmarkNearKeys(b *testing.B) {
	a, err := NewAttach(testSecret(b), DefaultAttachParams())
	if err != nil {
		b.Fatal(err)
	}
	h := uint64(0x8181818181ff3fff)
	var ks [shapeBands]Key
	for b.Loop() {
		ks = a.nearKeys(h)
		h++
	}
	if ks[0].Hash == 0 {
		b.Fatal("no key")
	}
}
