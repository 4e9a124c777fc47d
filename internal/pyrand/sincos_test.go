package pyrand

import (
	"math"
	"testing"
)

// The double-double fast path rounds exactly as the 256-bit series, on random arguments over
// |x| < 64, near multiples of π/2, and on a hard case where glibc's cos is one ulp off.
func TestSinCos_FastPathIsCorrectlyRounded(t *testing.T) {
	r := New(11)
	xs := []float64{-1.8762956705314511, 1e-300, -1e-20, math.Pi / 2, math.Pi, -3 * math.Pi / 2, 63.99, 5e-8}
	for range 4000 {
		xs = append(xs, (r.Random()*2-1)*64, (r.Random()*2-1)*4, (r.Random()*2-1)*1e-3)
	}
	for k := -40; k <= 40; k++ {
		xs = append(xs, math.Nextafter(float64(k)*math.Pi/2, 0), float64(k)*math.Pi/2+1e-9)
	}
	fast := 0
	for _, x := range xs {
		ws, wc := crSinCos(x)
		gs, gc := SinCos(x)
		if gs != ws || gc != wc {
			t.Fatalf("SinCos(%v) = (%v, %v), want (%v, %v)", x, gs, gc, ws, wc)
		}
		if _, _, ok := fastSinCos(x); ok {
			fast++
		}
	}
	if fast < len(xs)-5 {
		t.Errorf("the fast path decided %d of %d arguments", fast, len(xs))
	}
	if _, c := SinCos(-1.8762956705314511); c != -0.30076943525268901 {
		t.Errorf("cos(-1.8762956705314511) = %v, want the correctly rounded -0.30076943525268901", c)
	}
}
