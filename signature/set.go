package signature

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/bulkmilter/bulkmilter/internal/gopool"
)

// AlgorithmVersion is the version of the signing code. Bump it whenever a
// change can change a key for the same Doc, secret, lexicon and
// parameters; the golden tests (testdata/golden) fail until it is bumped
// and the files are updated with -update. Version 2 signs as version 1
// did; it marks the campaign counting of issue 15, so that no id counted
// or voted on per key is read as a campaign's (docs/operations.md, upgrade
// notes). Version 3 adds the term-set family (issue 15), which the
// campaign model weighs as a support family; version 4 the containment
// family (issue 15, padded copies), another support family; version 5 the
// attachment family (issue 15, image spam); version 6 its image shape
// keys (issue 15, images randomised per copy); version 7 keys each shape
// by its near keys (shapeBands), which shapes differing in one band share,
// and lets the containment family read common words only
// (ContainParams.MinDF, off by default; issue 15, word salad); version 8
// keys a message no family signs by its remote images (AttachParams.Remote;
// issue 15, the stream's remote-image spam); version 9 signs character
// shingles over the body without the Subject when the body has MinUnits
// letters (issue 15, short mailings under rotating subjects) and adds the
// line family (issue 15, a short offer padded past half with text of its
// own).
const AlgorithmVersion = 9

// SetParams configure a Set: the secret, the lexicon, and each family.
type SetParams struct {
	Secret      Secret
	Lexicon     *Lexicon // required by I-Match and word shingles
	IMatch      IMatchParams
	Shingle     ShingleParams
	CharShingle CharShingleParams
	Sift        SiftParams
	TermSet     TermSetParams
	Contain     ContainParams
	Attach      AttachParams
	Lines       LineParams
}

// DefaultSetParams returns every family enabled with its defaults; the
// caller sets Secret and Lexicon.
func DefaultSetParams() SetParams {
	return SetParams{
		IMatch:      DefaultIMatchParams(),
		Shingle:     DefaultShingleParams(),
		CharShingle: DefaultCharShingleParams(),
		Sift:        DefaultSiftParams(),
		TermSet:     DefaultTermSetParams(),
		Contain:     DefaultContainParams(),
		Attach:      DefaultAttachParams(),
		Lines:       DefaultLineParams(),
	}
}

// Set holds the enabled signers and signs a Doc with all of them, hashing
// its tokens once for all families. It is immutable and safe for
// concurrent use.
type Set struct {
	th      tokenHasher
	kl      *keyedLexicon
	imatch  *IMatch
	shingle *Shingle
	chars   *CharShingle
	sift    *Sift
	terms   *TermSet
	contain *Shingle
	attach  *Attach
	lines   *Lines
	signers []Signer
	version string
	descr   string
	// keysHint is the most keys one Sign has made (at most maxKeysHint):
	// the capacity the next one starts with, so that a message's keys are
	// one allocation, not a slice doubled from 32 to 64 (the default set
	// makes ~44 keys a message since the containment family).
	keysHint atomic.Int32
}

// maxKeysHint bounds Set.keysHint.
const maxKeysHint = 256

