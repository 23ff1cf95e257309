package signature

import (
	"errors"
	"fmt"
	"strconv"
)

// LineParams tune the line family.
type LineParams struct {
	Enabled bool
	// MinWords is the fewest canonical words of a line to key it.
	MinWords int
	// Keys is the most keys a message: its lines' smallest hashes.
	Keys int
}

// maxLineKeys bounds LineParams.Keys (the keys are chosen in a fixed
// array).
const maxLineKeys = 64

// DefaultLineParams returns the defaults; docs/evaluation.md ("Minority
// text: line keys") gives the measurements behind them.
func DefaultLineParams() LineParams {
	return LineParams{Enabled: true, MinWords: 8, Keys: 16}
}

// Validate reports every invalid parameter.
func (p LineParams) Validate() error {
	var errs []error
	if p.MinWords < 2 {
		errs = append(errs, fmt.Errorf("lines min words %d must be at least 2", p.MinWords))
	}
	if p.Keys < 1 || p.Keys > maxLineKeys {
		errs = append(errs, fmt.Errorf("lines keys %d must be within [1, %d]", p.Keys, maxLineKeys))
	}
	return errors.Join(errs...)
}

// Lines keys a message's own lines of text: one keyed hash of each line's
// canonical words (Doc.Lines), of the lines with MinWords or more, the
// Keys smallest, so that the choice does not depend on where a line is. A
// short offer padded past half with text of its own (news, good words)
// keeps its lines whole, where every family that reads the whole text
// sees mostly the padding; each of its lines is the same key in every
// copy. Lines that are someone else's text are left out: quoted lines,
// the Subject, and everything after a separator in its part (a
// signature, a list's footer, a forwarded message), which list mail
// repeats. A line is also shared by unrelated mail now and then (a
// template's sentence), so the campaign model weighs the family as a
// support family that names a campaign alone only with several keys
// (store/model.go).
type Lines struct {
	p   LineParams
	th  tokenHasher
	key sipKey
}

// NewLines returns a line signer keyed with s.
func NewLines(s Secret, p LineParams) (*Lines, error) {
	if s.IsZero() {
		return nil, errors.New("lines: zero secret")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Lines{p: p, th: newTokenHasher(s), key: s.derive("lines/line")}, nil
}

// Family returns FamilyLines.
func (l *Lines) Family() Family { return FamilyLines }

// Sign appends the document's line keys to dst.
func (l *Lines) Sign(d *Doc, dst []Key) ([]Key, Explain) {
	p := prepare(d, l.th, nil)
	defer p.release()
	return l.sign(d, p, dst)
}

func (l *Lines) sign(d *Doc, p *prepared, dst []Key) ([]Key, Explain) {
	e := Explain{Family: FamilyLines}
	var least [maxLineKeys]uint64 // ascending, distinct
	n, read, cut, skip := 0, 0, false, false
	for i, ln := range d.Lines {
		if ln.Mark&LinePart != 0 {
			cut, skip = false, ln.Mark&LineSubject != 0
		}
		cut = cut || ln.Mark&LineSep != 0
		start, end := int(ln.Start), len(p.th)
		if i+1 < len(d.Lines) {
			end = min(int(d.Lines[i+1].Start), end)
		}
		if cut || skip || ln.Mark&LineQuoted != 0 || start < 0 || end-start < l.p.MinWords {
			continue
		}
		read++
		h := l.key.words(p.th[start:end]...)
		// Insert h among the least, if it is one of them and new.
		j := n
		for j > 0 && least[j-1] > h {
			j--
		}
		if j > 0 && least[j-1] == h || j == l.p.Keys {
			continue
		}
		n = min(n+1, l.p.Keys)
		copy(least[j+1:n], least[j:n-1])
		least[j] = h
	}
	e.Detail = "lines=" + strconv.Itoa(read)
	switch {
	case len(d.Lines) == 0:
		e.Declined = "no lines (a Doc not from Canonicalize)"
		return dst, e
	case n == 0:
		e.Declined = "no line of " + strconv.Itoa(l.p.MinWords) + " words"
		return dst, e
	}
	for _, h := range least[:n] {
		dst = append(dst, Key{Family: FamilyLines, Hash: nonZero(h)})
	}
	e.Keys = n
	return dst, e
}
