package gym

import "math/bits"

// This file ports the part of numpy.random that Gymnasium's seeding uses (numpy
// bit_generator.pyx, _pcg64.pyx, pcg64.h, distributions.c, _bounded_integers.pyx):
// SeedSequence(seed) → PCG64 → Generator.uniform / Generator.integers.

// SeedSequence constants (numpy/random/bit_generator.pyx).
const (
	ssInitA    = 0x43b0d7e5
	ssMultA    = 0x931e8875
	ssInitB    = 0x8b51f9dd
	ssMultB    = 0x58f38ded
	ssMixMultL = 0xca01f9dd
	ssMixMultR = 0x4973f715
	ssXShift   = 16
	ssPoolSize = 4
)

// seedSequencePool is numpy's SeedSequence(entropy=seed).pool for a non-negative integer seed
// with no spawn key: the seed's 32-bit words (least significant first) mixed into 4 words.
func seedSequencePool(seed uint64) [ssPoolSize]uint32 {
	entropy := []uint32{uint32(seed)}
	if hi := uint32(seed >> 32); hi != 0 {
		entropy = append(entropy, hi)
	}
	hashConst := uint32(ssInitA)
	hashmix := func(v uint32) uint32 {
		v ^= hashConst
		hashConst *= ssMultA
		v *= hashConst
		v ^= v >> ssXShift
		return v
	}
	mix := func(x, y uint32) uint32 {
		r := ssMixMultL*x - ssMixMultR*y
		return r ^ r>>ssXShift
	}
	var pool [ssPoolSize]uint32
	for i := range pool {
		if i < len(entropy) {
			pool[i] = hashmix(entropy[i])
		} else {
			pool[i] = hashmix(0)
		}
	}
	for src := range pool {
		for dst := range pool {
			if src != dst {
				pool[dst] = mix(pool[dst], hashmix(pool[src]))
			}
		}
	}
	for src := len(pool); src < len(entropy); src++ {
		for dst := range pool {
			pool[dst] = mix(pool[dst], hashmix(entropy[src]))
		}
	}
	return pool
}

// generateState64 is SeedSequence.generate_state(n, np.uint64): 2n 32-bit words, paired little
// endian.
func generateState64(pool [ssPoolSize]uint32, n int) []uint64 {
	hashConst := uint32(ssInitB)
	words := make([]uint32, 2*n)
	for i := range words {
		v := pool[i%ssPoolSize]
		v ^= hashConst
		hashConst *= ssMultB
		v *= hashConst
		v ^= v >> ssXShift
		words[i] = v
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(words[2*i]) | uint64(words[2*i+1])<<32
	}
	return out
}

// pcg64Mult is PCG's 128-bit LCG multiplier (PCG_DEFAULT_MULTIPLIER_128).
const (
	pcg64MultHi = 2549297995355413924
	pcg64MultLo = 4865540595714422341
)

// PCG64 is numpy's PCG64 bit generator (XSL-RR 128/64), with the 32-bit half buffered as numpy
// does for next_uint32.
type PCG64 struct {
	stateHi, stateLo uint64
	incHi, incLo     uint64
	hasUint32        bool
	uinteger         uint32
}

// newPCG64 seeds as PCG64(SeedSequence(seed)): generate_state(4, uint64) gives the 128-bit
// initial state (words 0, 1: high, low) and stream (words 2, 3), then pcg_setseq_128_srandom_r.
func newPCG64(seed uint64) *PCG64 {
	v := generateState64(seedSequencePool(seed), 4)
	p := &PCG64{}
	// inc = (initseq << 1) | 1
	p.incHi = v[2]<<1 | v[3]>>63
	p.incLo = v[3]<<1 | 1
	p.step()
	var c uint64
	p.stateLo, c = bits.Add64(p.stateLo, v[1], 0)
	p.stateHi, _ = bits.Add64(p.stateHi, v[0], c)
	p.step()
	return p
}

// step is state ← state·mult + inc (mod 2¹²⁸).
func (p *PCG64) step() {
	hi, lo := bits.Mul64(p.stateLo, pcg64MultLo)
	hi += p.stateHi*pcg64MultLo + p.stateLo*pcg64MultHi
	var c uint64
	p.stateLo, c = bits.Add64(lo, p.incLo, 0)
	p.stateHi, _ = bits.Add64(hi, p.incHi, c)
}

// Uint64 is pcg64_next64: advance, then the XSL-RR output of the new state.
func (p *PCG64) Uint64() uint64 {
	p.step()
	return bits.RotateLeft64(p.stateHi^p.stateLo, -int(p.stateHi>>58))
}

// Uint32 is pcg64_next32: the low half of a 64-bit output, the high half kept for the next call.
func (p *PCG64) Uint32() uint32 {
	if p.hasUint32 {
		p.hasUint32 = false
		return p.uinteger
	}
	n := p.Uint64()
	p.hasUint32 = true
	p.uinteger = uint32(n >> 32)
	return uint32(n)
}

// Float64 is next_double: 53 random bits scaled to [0, 1).
func (p *PCG64) Float64() float64 {
	return float64(p.Uint64()>>11) * (1.0 / 9007199254740992.0)
}

// Generator is numpy.random.Generator(PCG64(SeedSequence(seed))), Gymnasium's np_random.
type Generator struct{ bg *PCG64 }

// NewGenerator is Gymnasium's seeding.np_random(seed) for a non-negative seed.
func NewGenerator(seed uint64) *Generator { return &Generator{bg: newPCG64(seed)} }

// Uniform is Generator.uniform(low, high, size=n): low + (high−low)·next_double, in order.
func (g *Generator) Uniform(low, high float64, n int) []float64 {
	out := make([]float64, n)
	r := high - low
	for i := range out {
		out[i] = low + r*g.bg.Float64()
	}
	return out
}

// Integers is Generator.integers(n) (int64, one value, exclusive high) for 1 ≤ n ≤ 2³²:
// _rand_int64 → random_bounded_uint64_fill → buffered_bounded_lemire_uint32 (Lemire's
// multiply-shift with rejection, unmasked).
func (g *Generator) Integers(n int) int {
	if n < 1 || n > 1<<32 {
		panic("gym: Generator.Integers needs 1 <= n <= 2^32")
	}
	rng := uint32(n - 1)
	if rng == 0 {
		return 0
	}
	if rng == 0xFFFFFFFF {
		return int(g.bg.Uint32())
	}
	excl := rng + 1
	m := uint64(g.bg.Uint32()) * uint64(excl)
	left := uint32(m)
	if left < excl {
		threshold := (0xFFFFFFFF - rng) % excl
		for left < threshold {
			m = uint64(g.bg.Uint32()) * uint64(excl)
			left = uint32(m)
		}
	}
	return int(m >> 32)
}
