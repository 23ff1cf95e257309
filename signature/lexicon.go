package signature

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Term classes in a lexicon.
const (
	classDict      uint8 = 0 // in the frequency dictionary only
	classPrimary   uint8 = 1 // I-Match primary lexicon L
	classSecondary uint8 = 2 // I-Match secondary lexicon B
)

// Lexicon is the corpus statistics every lexicon-based family needs, built
// once from a corpus by LexiconBuilder and loaded at start-up:
//
//   - the I-Match primary lexicon L (terms within a normalised-idf window),
//   - the secondary lexicon B (rarer terms, ranked by increasing idf),
//   - the frequency dictionary for word shingles (every token seen in at
//     least DictMinDF documents),
//   - the context table for context hardening: for each term of L and B,
//     its most frequent preceding and following terms in training.
//
// A Lexicon holds no secret; keyed tables are built from it by the signers.
// It is immutable and safe for concurrent use.
type Lexicon struct {
	params LexiconParams
	docs   int // documents the statistics come from
	dfLow  int // primary window in document frequencies: [dfLow, dfHigh]
	dfHigh int

	terms []string // sorted, unique
	df    []uint32
	class []uint8
	rank  []uint32 // secondary rank (0 = most frequent) for class B; unused otherwise

	// ctx lists the contexts of L and B terms. Context ids: 0 is the
	// document boundary (start for a preceding context, end for a following
	// one); id i+1 is terms[i].
	ctx []termContexts

	nPrimary, nSecondary int
	hash                 [32]byte
	raw                  []byte // the encoding, as loaded or built
}

type termContexts struct {
	term        uint32
	left, right []uint32 // context ids, sorted ascending
}

// LexiconStats summarise a lexicon.
type LexiconStats struct {
	Docs      int // training documents
	Terms     int // terms in the file (dictionary ∪ L ∪ B)
	Primary   int // |L|
	Secondary int // |B|
	DFLow     int // primary window as document frequencies
	DFHigh    int
	Contexts  int // stored (term, context) pairs
	Bytes     int // encoded size
}

// Stats returns counts describing the lexicon.
func (l *Lexicon) Stats() LexiconStats {
	n := 0
	for _, c := range l.ctx {
		n += len(c.left) + len(c.right)
	}
	return LexiconStats{
		Docs: l.docs, Terms: len(l.terms), Primary: l.nPrimary, Secondary: l.nSecondary,
		DFLow: l.dfLow, DFHigh: l.dfHigh, Contexts: n, Bytes: len(l.raw),
	}
}

// Params returns the parameters the lexicon was built with.
func (l *Lexicon) Params() LexiconParams { return l.params }

// Hash returns the hex SHA-256 of the lexicon's encoding: its identity in
// signature versions.
func (l *Lexicon) Hash() string { return hex.EncodeToString(l.hash[:]) }

// MarshalBinary returns the lexicon's encoding (the bytes it was loaded
// from, or built as).
func (l *Lexicon) MarshalBinary() ([]byte, error) {
	return bytes.Clone(l.raw), nil
}

// TermInfo describes one term of a lexicon.
type TermInfo struct {
	DF        int  // document frequency in training
	Primary   bool // in L
	Secondary bool // in B
	Rank      int  // rank in B (0 = most frequent); meaningful when Secondary
}

// Lookup returns what the lexicon knows about a term; ok is false when the
// term is not in the dictionary.
func (l *Lexicon) Lookup(term string) (info TermInfo, ok bool) {
	i, found := l.index(term)
	if !found {
		return TermInfo{}, false
	}
	return TermInfo{
		DF: int(l.df[i]), Primary: l.class[i] == classPrimary,
		Secondary: l.class[i] == classSecondary, Rank: int(l.rank[i]),
	}, true
}

// Contexts returns the preceding and following context words stored for a
// term ("" stands for the document boundary). For tests and explanations.
func (l *Lexicon) Contexts(term string) (before, after []string) {
	i, found := l.index(term)
	if !found {
		return nil, nil
	}
	j := sort.Search(len(l.ctx), func(j int) bool { return l.ctx[j].term >= uint32(i) })
	if j == len(l.ctx) || l.ctx[j].term != uint32(i) {
		return nil, nil
	}
	name := func(id uint32) string {
		if id == 0 {
			return ""
		}
		return l.terms[id-1]
	}
	for _, id := range l.ctx[j].left {
		before = append(before, name(id))
	}
	for _, id := range l.ctx[j].right {
		after = append(after, name(id))
	}
	return before, after
}

