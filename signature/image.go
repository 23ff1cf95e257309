package signature

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"math/bits"
)

// Image decoding for the attachment family's shape keys. Only the
// standard library's GIF, JPEG and PNG decoders are used, told apart by
// the part's first bytes (a Content-Type is the sender's word), and each
// image is measured with DecodeConfig before it is decoded, so that a
// small part claiming a huge canvas costs nothing.

// errNotImage reports a part that is none of GIF, JPEG and PNG.
var errNotImage = errors.New("not a GIF, JPEG or PNG image")

// imageCodec returns the decoders of the format b starts with.
func imageCodec(b []byte) (decode func(io.Reader) (image.Image, error), config func(io.Reader) (image.Config, error)) {
	switch {
	case bytes.HasPrefix(b, []byte("GIF8")):
		return gif.Decode, gif.DecodeConfig // the first frame
	case bytes.HasPrefix(b, []byte("\xff\xd8\xff")):
		return jpeg.Decode, jpeg.DecodeConfig
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return png.Decode, png.DecodeConfig
	}
	return nil, nil
}

// Bounds of a decoded image: below the smallest side, an image is a spacer
// or an icon, not an offer, and has too few pixels for a grid; above the
// pixel bound, decoding would cost tens of milliseconds and megabytes.
const (
	minImageSide = 16
	maxImageSide = 1 << 14
	// maxJPEGScans bounds the scans of a progressive JPEG, each of which
	// the decoder runs over the whole image: a scan takes a few bytes, so
	// a small file with thousands of them would cost seconds. Encoders
	// write about ten.
	maxJPEGScans = 64
)

// decodeImage decodes a GIF, JPEG or PNG part of at least minSide pixels
// a side and at most *budget pixels, and takes its pixels from *budget. A
// part that is no such image, or is broken, truncated, too small or too
// large, returns an error (before decoding, when its header tells) and
// never panics.
func decodeImage(b []byte, budget *int, minSide int) (img image.Image, err error) {
	decode, config := imageCodec(b)
	if decode == nil {
		return nil, errNotImage
	}
	if b[0] == 0xff && bytes.Count(b, []byte{0xff, 0xda}) > maxJPEGScans { // SOS markers, or more
		return nil, fmt.Errorf("jpeg: more than %d scans", maxJPEGScans)
	}
	c, err := config(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("image header: %w", err)
	}
	switch {
	case c.Width < max(minSide, minImageSide) || c.Height < max(minSide, minImageSide):
		return nil, fmt.Errorf("image %dx%d: smaller than %d pixels a side", c.Width, c.Height, max(minSide, minImageSide))
	case c.Width > maxImageSide || c.Height > maxImageSide || c.Width*c.Height > *budget:
		return nil, fmt.Errorf("image %dx%d: more than the %d pixels left", c.Width, c.Height, *budget)
	}
	*budget -= c.Width * c.Height
	// The standard decoders return errors for broken input; the recover is
	// for a decoder bug, so that one image cannot end the message's analysis.
	defer func() {
		if r := recover(); r != nil {
			img, err = nil, fmt.Errorf("image decoder failed: %v", r)
		}
	}()
	img, err = decode(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	if r := img.Bounds(); r.Dx() != c.Width || r.Dy() != c.Height {
		return nil, fmt.Errorf("image %dx%d: header said %dx%d", r.Dx(), r.Dy(), c.Width, c.Height)
	}
	return img, nil
}

// Shape hashes with fewer bits set than this, or more than 64 minus it,
// are left out: a blank, a solid or a nearly uniform image (a spacer, a
// banner of one colour) has the same hash as any other.
const minShapeBits = 4

// imageShape returns, within *budget pixels (decodeImage), the average hash
// of a GIF, JPEG or PNG image: bit i is set when cell i of an 8×8 grid over
// the image is lighter than the mean of the cells (Krawetz's aHash). On the
// real stream's spam images this made 408 more messages share a key than
// the exact digest did, and no ham image shared one with an image of other
// bytes (docs/evaluation.md, "Image shapes"). ok is false for a part that
// is no such image, is broken, smaller than minSide pixels a side or too
// large, or has a nearly uniform hash.
func imageShape(b []byte, budget *int, minSide int) (h uint64, ok bool) {
	img, err := decodeImage(b, budget, minSide)
	if err != nil {
		return 0, false
	}
	return imageShapeGrid(greyGrid(img, 8, 8))
}

// imageShapeGrid is imageShape of an 8×8 grid.
func imageShapeGrid(g []uint32) (h uint64, ok bool) {
	var sum uint64
	for _, v := range g {
		sum += uint64(v)
	}
	mean := sum / uint64(len(g))
	for _, v := range g {
		h = h<<1 | b2u(uint64(v) > mean)
	}
	n := bits.OnesCount64(h)
	return h, n >= minShapeBits && n <= 64-minShapeBits
}

// greyGrid returns the mean grey level (0–65535, transparent pixels seen
// over white, as a mail reader shows them) of each cell of a gw×gh grid
// laid over img, row by row. Every pixel counts once: an area average,
// which noise pixels, dithering and a rescaled copy change little.
func greyGrid(img image.Image, gw, gh int) []uint32 {
	r := img.Bounds()
	w, h := r.Dx(), r.Dy()
	sum := make([]uint64, gw*gh)
	n := make([]uint64, gw*gh)
	cellX := make([]int, w) // the grid column of each pixel column
	for x := range cellX {
		cellX[x] = x * gw / w
	}
	var lut [256]uint32 // a paletted image's grey per index
	pal, _ := img.(*image.Paletted)
	if pal != nil {
		for i, c := range pal.Palette {
			lut[i] = overWhite(c.RGBA())
		}
	}
	ycc, _ := img.(*image.YCbCr)
	gray, _ := img.(*image.Gray)
	rgba, _ := img.(*image.RGBA)
	nrgba, _ := img.(*image.NRGBA)
	for y := 0; y < h; y++ {
		row := (y * gh / h) * gw
		py := r.Min.Y + y
		for x := 0; x < w; x++ {
			px := r.Min.X + x
			var g uint32
			switch {
			case pal != nil:
				g = lut[pal.Pix[pal.PixOffset(px, py)]]
			case ycc != nil:
				g = uint32(ycc.Y[ycc.YOffset(px, py)]) * 0x101 // luma alone: the eye's grey
			case gray != nil:
				g = uint32(gray.Pix[gray.PixOffset(px, py)]) * 0x101
			case rgba != nil: // premultiplied
				p := rgba.Pix[rgba.PixOffset(px, py):]
				g = overWhite(uint32(p[0])*0x101, uint32(p[1])*0x101, uint32(p[2])*0x101, uint32(p[3])*0x101)
			case nrgba != nil:
				p := nrgba.Pix[nrgba.PixOffset(px, py):]
				a := uint32(p[3]) * 0x101
				g = overWhite(uint32(p[0])*0x101*a/0xffff, uint32(p[1])*0x101*a/0xffff, uint32(p[2])*0x101*a/0xffff, a)
			default:
				g = overWhite(img.At(px, py).RGBA())
			}
			c := row + cellX[x]
			sum[c] += uint64(g)
			n[c]++
		}
	}
	grid := make([]uint32, gw*gh)
	for i := range grid {
		if n[i] > 0 {
			grid[i] = uint32(sum[i] / n[i])
		}
	}
	return grid
}

// overWhite is the grey of an alpha-premultiplied colour drawn over white
// (Rec. 601 weights).
func overWhite(r, g, b, a uint32) uint32 {
	y := (299*r + 587*g + 114*b) / 1000
	return y + 0xffff - a
}