// NewSet builds the enabled signers. It reports every invalid parameter.
func NewSet(p SetParams) (*Set, error) {
	if p.Secret.IsZero() {
		return nil, errors.New("signature set: no secret")
	}
	var errs []error
	needLex := p.IMatch.Enabled || p.Shingle.Enabled || p.TermSet.Enabled || p.Contain.Enabled
	if needLex && p.Lexicon == nil {
		errs = append(errs, errors.New("signature set: imatch, shingle, terms and contain need a lexicon"))
	}
	sidePool.Start()
	s := &Set{th: newTokenHasher(p.Secret)}
	var err error
	var termHash []uint64
	if needLex && p.Lexicon != nil {
		var keep keepRule
		if p.IMatch.Enabled && p.IMatch.Validate() == nil {
			keep = newKeepRule(p.Secret, p.IMatch)
		}
		if s.kl, termHash, err = newKeyedLexicon(p.Lexicon, s.th, keep); err != nil {
			return nil, fmt.Errorf("signature set: %w", err)
		}
	}
	if p.IMatch.Enabled && s.kl != nil {
		if s.imatch, err = newIMatch(p.Secret, s.th, s.kl, termHash, p.IMatch); err != nil {
			errs = append(errs, err)
		} else {
			s.signers = append(s.signers, s.imatch)
		}
	}
	if p.Shingle.Enabled && s.kl != nil {
		if s.shingle, err = newShingle(p.Secret, s.th, s.kl, p.Shingle); err != nil {
			errs = append(errs, err)
		} else {
			s.signers = append(s.signers, s.shingle)
		}
	}
	if p.CharShingle.Enabled {
		if s.chars, err = NewCharShingle(p.Secret, p.CharShingle); err != nil {
			errs = append(errs, err)
		} else {
			s.signers = append(s.signers, s.chars)
		}
	}
	if p.Sift.Enabled {
		if s.sift, err = newSift(p.Secret, s.th, p.Sift); err != nil {
			errs = append(errs, err)
		} else {
			s.signers = append(s.signers, s.sift)
		}
	}
	if p.TermSet.Enabled && s.kl != nil {
		if s.terms, err = newTermSet(p.Secret, s.th, s.kl, p.TermSet); err != nil {
			errs = append(errs, err)
		} else {
			s.signers = append(s.signers, s.terms)
		}
	}
	if p.Contain.Enabled && s.kl != nil {
		if s.contain, err = newContain(p.Secret, s.th, s.kl, p.Contain); err != nil {
			errs = append(errs, err)
		} else {
			s.signers = append(s.signers, s.contain)
		}
	}
	if p.Attach.Enabled {
		if s.attach, err = NewAttach(p.Secret, p.Attach); err != nil {
			errs = append(errs, err)
		} else {
			s.signers = append(s.signers, s.attach)
		}
	}
	if p.Lines.Enabled {
		if s.lines, err = NewLines(p.Secret, p.Lines); err != nil {
			errs = append(errs, err)
		} else {
			s.signers = append(s.signers, s.lines)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(s.signers) == 0 {
		return nil, errors.New("signature set: no family enabled")
	}
	s.descr = describe(p)
	sum := sha256.Sum256([]byte(s.descr))
	s.version = "s" + hex.EncodeToString(sum[:5])
	return s, nil
}

// describe lists everything a key depends on, except the secret itself.
func describe(p SetParams) string {
	var b strings.Builder
	fmt.Fprintf(&b, "algorithm=%d canon=%d key=%s", AlgorithmVersion, CanonVersion, p.Secret.ID())
	if (p.IMatch.Enabled || p.Shingle.Enabled || p.TermSet.Enabled || p.Contain.Enabled) && p.Lexicon != nil {
		fmt.Fprintf(&b, " lexicon=%s", p.Lexicon.Hash()[:16])
	}
	if p.IMatch.Enabled {
		fmt.Fprintf(&b, " imatch=%+v", p.IMatch)
	}
	if p.Shingle.Enabled {
		fmt.Fprintf(&b, " shingle=%+v", p.Shingle)
	}
	if p.CharShingle.Enabled {
		fmt.Fprintf(&b, " charshingle=%+v", p.CharShingle)
	}
	if p.Sift.Enabled {
		fmt.Fprintf(&b, " sift=%+v", p.Sift)
	}
	if p.TermSet.Enabled {
		fmt.Fprintf(&b, " terms=%+v", p.TermSet)
	}
	if p.Contain.Enabled {
		fmt.Fprintf(&b, " contain=%+v", p.Contain)
	}
	if p.Attach.Enabled {
		fmt.Fprintf(&b, " attach=%+v", p.Attach)
	}
	if p.Lines.Enabled {
		fmt.Fprintf(&b, " lines=%+v", p.Lines)
	}
	return b.String()
}

// Version identifies everything the keys depend on: the algorithm and
// canonicalisation versions, the key id of the secret, the lexicon's
// content hash and every enabled family's parameters. It is short ("s" and
// 10 hex digits) because it prefixes every stored key; Describe gives the
// readable form.
func (s *Set) Version() string { return s.version }

// Describe returns the readable list of what Version covers (no secret).
func (s *Set) Describe() string { return s.descr }

// StoreID returns the id under which a store counts k:
// "<version>:<key>".
func (s *Set) StoreID(k Key) string { return s.version + ":" + k.String() }

// StoreIDs returns the store ids of keys, built in one allocation (the
// daemon needs all of a message's ids at once).
func (s *Set) StoreIDs(keys []Key) []string {
	if len(keys) == 0 {
		return nil
	}
	b := make([]byte, 0, len(keys)*(len(s.version)+1+32))
	ends := make([]int, len(keys))
	for i, k := range keys {
		b = append(b, s.version...)
		b = append(b, ':')
		b = k.AppendTo(b)
		ends[i] = len(b)
	}
	// b is not written again: the ids share it without a copy.
	all := unsafe.String(unsafe.SliceData(b), len(b))
	ids := make([]string, len(keys))
	start := 0
	for i, end := range ends {
		ids[i] = all[start:end]
		start = end
	}
	return ids
}

// Signers returns the enabled signers in family order.
func (s *Set) Signers() []Signer { return s.signers }

// Sign appends the keys of every enabled family to keys and one Explain
// per family to exps.
func (s *Set) Sign(d *Doc, keys []Key, exps []Explain) ([]Key, []Explain) {
	if keys != nil {
		return s.sign(d, keys, exps)
	}
	// Grown from nil, the slice was reallocated six or seven times.
	keys, exps = s.sign(d, make([]Key, 0, max(32, int(s.keysHint.Load()))), exps)
	if n := int32(min(len(keys), maxKeysHint)); n > s.keysHint.Load() {
		s.keysHint.Store(n)
	}
	return keys, exps
}

func (s *Set) sign(d *Doc, keys []Key, exps []Explain) ([]Key, []Explain) {
	if d == nil {
		d = &Doc{}
	}
	p := prepare(d, s.th, s.kl)
	defer p.release()
	if exps == nil {
		exps = make([]Explain, 0, len(s.signers))
	}
	start := len(keys)
	if s.sift != nil && len(p.th) >= parallelTokens {
		keys, exps = s.signBeside(d, p, keys, exps)
	} else {
		keys, exps = s.signFirst(d, p, keys, exps)
		if s.sift != nil {
			var e Explain
			keys, e = s.sift.sign(p, keys)
			exps = append(exps, e)
		}
		keys, exps = s.signLast(p, keys, exps)
	}
	if s.attach != nil {
		var e Explain
		switch ap := s.attach.p; {
		case ap.WithText || len(keys) == start:
			keys, e = s.attach.Sign(d, keys)
		case len(d.Attachments) == 0:
			e = Explain{Family: FamilyAttach, Declined: "no attachment"}
		case ap.Shape && (d.Stats.Words <= ap.ShortText || ap.SoleImage && len(d.Attachments) == 1):
			keys, e = s.attach.sign(d, keys, true)
		default:
			e = Explain{Family: FamilyAttach, Declined: "the text is signed"}
		}
		if s.attach.p.Remote && len(keys) == start && len(d.Images) > 0 {
			keys, e = s.attach.signRemote(d, keys)
		}
		exps = append(exps, e)
	}
	if s.lines != nil {
		var e Explain
		keys, e = s.lines.sign(d, p, keys)
		exps = append(exps, e)
	}
	return keys, exps
}

// signLast signs with the families after sifting.
func (s *Set) signLast(p *prepared, keys []Key, exps []Explain) ([]Key, []Explain) {
	if s.terms != nil {
		var e Explain
		keys, e = s.terms.sign(p, keys)
		exps = append(exps, e)
	}
	if s.contain != nil {
		var e Explain
		keys, e = s.contain.sign(p, keys)
		exps = append(exps, e)
	}
	return keys, exps
}

// signFirst signs with the families before sifting.
func (s *Set) signFirst(d *Doc, p *prepared, keys []Key, exps []Explain) ([]Key, []Explain) {
	var e Explain
	if s.imatch != nil {
		keys, e, _ = s.imatch.sign(p, keys, false)
		exps = append(exps, e)
	}
	if s.shingle != nil {
		keys, e = s.shingle.sign(p, keys)
		exps = append(exps, e)
	}
	if s.chars != nil {
		keys, e = s.chars.Sign(d, keys)
		exps = append(exps, e)
	}
	return keys, exps
}

// signBeside is Sign for a long document, the tail of a milter's latency:
// sifting, the largest part of signing it, runs on a goroutine of its own
// beside the other families, so the message waits less when a core is
// free. Its keys still come last. (A function of its own: the goroutine's
// variables would cost every message four allocations.)
func (s *Set) signBeside(d *Doc, p *prepared, keys []Key, exps []Explain) ([]Key, []Explain) {
	var (
		wg      sync.WaitGroup
		sk      []Key
		se      Explain
		crashed any
	)
	sidePool.Go(&wg, func() {
		defer func() { crashed = recover() }() // re-raised below, where the caller's recover sees it
		sk, se = s.sift.sign(p, make([]Key, 0, s.sift.p.Sample.MaxBands))
	})
	defer wg.Wait() // before the caller releases p, even when a family panics
	keys, exps = s.signFirst(d, p, keys, exps)
	wg.Wait()
	if crashed != nil {
		panic(crashed)
	}
	return s.signLast(p, append(keys, sk...), append(exps, se))
}

// sidePool runs signBeside's sifting on long-lived goroutines, whose
// stacks have grown to its depth already, rather than a new goroutine a
// long message.
var sidePool = gopool.New(runtime.GOMAXPROCS(0))

// parallelTokens is the document length from which Sign runs sifting on a
// goroutine of its own: from about a millisecond of signing, where the
// goroutine's few microseconds do not count (docs/performance.md).
var parallelTokens = 1000 // a variable for BenchmarkSetLong
