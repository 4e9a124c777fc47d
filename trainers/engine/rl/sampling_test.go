package rl

import (
	"math"
	"testing"
)

// SamplingGap by hand: Δ = trained − sampled on the valid tokens only; ratios exp(Δ) of 1.2
// (outside), 0.95 (inside), 0.85 (outside) and exactly 1; the band's edges are inside.
func TestSamplingGap_ByHand(t *testing.T) {
	sampled := [][]float64{{-1, -2, -3}, {-0.5, -9}}
	trained := [][]float64{{-1 + math.Log(1.2), -2 + math.Log(0.95), 100}, {-0.5 + math.Log(0.85), -9, -7}}
	valid := func(i, j int) bool { return !(i == 0 && j == 2) } // (0,2) is padding; (1,2) has no sampled token
	mean, mx, out := SamplingGap(sampled, trained, valid)
	wantMean := (math.Log(1.2) + math.Abs(math.Log(0.95)) + math.Abs(math.Log(0.85)) + 0) / 4
	if math.Abs(mean-wantMean) > 1e-12 || math.Abs(mx-math.Log(1.2)) > 1e-12 || out != 0.5 {
		t.Errorf("SamplingGap = %g, %g, %g; want %g, %g, 0.5", mean, mx, out, wantMean, math.Log(1.2))
	}
	for _, c := range []struct {
		ratio float64
		want  bool
	}{{0.9, false}, {1.1, false}, {0.899, true}, {1.101, true}, {1, false}} {
		if got := OutsideBand(math.Log(c.ratio)); got != c.want {
			t.Errorf("OutsideBand(ln %g) = %v, want %v", c.ratio, got, c.want)
		}
	}
	if m, x, o := SamplingGap(sampled, trained, func(int, int) bool { return false }); m != 0 || x != 0 || o != 0 {
		t.Errorf("no valid token: %g %g %g, want zeros", m, x, o)
	}
}