// Terms returns the lexicon's terms of one kind, sorted: "primary",
// "secondary" (in rank order) or "dictionary" (every term).
func (l *Lexicon) Terms(kind string) []string {
	var out []string
	switch kind {
	case "primary":
		for i, c := range l.class {
			if c == classPrimary {
				out = append(out, l.terms[i])
			}
		}
	case "secondary":
		out = make([]string, l.nSecondary)
		for i, c := range l.class {
			if c == classSecondary {
				out[l.rank[i]] = l.terms[i]
			}
		}
	case "dictionary":
		out = append(out, l.terms...)
	}
	return out
}

func (l *Lexicon) index(term string) (int, bool) {
	i := sort.SearchStrings(l.terms, term)
	return i, i < len(l.terms) && l.terms[i] == term
}

// Binary format (all integers unsigned varints unless noted):
//
//	"BMLX" format-version
//	section*: tag byte, payload length, payload
//	  'P' parameters: docs, dfLow, dfHigh, NidfMin·1e6, NidfMax·1e6, MinDF,
//	      MaxSecondary, DictMinDF, ContextMinCount, ContextsPerTerm
//	  'T' terms: count, then per term (sorted): shared-prefix length,
//	      suffix length, suffix bytes, df, class byte
//	  'C' contexts: count, then per term with contexts: term index delta
//	      (from the previous entry + 1), number of preceding contexts, their
//	      ids delta-coded, number of following contexts, their ids
//	      delta-coded
//	'H' then 32 bytes: SHA-256 of everything before 'H'
//
// Sections appear exactly once, in this order. Sorted terms, delta coding
// and fixed field order make the encoding deterministic: the same
// statistics always give the same bytes.
const (
	lexMagic         = "BMLX"
	lexFormatVersion = 1
	maxTermBytes     = 255 // longest term the format accepts
)

// ErrCorruptLexicon wraps every error LoadLexicon returns for bad input.
var ErrCorruptLexicon = errors.New("corrupt lexicon")

// LoadLexicon decodes and validates a lexicon encoding. Every
// inconsistency (bad magic, unknown version, truncation, unsorted terms,
// out-of-range ids, checksum mismatch) is an error wrapping
// ErrCorruptLexicon.
func LoadLexicon(b []byte) (*Lexicon, error) {
	return decodeLexicon(b, true)
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptLexicon, fmt.Sprintf(format, args...))
}

type lexReader struct {
	b   []byte
	off int
	err error
}

func (r *lexReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	// Only the shortest encoding is accepted, so that every lexicon has
	// exactly one encoding.
	if n <= 0 || (n > 1 && r.b[r.off+n-1] == 0) {
		r.err = corrupt("bad varint for %s at offset %d", what, r.off)
		return 0
	}
	r.off += n
	return v
}

// bounded reads a varint that must not exceed max.
func (r *lexReader) bounded(what string, max uint64) int {
	v := r.uvarint(what)
	if r.err == nil && v > max {
		r.err = corrupt("%s = %d out of range (max %d)", what, v, max)
		return 0
	}
	return int(v)
}

func (r *lexReader) bytes(what string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.err = corrupt("%s: %d bytes past end at offset %d", what, n, r.off)
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *lexReader) byte(what string) byte {
	p := r.bytes(what, 1)
	if p == nil {
		return 0
	}
	return p[0]
}

// section reads a section header and returns a reader over its payload.
func (r *lexReader) section(tag byte) *lexReader {
	if r.err != nil {
		return &lexReader{err: r.err}
	}
	got := r.byte("section tag")
	if r.err == nil && got != tag {
		r.err = corrupt("section %q where %q expected at offset %d", got, tag, r.off-1)
	}
	n := r.bounded("section length", uint64(len(r.b)))
	p := r.bytes(fmt.Sprintf("section %q", tag), n)
	if r.err != nil {
		return &lexReader{err: r.err}
	}
	return &lexReader{b: p}
}

func (r *lexReader) done(what string) error {
	if r.err != nil {
		return r.err
	}
	if r.off != len(r.b) {
		return corrupt("%d trailing bytes in %s", len(r.b)-r.off, what)
	}
	return nil
}

