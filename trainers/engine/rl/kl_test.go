package rl

import (
	"math"
	"testing"
)

// The two estimators at hand-computed points: log π = −1, log π_ref = −1.5 gives logr = −0.5,
// k1 = 0.5, k3 = e^−0.5 − 1 + 0.5 = 0.1065306597126334; equal log-probs give 0 for both.
func TestTokenKL_HandValues(t *testing.T) {
	if got := TokenKL(-1, -1.5, KLK1); got != 0.5 {
		t.Errorf("k1 = %v, want 0.5", got)
	}
	if got := TokenKL(-1, -1.5, KLK3); math.Abs(got-0.1065306597126334) > 1e-15 {
		t.Errorf("k3 = %.17g, want 0.1065306597126334", got)
	}
	for _, e := range []string{KLK1, KLK3} {
		if got := TokenKL(-2.25, -2.25, e); got != 0 {
			t.Errorf("%s at π = π_ref: %v, want 0", e, got)
		}
	}
	// The course's phase 9 reward −β(old − ref) is −β·k1, bit for bit.
	old, ref := -0.7310585786300049, -1.3132616875182228
	if -0.1*TokenKL(old, ref, KLK1) != -0.1*(old-ref) {
		t.Error("−β·k1 differs from the course's −β(old − ref)")
	}
	if CheckKLEstimator("k2") == nil || CheckKLEstimator("k3") != nil {
		t.Error("CheckKLEstimator accepts k2 or refuses k3")
	}
}

// masked_whiten by hand: the masked values 1, 2, 3 have mean 2 and unbiased variance 1, so they
// whiten to −1, 0, 1 (·1/√(1 + 1e-8)); the masked-out 10 becomes (10 − 2)/√(1+1e-8); with
// shift_mean False the mean 2 is added back.
func TestMaskedWhiten_Hand(t *testing.T) {
	x := [][]float64{{1, 2}, {3, 10}}
	mask := [][]bool{{true, true}, {true, false}}
	s := 1 / math.Sqrt(1+1e-8)
	got, err := MaskedWhiten(x, mask, true)
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, "whiten row 0", got[0], []float64{-s, 0}, 1e-15)
	closeAll(t, "whiten row 1", got[1], []float64{s, 8 * s}, 1e-15)
	got, _ = MaskedWhiten(x, mask, false)
	closeAll(t, "no shift row 0", got[0], []float64{2 - s, 2}, 1e-15)
	if _, err := MaskedWhiten(x, [][]bool{{false, false}, {false, false}}, true); err == nil {
		t.Error("an all-masked table whitened without error")
	}
}
