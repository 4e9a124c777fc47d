package pyrand

import (
	"math"
	"math/big"
)

// A fast path for the correctly rounded sin and cos: double-double arithmetic (about 100 bits)
// gives the value with a relative error far below 2⁻⁸⁰; its rounding to float64 is the correct
// one unless the value lies within that error of a midpoint between two doubles, which is when
// the 256-bit series (crSinCos) decides instead. toy/gym's Acrobot calls sin/cos 16 times a step,
// so the 256-bit series alone (tens of µs a call) would dominate a training run.

// dd is an unevaluated sum hi + lo with |lo| ≤ ulp(hi)/2.
type dd struct{ hi, lo float64 }

func twoSum(a, b float64) dd {
	s := a + b
	bb := s - a
	return dd{s, (a - (s - bb)) + (b - bb)}
}

func quickTwoSum(a, b float64) dd {
	s := a + b
	return dd{s, b - (s - a)}
}

func twoProd(a, b float64) dd {
	p := a * b
	return dd{p, math.FMA(a, b, -p)}
}

func (a dd) add(b dd) dd {
	s := twoSum(a.hi, b.hi)
	t := twoSum(a.lo, b.lo)
	s = quickTwoSum(s.hi, s.lo+t.hi)
	return quickTwoSum(s.hi, s.lo+t.lo)
}

func (a dd) neg() dd { return dd{-a.hi, -a.lo} }

func (a dd) mul(b dd) dd {
	p := twoProd(a.hi, b.hi)
	return quickTwoSum(p.hi, p.lo+(a.hi*b.lo+a.lo*b.hi))
}

// toDD rounds a big.Float to the nearest double-double.
func toDD(x *big.Float) dd {
	hi, _ := x.Float64()
	lo, _ := new(big.Float).SetPrec(prec).Sub(x, newF(hi)).Float64()
	return dd{hi, lo}
}

const sinCosTerms = 15 // r^29/29! < 2⁻¹¹² for |r| ≤ π/4

var (
	// piOver2 = c[0] + c[1] + c[2] (about 160 bits); invFact[n] = 1/n! as double-doubles.
	piOver2 [3]float64
	invFact [2 * sinCosTerms]dd
)

func init() {
	// π = 16·atan(1/5) − 4·atan(1/239) (Machin), atan(1/n) = Σ (−1)^k / ((2k+1)·n^(2k+1)).
	atanInv := func(n float64) *big.Float {
		sum, pow := newF(0), new(big.Float).SetPrec(prec).Quo(newF(1), newF(n))
		n2 := newF(n * n)
		for k := 0; k < 400; k++ {
			t := new(big.Float).SetPrec(prec).Quo(pow, newF(float64(2*k+1)))
			if k%2 == 0 {
				sum.Add(sum, t)
			} else {
				sum.Sub(sum, t)
			}
			if t.Sign() == 0 || t.MantExp(nil) < -prec-8 {
				break
			}
			pow.Quo(pow, n2)
		}
		return sum
	}
	pi := new(big.Float).SetPrec(prec).Sub(new(big.Float).SetPrec(prec).Mul(newF(16), atanInv(5)),
		new(big.Float).SetPrec(prec).Mul(newF(4), atanInv(239)))
	rest := new(big.Float).SetPrec(prec).Quo(pi, newF(2))
	for i := range piOver2 {
		piOver2[i], _ = rest.Float64()
		rest.Sub(rest, newF(piOver2[i]))
	}
	f := newF(1)
	for n := range invFact {
		if n > 0 {
			f.Mul(f, newF(float64(n)))
		}
		invFact[n] = toDD(new(big.Float).SetPrec(prec).Quo(newF(1), f))
	}
}

// fastSinCos returns the correctly rounded sin(x), cos(x) and ok, or ok false when a result is
// too close to a rounding midpoint to decide in double-double (or |x| ≥ 64, or x = 0).
func fastSinCos(x float64) (sin, cos float64, ok bool) {
	if !(math.Abs(x) < 64) || x == 0 {
		return 0, 0, false
	}
	k := math.Round(x * (2 / math.Pi))
	p := twoProd(k, piOver2[0])
	r := dd{x - p.hi, 0}.add(dd{-p.lo, 0}) // x − p.hi is exact (Sterbenz, |x − kπ/2| ≤ π/4)
	r = r.add(twoProd(k, piOver2[1]).neg()).add(dd{-k * piOver2[2], 0})
	r2 := r.mul(r)
	// Horner: sin r = r·Σ (−1)^j r^(2j)/(2j+1)!, cos r = Σ (−1)^j r^(2j)/(2j)!.
	s, c := dd{}, dd{}
	for j := sinCosTerms - 1; j >= 0; j-- {
		sj, cj := invFact[2*j+1], invFact[2*j]
		if j%2 == 1 {
			sj, cj = sj.neg(), cj.neg()
		}
		s, c = s.mul(r2).add(sj), c.mul(r2).add(cj)
	}
	s = s.mul(r)
	switch q := int(k) & 3; q { // sin(r + qπ/2), cos(r + qπ/2)
	case 1:
		s, c = c, s.neg()
	case 2:
		s, c = s.neg(), c.neg()
	case 3:
		s, c = c.neg(), s
	}
	sin, ok1 := roundDD(s)
	cos, ok2 := roundDD(c)
	return sin, cos, ok1 && ok2
}

// roundDD is hi + lo rounded to float64, and whether that rounding is certain given a relative
// error of 2⁻⁸⁰ in the double-double.
func roundDD(v dd) (float64, bool) {
	v = quickTwoSum(v.hi, v.lo)
	h := math.Abs(v.hi)
	if h == 0 {
		return v.hi, false
	}
	half := (math.Nextafter(h, math.Inf(1)) - h) / 2
	if (v.lo < 0) != (v.hi < 0) && v.lo != 0 {
		half = (h - math.Nextafter(h, 0)) / 2
	}
	return v.hi, math.Abs(math.Abs(v.lo)-half) > h*0x1p-80
}