func decodeLexicon(b []byte, verifyHash bool) (*Lexicon, error) {
	if len(b) < len(lexMagic)+1+1+32 || string(b[:len(lexMagic)]) != lexMagic {
		return nil, corrupt("not a lexicon file (bad magic)")
	}
	hashAt := len(b) - 33
	if b[hashAt] != 'H' {
		return nil, corrupt("missing checksum section")
	}
	l := &Lexicon{}
	copy(l.hash[:], b[hashAt+1:])
	if verifyHash && sha256.Sum256(b[:hashAt]) != l.hash {
		return nil, corrupt("checksum mismatch")
	}
	r := &lexReader{b: b[:hashAt], off: len(lexMagic)}
	if v := r.uvarint("format version"); r.err == nil && v != lexFormatVersion {
		return nil, fmt.Errorf("%w: format version %d, this build reads version %d", ErrCorruptLexicon, v, lexFormatVersion)
	}

	// Parameters.
	p := r.section('P')
	const maxDocs = 1 << 40
	l.docs = p.bounded("docs", maxDocs)
	l.dfLow = p.bounded("dfLow", maxDocs)
	l.dfHigh = p.bounded("dfHigh", maxDocs)
	l.params.NidfMin = float64(p.bounded("NidfMin", 1e6)) / 1e6
	l.params.NidfMax = float64(p.bounded("NidfMax", 1e6)) / 1e6
	l.params.MinDF = p.bounded("MinDF", maxDocs)
	l.params.MaxSecondary = p.bounded("MaxSecondary", math.MaxUint32)
	l.params.DictMinDF = p.bounded("DictMinDF", maxDocs)
	l.params.ContextMinCount = p.bounded("ContextMinCount", math.MaxUint32)
	l.params.ContextsPerTerm = p.bounded("ContextsPerTerm", math.MaxUint16)
	if err := p.done("parameters"); err != nil {
		return nil, err
	}
	if l.docs == 0 {
		return nil, corrupt("lexicon built from 0 documents")
	}
	if l.dfLow > l.dfHigh+1 {
		return nil, corrupt("primary window [%d, %d] inverted", l.dfLow, l.dfHigh)
	}

	// Terms. Each term takes at least 4 bytes, which bounds the count
	// before anything is allocated.
	t := r.section('T')
	n := t.bounded("term count", uint64(len(t.b)/4))
	if t.err != nil {
		return nil, t.err
	}
	l.terms = make([]string, n)
	l.df = make([]uint32, n)
	l.class = make([]uint8, n)
	l.rank = make([]uint32, n)
	// All terms share one backing string: one allocation, not n.
	var sb strings.Builder
	offs := make([]int, n+1)
	var prev, cur []byte
	for i := range n {
		shared := t.bounded("shared prefix", uint64(len(prev)))
		suffix := t.bytes("term", t.bounded("suffix length", maxTermBytes))
		if t.err != nil {
			return nil, t.err
		}
		if shared+len(suffix) > maxTermBytes || shared+len(suffix) == 0 {
			return nil, corrupt("term %d has length %d", i, shared+len(suffix))
		}
		if shared < len(prev) && len(suffix) > 0 && suffix[0] == prev[shared] {
			return nil, corrupt("term %d: shared prefix not maximal", i)
		}
		cur = append(append(cur[:0], prev[:shared]...), suffix...)
		if i > 0 && bytes.Compare(prev, cur) >= 0 {
			return nil, corrupt("terms not strictly sorted at %d", i)
		}
		if !utf8.Valid(cur) {
			return nil, corrupt("term %d is not valid UTF-8", i)
		}
		df := t.bounded("df", uint64(l.docs))
		class := t.byte("class")
		if t.err != nil {
			return nil, t.err
		}
		if df == 0 {
			return nil, corrupt("term %d has df 0", i)
		}
		switch class {
		case classDict:
		case classPrimary:
			l.nPrimary++
		case classSecondary:
			l.nSecondary++
		default:
			return nil, corrupt("term %d has unknown class %d", i, class)
		}
		if class != classDict && !IMatchTerm(string(cur)) {
			return nil, corrupt("lexicon term %d is not an I-Match term", i)
		}
		l.df[i] = uint32(df)
		l.class[i] = class
		sb.Write(cur)
		offs[i+1] = sb.Len()
		prev, cur = cur, prev
	}
	if err := t.done("terms"); err != nil {
		return nil, err
	}
	all := sb.String()
	for i := range n {
		l.terms[i] = all[offs[i]:offs[i+1]]
	}
	l.assignRanks()

	// Contexts. Each entry takes at least 3 bytes.
	c := r.section('C')
	nc := c.bounded("context entries", uint64(len(c.b)/3))
	if c.err != nil {
		return nil, c.err
	}
	l.ctx = make([]termContexts, 0, nc)
	next := 0
	maxID := uint64(n) // ids 0..n
	var ids []uint32
	for range nc {
		ti := next + c.bounded("context term delta", uint64(n))
		if c.err != nil {
			return nil, c.err
		}
		if ti >= n {
			return nil, corrupt("context term index %d out of range", ti)
		}
		if l.class[ti] == classDict {
			return nil, corrupt("contexts stored for non-lexicon term %q", l.terms[ti])
		}
		next = ti + 1
		start := len(ids)
		var err error
		ids, err = readIDs(c, ids, maxID)
		if err != nil {
			return nil, err
		}
		mid := len(ids)
		ids, err = readIDs(c, ids, maxID)
		if err != nil {
			return nil, err
		}
		if len(ids) == start {
			return nil, corrupt("empty context entry for %q", l.terms[ti])
		}
		l.ctx = append(l.ctx, termContexts{term: uint32(ti), left: ids[start:mid:mid], right: ids[mid:len(ids):len(ids)]})
	}
	if err := c.done("contexts"); err != nil {
		return nil, err
	}
	if err := r.done("lexicon"); err != nil {
		return nil, err
	}
	l.raw = b
	return l, nil
}

