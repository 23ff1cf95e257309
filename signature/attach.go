package signature

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Attachment is one decoded non-text part of a message (an image, a PDF).
// The family digests or decodes its bytes only when it signs them, and
// never stores them or their digest as they are: it keys them.
type Attachment struct {
	Data []byte
}

// AttachParams tune the attachment family.
type AttachParams struct {
	Enabled bool
	// MinBytes is the smallest part signed: smaller ones (spacer GIFs,
	// icons) are left out.
	MinBytes int
	// MaxKeys bounds the keys of one message: its first distinct parts'
	// (an image's shape gives shapeBands keys).
	MaxKeys int
	// WithText signs the parts of a message whose text another family
	// signs too. Off by default: then only a message that no other family
	// signs (image spam, whose words are in the image) gets attachment
	// keys, so that a logo in a newsletter's issues or in a company's
	// signatures never ties their different texts into one campaign
	// (docs/evaluation.md, "The attachment family").
	WithText bool
	// Shape keys an image (GIF, JPEG, PNG) by its shape instead of its
	// bytes: the average hash of its grey levels on an 8×8 grid, which
	// the noise dots, dithering, palettes and resizing that randomise
	// image spam per copy do not change, or change in a few cells of
	// one band (its near keys, shapeBands). A part that is no such image,
	// or is broken or too large to decode, keeps its exact key.
	Shape bool
	// MaxPixels bounds the pixels decoded for Shape, of all of a
	// message's images together: an image beyond it keeps its exact key.
	MaxPixels int
	// ShortText signs, with Shape, the shapes of the offer-sized images
	// (offerSide) of a message whose text is signed but has at most
	// ShortText canonical words: image spam padded with a few random words
	// or a quotation, which join nothing by their text. 0: never.
	ShortText int
	// SoleImage signs, with Shape, the shape of an offer-sized image that
	// is a message's only non-text part whatever the length of its signed
	// text: image spam whose filler (a novel's sentences, random words)
	// is over ShortText carries one picture, randomised per copy, while a
	// newsletter, whose advertisement different titles share, carries
	// several parts (logos, photos, spacers) (docs/evaluation.md, "The
	// alone class").
	SoleImage bool
	// Remote keys a message that no family signs otherwise (not by its
	// text, not by its attachments) by the set of its remote images'
	// paths (Doc.Images): image spam whose offer is images on a web
	// server and whose only text is hidden (docs/evaluation.md, "Remote
	// images"). One key over the whole set, not one a path: a logo or a
	// template image that unrelated mail shares names no campaign unless
	// every other image is shared too.
	Remote bool
}

// DefaultAttachParams returns the defaults; docs/evaluation.md ("The
// attachment family") gives the measurements behind them.
func DefaultAttachParams() AttachParams {
	return AttachParams{Enabled: true, MinBytes: 512, MaxKeys: 16, Shape: true, MaxPixels: 1 << 20, ShortText: 100, SoleImage: true, Remote: true}
}

// maxAttachKeys bounds AttachParams.MaxKeys.
const maxAttachKeys = 16

// Validate reports every invalid parameter.
func (p AttachParams) Validate() error {
	var errs []error
	if p.MinBytes < 0 {
		errs = append(errs, fmt.Errorf("attach min bytes %d must not be negative", p.MinBytes))
	}
	if p.MaxKeys < 1 || p.MaxKeys > maxAttachKeys {
		errs = append(errs, fmt.Errorf("attach max keys %d must be within [1, %d]", p.MaxKeys, maxAttachKeys))
	}
	if p.ShortText < 0 {
		errs = append(errs, fmt.Errorf("attach short text %d must not be negative", p.ShortText))
	}
	if p.Shape && (p.MaxPixels < minImageSide*minImageSide || p.MaxPixels > maxImageSide*maxImageSide) {
		errs = append(errs, fmt.Errorf("attach max pixels %d must be within [%d, %d]", p.MaxPixels, minImageSide*minImageSide, maxImageSide*maxImageSide))
	}
	return errors.Join(errs...)
}

// Attach signs a message's non-text parts: one key per distinct part of
// at least MinBytes. Image spam carries its offer in an image and reuses
// the image across the campaign's copies and sending networks, while its
// text (often none) is nothing the text families can sign. A part's key
// is the keyed hash of its digest (index 0), so a part changed by one bit
// is a new key; with Shape, an image's key is the keyed hash of its shape
// instead (its near keys, indexes 1 to shapeBands), so that the copies of
// an image randomised per copy (nearly every image of the real stream's
// spam, docs/evaluation.md) share it.
type Attach struct {
	p      AttachParams
	k      sipKey
	shape  sipKey
	remote sipKey
}

