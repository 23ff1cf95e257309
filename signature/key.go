package signature

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/dchest/siphash"
)

// MinSecretBytes is the shortest secret NewSecret accepts: 128 bits, the
// SipHash key size.
const MinSecretBytes = 16

// Secret is the master key every signature is keyed with. Without it a
// sender cannot predict which terms, shingles or clusters are selected, nor
// which key a message maps to.
//
// The zero Secret is not usable; build one with NewSecret. A Secret never
// prints its key: String and GoString show only its key id.
type Secret struct {
	k0, k1 uint64
	id     string
}

// NewSecret derives the master key from configured secret bytes (at least
// MinSecretBytes, typically 32 random bytes). Any length is accepted above
// the minimum; the bytes are compressed with SHA-256 so that long
// passphrases keep their entropy.
func NewSecret(b []byte) (Secret, error) {
	if len(b) < MinSecretBytes {
		return Secret{}, fmt.Errorf("signature secret has %d bytes, need at least %d", len(b), MinSecretBytes)
	}
	distinct := map[byte]bool{}
	for _, c := range b {
		distinct[c] = true
	}
	// A placeholder such as 32 zero bytes or "aaaa…" is a configuration
	// mistake, not a secret.
	if len(distinct) < 4 {
		return Secret{}, fmt.Errorf("signature secret uses only %d distinct byte values: not a random secret", len(distinct))
	}
	h := sha256.New()
	h.Write([]byte("bulkmilter/secret/v1\x00"))
	h.Write(b)
	var sum [32]byte
	h.Sum(sum[:0])
	s := Secret{
		k0: binary.LittleEndian.Uint64(sum[0:8]),
		k1: binary.LittleEndian.Uint64(sum[8:16]),
	}
	// The key id is a one-way function of the key: it names the key in
	// versions and logs without revealing it.
	idh := sha256.New()
	idh.Write([]byte("bulkmilter/keyid/v1\x00"))
	idh.Write(sum[:16])
	s.id = hex.EncodeToString(idh.Sum(nil)[:6])
	return s, nil
}

// ID returns a short public identifier of the key (12 hex digits). It
// changes when the secret changes and reveals nothing about it.
func (s Secret) ID() string { return s.id }

// IsZero reports whether s is the zero Secret.
func (s Secret) IsZero() bool { return s.id == "" }

// String returns "secret(<id>)", never the key.
func (s Secret) String() string { return "secret(" + s.id + ")" }

// GoString is like String so that %#v does not print the key either.
func (s Secret) GoString() string { return s.String() }

// sipKey is a derived 128-bit SipHash key.
type sipKey struct{ k0, k1 uint64 }

// derive returns the subkey for one family and use, e.g. "imatch/term".
// Subkeys are SipHash-2-4 (128-bit output) of the label under the master
// key: independent of each other, and of every other secret's subkeys.
func (s Secret) derive(label string) sipKey {
	a, b := siphash.Hash128(s.k0, s.k1, []byte(label))
	return sipKey{a, b}
}

// str returns the keyed hash of a string without copying it.
func (k sipKey) str(s string) uint64 {
	return siphash.Hash(k.k0, k.k1, unsafe.Slice(unsafe.StringData(s), len(s)))
}

// word returns SipHash-2-4 of the 8-byte little-endian encoding of x. It is
// an inlined single-block SipHash, equal to siphash.Hash on those 8 bytes.
func (k sipKey) word(x uint64) uint64 {
	v0 := k.k0 ^ 0x736f6d6570736575
	v1 := k.k1 ^ 0x646f72616e646f6d
	v2 := k.k0 ^ 0x6c7967656e657261
	v3 := k.k1 ^ 0x7465646279746573
	v0, v1, v2, v3 = sipBlock(v0, v1, v2, v3, x)
	v0, v1, v2, v3 = sipBlock(v0, v1, v2, v3, 8<<56)
	return sipFinal(v0, v1, v2, v3)
}

// words returns SipHash-2-4 of the little-endian encoding of ws (8 bytes per
// word), equal to siphash.Hash on those bytes, without allocating.
func (k sipKey) words(ws ...uint64) uint64 {
	v0 := k.k0 ^ 0x736f6d6570736575
	v1 := k.k1 ^ 0x646f72616e646f6d
	v2 := k.k0 ^ 0x6c7967656e657261
	v3 := k.k1 ^ 0x7465646279746573
	for _, w := range ws {
		v0, v1, v2, v3 = sipBlock(v0, v1, v2, v3, w)
	}
	v0, v1, v2, v3 = sipBlock(v0, v1, v2, v3, uint64(len(ws)*8)<<56)
	return sipFinal(v0, v1, v2, v3)
}

// sipBlock and sipFinal write the SipRound out each, not through a shared
// sipRound function: with one, neither fits the inliner's budget any more
// and every hash of word and words makes three calls (go build -gcflags=-m).
func sipBlock(v0, v1, v2, v3, m uint64) (uint64, uint64, uint64, uint64) {
	v3 ^= m
	for range 2 {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	v0 ^= m
	return v0, v1, v2, v3
}

func sipFinal(v0, v1, v2, v3 uint64) uint64 {
	v2 ^= 0xff
	for range 4 {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	return v0 ^ v1 ^ v2 ^ v3
}

// mixer is a cheap keyed bijection on 64-bit values (a keyed murmur3
// finaliser). It is applied only to values that are already SipHash
// outputs or functions of them, where it re-randomises per use at a
// fraction of SipHash's cost; its key words are SipHash-derived.
type mixer struct{ a, b uint64 }

func newMixer(k sipKey) mixer { return mixer{a: k.k0, b: k.k1 | 1} }

func (m mixer) mix(x uint64) uint64 {
	x ^= m.a
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= m.b
	x ^= x >> 29
	return x
}

// fastrange maps a uniform 64-bit value onto [0, n) without division.
func fastrange(x uint64, n int) int {
	hi, _ := bits.Mul64(x, uint64(n))
	return int(hi)
}
