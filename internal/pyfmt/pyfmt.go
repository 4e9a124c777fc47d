// Package pyfmt formats numbers exactly as CPython does, so the course's printed lines are
// reproduced byte for byte: repr(float), round(x, n), and fixed-point format specs.
package pyfmt

import (
	"math"
	"strconv"
	"strings"
)

// Repr is Python's repr(x) for a float: the shortest string that round-trips, in fixed notation
// when the decimal exponent is in (-4, 16] (with at least one decimal: "2.0"), else scientific
// ("1e-05", "1.5e+16"); "inf", "-inf", "nan"; "-0.0" for negative zero.
func Repr(x float64) string {
	switch {
	case math.IsNaN(x):
		return "nan"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(x, 'e', -1, 64) // e.g. "-1.2345e-05"
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	mant, expStr, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1 // position of the decimal point relative to the digits
	if decpt <= -4 || decpt > 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if exp < 0 {
			es, exp = "-", -exp
		}
		e := strconv.Itoa(exp)
		if len(e) < 2 {
			e = "0" + e
		}
		return sign + m + "e" + es + e
	}
	var b strings.Builder
	b.WriteString(sign)
	switch {
	case decpt <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -decpt))
		b.WriteString(digits)
	case decpt >= len(digits):
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", decpt-len(digits)))
		b.WriteString(".0")
	default:
		b.WriteString(digits[:decpt])
		b.WriteString(".")
		b.WriteString(digits[decpt:])
	}
	return b.String()
}

// Round is Python's round(x, n) for n >= 0: the float nearest to x correctly rounded to n decimals
// (ties to even on the exact binary value), so Repr(Round(x, n)) prints as Python does.
func Round(x float64, n int) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	y, err := strconv.ParseFloat(strconv.FormatFloat(x, 'f', n, 64), 64)
	if err != nil {
		return x
	}
	if y == 0 && math.Signbit(x) {
		return math.Copysign(0, -1) // round(-0.0001, 3) == -0.0 in Python
	}
	return y
}

// RoundRepr is repr(round(x, n)), the course's usual way of printing a number.
func RoundRepr(x float64, n int) string { return Repr(Round(x, n)) }

// Fixed is Python's format(x, '.nf') (and '+.nf' with plus): correctly rounded fixed point.
func Fixed(x float64, n int, plus bool) string {
	s := strconv.FormatFloat(x, 'f', n, 64)
	if plus && !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	return s
}

// List is Python's repr of a list of floats already rounded by the caller: "[0.729, 0.81]".
func List(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = Repr(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