// NewAttach returns an attachment signer keyed with s.
func NewAttach(s Secret, p AttachParams) (*Attach, error) {
	if s.IsZero() {
		return nil, errors.New("attach: no secret")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Attach{p: p, k: s.derive("attach/part"), shape: s.derive("attach/shape"), remote: s.derive("attach/remote")}, nil
}

// Family returns FamilyAttach.
func (a *Attach) Family() Family { return FamilyAttach }

// Sign appends a key per distinct part of the document of at least
// MinBytes, up to MaxKeys. (Whether a message with signed text gets them
// is the Set's decision: AttachParams.WithText and ShortText.)
func (a *Attach) Sign(d *Doc, dst []Key) ([]Key, Explain) { return a.sign(d, dst, false) }

// sign is Sign; with offers, it signs only the shapes of offer-sized
// images (offerSide), for a message whose short text is signed too.
func (a *Attach) sign(d *Doc, dst []Key, offers bool) ([]Key, Explain) {
	e := Explain{Family: FamilyAttach}
	start, small, shapes := len(dst), 0, 0
	budget := a.p.MaxPixels // for the whole message: 16 parts are no 16 times the work
	minSide := minImageSide
	if offers {
		minSide = offerSide
	}
	for _, at := range d.Attachments {
		if len(at.Data) < a.p.MinBytes {
			small++
			continue
		}
		if len(dst)-start == a.p.MaxKeys {
			break
		}
		ks, n := a.keys(at.Data, &budget, minSide, !offers)
		if n > 1 {
			shapes++
		}
		for _, k := range ks[:n] {
			if len(dst)-start < a.p.MaxKeys && !slices.Contains(dst[start:], k) {
				dst = append(dst, k)
			}
		}
	}
	e.Keys = len(dst) - start
	switch {
	case len(d.Attachments) == 0:
		e.Declined = "no attachment"
	case e.Keys == 0 && offers:
		e.Declined = "the text is signed, and no image is an offer's size"
	case e.Keys == 0:
		e.Declined = "every attachment under " + strconv.Itoa(a.p.MinBytes) + " bytes"
	default:
		e.Detail = fmt.Sprintf("parts=%d small=%d shapes=%d", len(d.Attachments), small, shapes)
	}
	return dst, e
}

// offerSide is the shorter side, in pixels, from which an image is the
// size of image spam's offer (on the real stream, 99 % of spam images
// have 45,600 pixels or more) rather than a logo, a banner or a
// signature's picture (the stream's ham: 172×36, 696×77, 728×30).
const offerSide = 100

// shapeBands is the number of a shape's near keys: the shape is cut into
// shapeBands bands of 16 bits (two rows of the grid each), and near key i
// is the shape with band i left out. Two shapes that differ only within
// one band (a few cells flipped by the noise that randomises a copy, at
// the mean's edge) share a near key; sharing one needs 48 equal bits,
// which no ham image of the corpora shares with another image, while a
// single band is shared by chance by thousands of unrelated pairs (an
// image of text is mostly white) (docs/evaluation.md, "Near shapes").
const shapeBands = 4

// keys returns a part's keys in ks[:n]: its shapeBands near keys (indexes
// 1 to shapeBands) when Shape is on and the part is an image of at least
// minSide pixels a side with a shape, within the message's remaining
// budget of pixels (which it takes the image's pixels from); otherwise
// its exact key (index 0), or with exact false, none.
func (a *Attach) keys(b []byte, budget *int, minSide int, exact bool) (ks [shapeBands]Key, n int) {
	if a.p.Shape {
		if h, ok := imageShape(b, budget, minSide); ok {
			return a.nearKeys(h), shapeBands
		}
	}
	if !exact {
		return ks, 0
	}
	sum := sha256.Sum256(b)
	ks[0] = Key{Family: FamilyAttach, Hash: a.k.words(le64(sum[0:]), le64(sum[8:]), le64(sum[16:]), le64(sum[24:]))}
	return ks, 1
}

// nearKeys returns the near keys of shape h.
func (a *Attach) nearKeys(h uint64) (ks [shapeBands]Key) {
	for i := range shapeBands {
		ks[i] = Key{Family: FamilyAttach, Index: uint8(1 + i), Hash: a.shape.words(uint64(i), h&^(0xffff<<(16*i)))}
	}
	return ks
}

// remoteIndex is the index of the remote-image key, after the near keys.
const remoteIndex = shapeBands + 1

// signRemote appends the key of the set of the document's remote image
// paths: sorted and each once, so that neither their order in the HTML
// nor a repeated image changes it. d has at least one.
func (a *Attach) signRemote(d *Doc, dst []Key) ([]Key, Explain) {
	paths := slices.Clone(d.Images)
	slices.Sort(paths)
	paths = slices.Compact(paths)
	n := 0
	for _, p := range paths {
		n += len(p) + 1
	}
	b := make([]byte, 0, n)
	for _, p := range paths {
		b = append(b, p...)
		b = append(b, 0)
	}
	k := Key{Family: FamilyAttach, Index: remoteIndex, Hash: a.remote.str(string(b))}
	return append(dst, k), Explain{Family: FamilyAttach, Keys: 1, Detail: "remote images=" + strconv.Itoa(len(paths))}
}

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}
