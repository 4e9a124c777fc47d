// Package pyrand is a bit-exact port of CPython's `random.Random` (MT19937 seeded with
// init_by_array, CPython 3.9-3.13), so Go code consumes random numbers exactly as the course's
// Python did and reproduces its sampled trajectories.
package pyrand

import (
	"math"
	"math/bits"
)

const (
	n         = 624
	m         = 397
	matrixA   = 0x9908b0df
	upperMask = 0x80000000
	lowerMask = 0x7fffffff
)

// Rand is CPython's random.Random. The zero value is not usable; call New.
type Rand struct {
	mt        [n]uint32
	mti       int
	gaussNext float64
	hasGauss  bool
}

// New returns a generator seeded like `random.Random(seed)` for an int seed: init_by_array with the
// 32-bit little-endian words of |seed| ([0] for 0).
func New(seed int64) *Rand {
	u := uint64(seed)
	if seed < 0 {
		u = uint64(-seed)
	}
	key := []uint32{uint32(u)}
	if hi := uint32(u >> 32); hi != 0 {
		key = append(key, hi)
	}
	r := &Rand{}
	r.initByArray(key)
	return r
}

func (r *Rand) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < n; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.mti = n
}

func (r *Rand) initByArray(key []uint32) {
	r.initGenrand(19650218)
	i, j := 1, 0
	k := n
	if len(key) > k {
		k = len(key)
	}
	for ; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= n {
			r.mt[0] = r.mt[n-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k = n - 1; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= n {
			r.mt[0] = r.mt[n-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000
}

// Uint32 returns the next 32-bit MT19937 output (genrand_uint32).
func (r *Rand) Uint32() uint32 {
	if r.mti >= n {
		var kk int
		for kk = 0; kk < n-m; kk++ {
			y := (r.mt[kk] & upperMask) | (r.mt[kk+1] & lowerMask)
			r.mt[kk] = r.mt[kk+m] ^ (y >> 1) ^ (-(y & 1) & matrixA)
		}
		for ; kk < n-1; kk++ {
			y := (r.mt[kk] & upperMask) | (r.mt[kk+1] & lowerMask)
			r.mt[kk] = r.mt[kk+(m-n)] ^ (y >> 1) ^ (-(y & 1) & matrixA)
		}
		y := (r.mt[n-1] & upperMask) | (r.mt[0] & lowerMask)
		r.mt[n-1] = r.mt[m-1] ^ (y >> 1) ^ (-(y & 1) & matrixA)
		r.mti = 0
	}
	y := r.mt[r.mti]
	r.mti++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// Random is random.random(): a float64 in [0, 1) with 53 random bits.
func (r *Rand) Random() float64 {
	a := r.Uint32() >> 5
	b := r.Uint32() >> 6
	return (float64(a)*67108864.0 + float64(b)) / 9007199254740992.0
}

// GetRandBits is random.getrandbits(k) for 0 < k <= 32.
func (r *Rand) GetRandBits(k int) uint32 {
	if k <= 0 || k > 32 {
		panic("pyrand: GetRandBits needs 0 < k <= 32")
	}
	return r.Uint32() >> (32 - uint(k))
}

// RandBelow is random._randbelow(n) (rejection sampling on bit_length(n) bits), n in [1, 2^32).
func (r *Rand) RandBelow(nv int) int {
	if nv <= 0 {
		panic("pyrand: RandBelow needs n > 0")
	}
	k := bits.Len(uint(nv))
	v := int(r.GetRandBits(k))
	for v >= nv {
		v = int(r.GetRandBits(k))
	}
	return v
}

// Randrange is random.randrange(n).
func (r *Rand) Randrange(nv int) int { return r.RandBelow(nv) }

// RandInt is random.randint(a, b): a + randrange(b-a+1).
func (r *Rand) RandInt(a, b int) int { return a + r.RandBelow(b-a+1) }

// Choice is random.choice(seq) for a sequence of length nv; it returns the chosen index.
// Like CPython it consumes random bits even when nv == 1.
func (r *Rand) Choice(nv int) int { return r.RandBelow(nv) }

// Choices is random.choices(population, weights=w)[0]; it returns the chosen index.
// cum = left-to-right running sums; index = bisect_right(cum, random()*total, 0, len-1).
func (r *Rand) Choices(weights []float64) int {
	cum := make([]float64, len(weights))
	s := 0.0
	for i, w := range weights {
		s += w
		cum[i] = s
	}
	total := cum[len(cum)-1] + 0.0
	x := r.Random() * total
	lo, hi := 0, len(cum)-1
	for lo < hi { // bisect_right
		mid := (lo + hi) / 2
		if x < cum[mid] {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// Sample is random.sample(range(popSize), k): it returns k distinct indices in CPython's order.
func (r *Rand) Sample(popSize, k int) []int {
	if k < 0 || k > popSize {
		panic("pyrand: Sample larger than population or negative")
	}
	result := make([]int, k)
	setsize := 21
	if k > 5 {
		setsize += int(math.Pow(4, math.Ceil(math.Log(float64(3*k))/math.Log(4))))
	}
	if popSize <= setsize {
		pool := make([]int, popSize)
		for i := range pool {
			pool[i] = i
		}
		for i := 0; i < k; i++ {
			j := r.RandBelow(popSize - i)
			result[i] = pool[j]
			pool[j] = pool[popSize-i-1]
		}
		return result
	}
	selected := make(map[int]bool, k)
	for i := 0; i < k; i++ {
		j := r.RandBelow(popSize)
		for selected[j] {
			j = r.RandBelow(popSize)
		}
		selected[j] = true
		result[i] = j
	}
	return result
}

// Gauss is random.gauss(mu, sigma): Box-Muller with the second value cached.
func (r *Rand) Gauss(mu, sigma float64) float64 {
	z := r.gaussNext
	if r.hasGauss {
		r.hasGauss = false
	} else {
		x2pi := r.Random() * 2 * math.Pi
		g2rad := math.Sqrt(-2.0 * crLog(1.0-r.Random()))
		sin, cos := crSinCos(x2pi)
		z = cos * g2rad
		r.gaussNext = sin * g2rad
		r.hasGauss = true
	}
	return mu + z*sigma
}
