package pyfmt

import (
	"math"
	"testing"
)

// Expected strings are what CPython 3.11 prints.
func TestRepr(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want string
	}{
		{0, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {2, "2.0"}, {0.1, "0.1"}, {0.729, "0.729"},
		{1e-4, "0.0001"}, {1e-5, "1e-05"}, {1.5e-5, "1.5e-05"}, {1e15, "1000000000000000.0"},
		{1e16, "1e+16"}, {123456789012345678, "1.2345678901234568e+17"}, {-0.45, "-0.45"},
		{0.30000000000000004, "0.30000000000000004"}, {math.Inf(1), "inf"}, {math.NaN(), "nan"},
		{1.0 / 3, "0.3333333333333333"}, {-1.3e-06, "-1.3e-06"}, {math.Inf(-1), "-inf"},
		{1.5e-7, "1.5e-07"}, {1234567890123456, "1234567890123456.0"}, {1.25e100, "1.25e+100"},
		{math.MaxFloat64, "1.7976931348623157e+308"}, {5e-324, "5e-324"},
	} {
		if got := Repr(c.x); got != c.want {
			t.Errorf("Repr(%v) = %q, want %q", c.x, got, c.want)
		}
	}
}

func TestRound(t *testing.T) {
	for _, c := range []struct {
		x    float64
		n    int
		want string
	}{
		{0.0437, 4, "0.0437"}, {2.675, 2, "2.67"}, {0.5456, 3, "0.546"}, {-0.0001, 3, "-0.0"},
		{0.125, 2, "0.12"}, {0.375, 2, "0.38"}, {4.6349, 2, "4.63"}, {0.80375, 4, "0.8037"},
		{-0.0883125, 4, "-0.0883"}, {1.0, 3, "1.0"},
	} {
		if got := RoundRepr(c.x, c.n); got != c.want {
			t.Errorf("repr(round(%v, %d)) = %q, want %q", c.x, c.n, got, c.want)
		}
	}
}

func TestFixed(t *testing.T) {
	for _, c := range []struct {
		x    float64
		n    int
		plus bool
		want string
	}{
		{0.0009, 4, true, "+0.0009"}, {-0.992, 3, true, "-0.992"}, {0.9, 3, false, "0.900"},
		{math.Copysign(0, -1), 3, true, "-0.000"}, {0.06625, 5, false, "0.06625"},
	} {
		if got := Fixed(c.x, c.n, c.plus); got != c.want {
			t.Errorf("Fixed(%v, %d, %v) = %q, want %q", c.x, c.n, c.plus, got, c.want)
		}
	}
}
