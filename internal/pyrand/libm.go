package pyrand

import (
	"math"
	"math/big"
)

// CPython's random.gauss calls the C library's log, cos and sin, which on glibc return the
// correctly rounded result in practice; Go's math package may differ by one ulp. These versions
// evaluate the series in 256-bit big.Float arithmetic and round once, so gauss() matches CPython
// bit for bit. They are slow (tens of µs) and used only by Gauss.

const prec = 256

func newF(x float64) *big.Float { return new(big.Float).SetPrec(prec).SetFloat64(x) }

// ln2 = 2·atanh(1/3), computed once.
var ln2 = func() *big.Float {
	third := new(big.Float).SetPrec(prec).Quo(newF(1), newF(3))
	return atanhSeries(third).Mul(newF(2), atanhSeries(third))
}()

// atanhSeries returns Σ z^(2k+1)/(2k+1) for |z| <= 1/3.
func atanhSeries(z *big.Float) *big.Float {
	z2 := new(big.Float).SetPrec(prec).Mul(z, z)
	term := new(big.Float).SetPrec(prec).Set(z)
	sum := new(big.Float).SetPrec(prec).Set(z)
	for k := 1; k < 200; k++ {
		term.Mul(term, z2)
		t := new(big.Float).SetPrec(prec).Quo(term, newF(float64(2*k+1)))
		sum.Add(sum, t)
		if t.Sign() == 0 || t.MantExp(nil)-sum.MantExp(nil) < -prec {
			break
		}
	}
	return sum
}

// crLog is the correctly rounded natural logarithm of x > 0.
func crLog(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 0) {
		return math.Log(x)
	}
	frac, exp := math.Frexp(x) // x = frac·2^exp, frac in [0.5, 1)
	m := newF(frac * 2)        // [1, 2), exact
	e := exp - 1
	num := new(big.Float).SetPrec(prec).Sub(m, newF(1))
	den := new(big.Float).SetPrec(prec).Add(m, newF(1))
	z := new(big.Float).SetPrec(prec).Quo(num, den)
	lm := atanhSeries(z)
	lm.Mul(lm, newF(2))
	res := new(big.Float).SetPrec(prec).Mul(ln2, newF(float64(e)))
	res.Add(res, lm)
	f, _ := res.Float64()
	return f
}

// SinCos is the correctly rounded sin(x) and cos(x) for |x| < 64 (beyond: Go's math.Sin and
// math.Cos). glibc's sin and cos, which numpy's float64 np.sin/np.cos call, agree with it except
// in rare hard cases (cos(−1.8762956705314511) is one ulp off there); Go's math package differs
// more often. toy/gym's environments use it to follow Gymnasium's numpy arithmetic.
func SinCos(x float64) (sin, cos float64) {
	if s, c, ok := fastSinCos(x); ok {
		return s, c
	}
	return crSinCos(x)
}

// crSinCos returns the correctly rounded sin(x) and cos(x) for |x| < 64 (gauss uses [0, 2π)).
// The Taylor series' largest term is below e^64 ≈ 2⁹², so 256 bits keep 160 of them.
func crSinCos(x float64) (float64, float64) {
	if math.Abs(x) >= 64 {
		return math.Sin(x), math.Cos(x)
	}
	bx := newF(x)
	x2 := new(big.Float).SetPrec(prec).Mul(bx, bx)
	sin := new(big.Float).SetPrec(prec).Set(bx)
	cos := newF(1)
	st := new(big.Float).SetPrec(prec).Set(bx) // x^(2k+1)/(2k+1)!
	ct := newF(1)                              // x^(2k)/(2k)!
	for k := 1; k < 400; k++ {
		ct.Mul(ct, x2)
		ct.Quo(ct, newF(float64((2*k-1)*(2*k))))
		st.Mul(st, x2)
		st.Quo(st, newF(float64((2*k)*(2*k+1))))
		if k%2 == 1 {
			cos.Sub(cos, ct)
			sin.Sub(sin, st)
		} else {
			cos.Add(cos, ct)
			sin.Add(sin, st)
		}
		if ct.Sign() == 0 || ct.MantExp(nil) < -prec-8 {
			break
		}
	}
	s, _ := sin.Float64()
	c, _ := cos.Float64()
	return s, c
}
