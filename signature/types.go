package signature

import (
	"fmt"
	"strconv"
)

// Source is the text of one message as a reader sees it, before
// canonicalisation. The daemon and every offline command fill it from
// package mailtext.
type Source struct {
	Subject string   // decoded Subject
	Parts   []string // visible text of each text part, in reading order
	Domains []string // registrable domains of link targets
	// Attachments are the message's decoded non-text parts, for the
	// attachment family.
	Attachments []Attachment
	// Images are the paths of the message's remote images (mailtext's
	// Text.Images), for the attachment family's remote key.
	Images []string
	// Strip lists words to remove before signing, typically the
	// recipient's own name and address parts: personalisation is the most
	// common per-copy variation of a mass mailing.
	Strip []string
}

// Doc is the canonical form of a message that every Signer consumes.
type Doc struct {
	// Tokens are the canonical words in reading order: the Subject first,
	// then each text part. Part boundaries are not marked.
	Tokens []string
	// Lines are the lines of each text (the Subject, then each part) in
	// Tokens, for the line family: a line's tokens run from its Start to
	// the next line's. Lines without tokens are left out, but a text's
	// first, which carries LinePart.
	Lines []Line
	// Letters is the text with everything but letters and digits removed,
	// canonicalised like Tokens, for character shingles: inserting or
	// removing spaces does not change it.
	Letters string
	// SubjectLetters is the length in bytes of the start of Letters that
	// the Subject gave.
	SubjectLetters int
	// Domains are the canonical registrable domains of link targets, each
	// once, in order of first appearance.
	Domains []string
	// Attachments are Source.Attachments, as they are.
	Attachments []Attachment
	// Images are Source.Images, as they are.
	Images []string
	// Stats describe what canonicalisation saw and changed.
	Stats DocStats
}

// Line is a line of a Doc's text: where its tokens begin in Doc.Tokens,
// and what its raw text showed.
type Line struct {
	Start int32
	Mark  LineMark
}

// LineMark says what a line is, from its raw text.
type LineMark uint8

// The line marks.
const (
	LinePart    LineMark = 1 << iota // the first line of a text (Subject or part)
	LineSubject                      // the Subject's line
	LineQuoted                       // begins with '>' or '|': quoted text
	LineSep                          // a separator: "--", "____…", "-----…" (signature, footer, quoted message)
)

// DocStats count what canonicalisation did; they are features in their own
// right (an unusual share of folded or invisible characters is a sign of a
// randomised mass mailing).
type DocStats struct {
	Words        int // tokens produced
	Folded       int // tokens changed by homoglyph or leetspeak folding
	Joined       int // runs of spaced-apart letters rejoined into one token
	Removed      int // format and zero-width characters removed
	Stripped     int // tokens removed because they were in Source.Strip
	NonLetterRun int // tokens dropped as having no letters at all
}

// Family identifies a signature family. Its numeric value is part of stored
// keys: never renumber.
type Family uint8

// The signature families.
const (
	FamilyIMatch      Family = 1 // I-Match, one key per lexicon (primary and randomized)
	FamilyShingle     Family = 2 // supershingles over dictionary-word shingles
	FamilyCharShingle Family = 3 // supershingles over letter shingles
	FamilySift        Family = 4 // keyed text sifting
	FamilyTermSet     Family = 5 // min-hash bands over the set of lexicon terms
	FamilyContain     Family = 6 // single min-hashes of word shingles (containment)
	FamilyAttach      Family = 7 // non-text parts and remote images
	FamilyLines       Family = 8 // each line of the text's own (not quoted) lines
)

// familyNames is indexed by Family: String runs for every key of every
// message (volumes, metrics, headers), and an array index is cheaper than
// a map lookup.
var familyNames = [...]string{
	FamilyIMatch:      "imatch",
	FamilyShingle:     "shingle",
	FamilyCharShingle: "charshingle",
	FamilySift:        "sift",
	FamilyTermSet:     "terms",
	FamilyContain:     "contain",
	FamilyAttach:      "attach",
	FamilyLines:       "lines",
}

// String returns the family's name as used in config, headers and metrics.
func (f Family) String() string {
	if int(f) < len(familyNames) && familyNames[f] != "" {
		return familyNames[f]
	}
	return "family" + strconv.Itoa(int(f))
}

// ParseFamily returns the family with the given name.
func ParseFamily(name string) (Family, error) {
	for f, n := range familyNames {
		if n != "" && n == name {
			return Family(f), nil
		}
	}
	return 0, fmt.Errorf("unknown signature family %q", name)
}

// Families returns all families in numeric order.
func Families() []Family {
	return []Family{FamilyIMatch, FamilyShingle, FamilyCharShingle, FamilySift, FamilyTermSet, FamilyContain, FamilyAttach, FamilyLines}
}

// Key is one near-duplicate signature: two messages are near duplicates for
// a family when they share a key.
type Key struct {
	Family Family
	Index  uint8  // coordinate within the family: lexicon number, band number
	Hash   uint64 // keyed hash; unpredictable without the secret
}

// String returns the key in the form used in stores and logs,
// "imatch.3:00ab…" with 16 hex digits.
func (k Key) String() string { return string(k.AppendTo(make([]byte, 0, 32))) }

// AppendTo appends the key as String prints it.
func (k Key) AppendTo(b []byte) []byte {
	b = append(b, k.Family.String()...)
	b = append(b, '.')
	b = strconv.AppendUint(b, uint64(k.Index), 10)
	b = append(b, ':')
	const hex = "0123456789abcdef"
	for i := 60; i >= 0; i -= 4 {
		b = append(b, hex[(k.Hash>>uint(i))&0xf])
	}
	return b
}

// Explain says what a Signer did with a Doc: how many keys it made or why
// it declined.
type Explain struct {
	Family   Family
	Keys     int    // keys produced
	Declined string // why no key was produced; empty when Keys > 0
	Detail   string // short human-readable detail, e.g. "terms=12 ratio=0.41"
}

// Signer maps a canonical document to keys of one family.
type Signer interface {
	Family() Family
	// Sign appends the document's keys to dst and returns it with an
	// explanation. A signer that cannot sign (too little text) returns dst
	// unchanged and says why in Explain.Declined.
	Sign(d *Doc, dst []Key) ([]Key, Explain)
}

// MarshalText encodes the family by name, so JSON and logs read "imatch"
// rather than 1.
func (f Family) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText decodes a family name.
func (f *Family) UnmarshalText(b []byte) error {
	v, err := ParseFamily(string(b))
	if err != nil {
		return err
	}
	*f = v
	return nil
}
