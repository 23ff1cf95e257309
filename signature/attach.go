package signature

import (
	"errors"
	"fmt"
	"strconv"
)

// Attachment is one decoded non-text part of a message (an image, a PDF):
// its decoded size and a digest of its bytes (package mailtext gives
// SHA-256). The digest is never stored as it is: the family keys it.
type Attachment struct {
	Size   int
	Digest [32]byte
}

// AttachParams tune the attachment family.
type AttachParams struct {
	Enabled bool
	// MinBytes is the smallest part signed: smaller ones (spacer GIFs,
	// icons) are left out.
	MinBytes int
	// MaxKeys bounds the keys of one message: its first distinct parts.
	MaxKeys int
	// WithText signs the parts of a message whose text another family
	// signs too. Off by default: then only a message that no other family
	// signs (image spam, whose words are in the image) gets attachment
	// keys, so that a logo in a newsletter's issues or in a company's
	// signatures never ties their different texts into one campaign
	// (docs/evaluation.md, "The attachment family").
	WithText bool
}

// DefaultAttachParams returns the defaults; docs/evaluation.md ("The
// attachment family") gives the measurements behind them.
func DefaultAttachParams() AttachParams {
	return AttachParams{Enabled: true, MinBytes: 512, MaxKeys: 16}
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
	return errors.Join(errs...)
}

// Attach signs a message's non-text parts exactly: one key per distinct
// part of at least MinBytes, the keyed hash of its digest. Image spam
// carries its offer in an image and reuses the image across the
// campaign's copies and sending networks, while its text (often none) is
// nothing the text families can sign; a part changed by one bit is a new
// key, so randomised images escape it.
type Attach struct {
	p AttachParams
	k sipKey
}

// NewAttach returns an attachment signer keyed with s.
func NewAttach(s Secret, p AttachParams) (*Attach, error) {
	if s.IsZero() {
		return nil, errors.New("attach: no secret")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Attach{p: p, k: s.derive("attach/part")}, nil
}

// Family returns FamilyAttach.
func (a *Attach) Family() Family { return FamilyAttach }

// Sign appends a key per distinct part of the document of at least
// MinBytes, up to MaxKeys. (Whether a message with signed text gets them
// is the Set's decision: AttachParams.WithText.)
func (a *Attach) Sign(d *Doc, dst []Key) ([]Key, Explain) {
	e := Explain{Family: FamilyAttach}
	start, small := len(dst), 0
	for _, at := range d.Attachments {
		if at.Size < a.p.MinBytes {
			small++
			continue
		}
		if len(dst)-start == a.p.MaxKeys {
			break
		}
		h := a.k.words(le64(at.Digest[0:]), le64(at.Digest[8:]), le64(at.Digest[16:]), le64(at.Digest[24:]))
		k := Key{Family: FamilyAttach, Hash: h}
		dup := false
		for _, o := range dst[start:] {
			dup = dup || o == k
		}
		if !dup {
			dst = append(dst, k)
		}
	}
	e.Keys = len(dst) - start
	switch {
	case len(d.Attachments) == 0:
		e.Declined = "no attachment"
	case e.Keys == 0:
		e.Declined = "every attachment under " + strconv.Itoa(a.p.MinBytes) + " bytes"
	default:
		e.Detail = fmt.Sprintf("parts=%d small=%d", len(d.Attachments), small)
	}
	return dst, e
}

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}
