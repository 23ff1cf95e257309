package store

import (
	"math"
	"math/bits"
)

// The embedded store's HyperLogLog: the same precision as Redis (2¹⁴
// registers, standard error 0.81%) and the same estimator (Ertl, "New
// cardinality estimation algorithms for HyperLogLog sketches", 2017, as in
// Redis ≥ 5), one byte per register.
const (
	hllP = 14
	hllM = 1 << hllP
	hllQ = 64 - hllP
)

type hll [hllM]uint8

// add records a 48-bit pseudonym. It is mixed to 64 bits first, because the
// register index and rank need uniform high and low bits.
func (h *hll) add(p pseudonym) {
	x := mix64(uint64(p))
	idx := x >> hllQ
	rank := uint8(bits.TrailingZeros64(x|1<<hllQ)) + 1 // 1..hllQ+1
	if rank > h[idx] {
		h[idx] = rank
	}
}

// merge sets h to the register-wise maximum of h and o (the union).
func (h *hll) merge(o *hll) {
	for i := range h {
		if o[i] > h[i] {
			h[i] = o[i]
		}
	}
}

// count estimates the number of distinct pseudonyms added.
func (h *hll) count() int64 {
	var c [hllQ + 2]int
	for _, r := range h {
		c[r]++
	}
	m := float64(hllM)
	z := m * hllTau((m-float64(c[hllQ+1]))/m)
	for k := hllQ; k >= 1; k-- {
		z = 0.5 * (z + float64(c[k]))
	}
	z += m * hllSigma(float64(c[0])/m)
	return int64(math.Round(0.5 / math.Ln2 * m * m / z))
}

func hllSigma(x float64) float64 {
	if x == 1 {
		return math.Inf(1)
	}
	y, z := 1.0, x
	for {
		x *= x
		zp := z
		z += x * y
		y += y
		if zp == z {
			return z
		}
	}
}

func hllTau(x float64) float64 {
	if x == 0 || x == 1 {
		return 0
	}
	y, z := 1.0, 1-x
	for {
		x = math.Sqrt(x)
		zp := z
		y *= 0.5
		z -= (1 - x) * (1 - x) * y
		if zp == z {
			return z / 3
		}
	}
}

// mix64 is the SplitMix64 finaliser.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