// readIDs reads a count and that many delta-coded, strictly increasing ids.
func readIDs(r *lexReader, ids []uint32, maxID uint64) ([]uint32, error) {
	k := r.bounded("context count", uint64(len(r.b)-r.off))
	prev := -1
	for range k {
		d := r.bounded("context id delta", maxID)
		if r.err != nil {
			return ids, r.err
		}
		id := prev + 1 + d
		if uint64(id) > maxID {
			return ids, corrupt("context id %d out of range", id)
		}
		ids = append(ids, uint32(id))
		prev = id
	}
	return ids, r.err
}

// assignRanks ranks the secondary lexicon by increasing idf (decreasing
// df), ties broken by the term's byte order.
func (l *Lexicon) assignRanks() {
	var sec []int
	for i, c := range l.class {
		if c == classSecondary {
			sec = append(sec, i)
		}
	}
	slices.SortFunc(sec, func(a, b int) int {
		if l.df[a] != l.df[b] {
			return int(l.df[b]) - int(l.df[a])
		}
		return a - b // term order
	})
	for r, i := range sec {
		l.rank[i] = uint32(r)
	}
}

// encode builds the binary form of l and sets l.raw and l.hash.
func (l *Lexicon) encode() {
	var out []byte
	out = append(out, lexMagic...)
	out = binary.AppendUvarint(out, lexFormatVersion)

	var p []byte
	for _, v := range []uint64{
		uint64(l.docs), uint64(l.dfLow), uint64(l.dfHigh),
		uint64(math.Round(l.params.NidfMin * 1e6)), uint64(math.Round(l.params.NidfMax * 1e6)),
		uint64(l.params.MinDF), uint64(l.params.MaxSecondary), uint64(l.params.DictMinDF),
		uint64(l.params.ContextMinCount), uint64(l.params.ContextsPerTerm),
	} {
		p = binary.AppendUvarint(p, v)
	}
	out = appendSection(out, 'P', p)

	var t []byte
	t = binary.AppendUvarint(t, uint64(len(l.terms)))
	prev := ""
	for i, term := range l.terms {
		shared := 0
		for shared < len(prev) && shared < len(term) && prev[shared] == term[shared] {
			shared++
		}
		t = binary.AppendUvarint(t, uint64(shared))
		t = binary.AppendUvarint(t, uint64(len(term)-shared))
		t = append(t, term[shared:]...)
		t = binary.AppendUvarint(t, uint64(l.df[i]))
		t = append(t, l.class[i])
		prev = term
	}
	out = appendSection(out, 'T', t)

	var c []byte
	c = binary.AppendUvarint(c, uint64(len(l.ctx)))
	next := uint32(0)
	for _, e := range l.ctx {
		c = binary.AppendUvarint(c, uint64(e.term-next))
		next = e.term + 1
		for _, ids := range [][]uint32{e.left, e.right} {
			c = binary.AppendUvarint(c, uint64(len(ids)))
			prevID := int64(-1)
			for _, id := range ids {
				c = binary.AppendUvarint(c, uint64(int64(id)-prevID-1))
				prevID = int64(id)
			}
		}
	}
	out = appendSection(out, 'C', c)

	l.hash = sha256.Sum256(out)
	out = append(out, 'H')
	out = append(out, l.hash[:]...)
	l.raw = out
}

func appendSection(out []byte, tag byte, payload []byte) []byte {
	out = append(out, tag)
	out = binary.AppendUvarint(out, uint64(len(payload)))
	return append(out, payload...)
}
