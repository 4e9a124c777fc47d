package rl

import (
	"math"
	"testing"
)

func closeAll(t *testing.T, name string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values %v, want %d %v", name, len(got), got, len(want), want)
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) >= tol {
			t.Errorf("%s[%d] = %.17g, want %.17g", name, i, got[i], want[i])
		}
	}
}

// Phase 1 hand_check: the three corridor trajectories' G_0 (식 (1.1)) and G_t (식 (1.2)).
func TestDiscountedReturn_Phase1HandCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rewards []float64
		want    float64
	}{
		{"→→", []float64{0, 1}, 0.9},                  // 0 + 0.9·1
		{"←→→→", []float64{0, 0, 0, 1}, 0.729},        // 0.9³·1
		{"←←", []float64{0, -1}, -0.9},                // 0 + 0.9·(−1)
		{"empty", nil, 0},                             // no reward: G_0 = 0
		{"γ^k·r", []float64{1, 1, 1}, 1 + 0.9 + 0.81}, // plain sum
	} {
		got := DiscountedReturn(tc.rewards, 0.9)
		if math.Abs(got-tc.want) >= 1e-12 {
			t.Errorf("%s: DiscountedReturn = %.17g, want %v", tc.name, got, tc.want)
		}
		if back := ReturnsBackward(tc.rewards, 0.9); len(back) > 0 && math.Abs(back[0]-got) >= 1e-12 {
			t.Errorf("%s: ReturnsBackward[0] = %.17g, want G_0 = %.17g", tc.name, back[0], got)
		}
	}
}

// Phase 1 hand_check: the detour ←→→→ gives G_0..G_3 = [0.729, 0.81, 0.9, 1.0] (표 1.2).
func TestReturnsBackward_Phase1Table(t *testing.T) {
	closeAll(t, "G", ReturnsBackward([]float64{0, 0, 0, 1}, 0.9), []float64{0.729, 0.81, 0.9, 1.0}, 1e-12)
}

// Phase 1 gamma_effect: shortest vs detour for γ = 1, 0.9, 0.5.
func TestDiscountedReturn_GammaEffect(t *testing.T) {
	for _, tc := range []struct{ gamma, short, detour float64 }{
		{1.0, 1.0, 1.0}, {0.9, 0.9, 0.729}, {0.5, 0.5, 0.125},
	} {
		if got := DiscountedReturn([]float64{0, 1}, tc.gamma); math.Abs(got-tc.short) >= 1e-12 {
			t.Errorf("γ=%v short: got %v, want %v", tc.gamma, got, tc.short)
		}
		if got := DiscountedReturn([]float64{0, 0, 0, 1}, tc.gamma); math.Abs(got-tc.detour) >= 1e-12 {
			t.Errorf("γ=%v detour: got %v, want %v", tc.gamma, got, tc.detour)
		}
	}
}

// PowInt must be C's correctly rounded pow: CPython's 0.9 ** k (values printed by CPython 3.11).
func TestPowInt_MatchesCPython(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		k    int
		want float64
	}{
		{0.9, 0, 1}, {0.9, 1, 0.9}, {0.9, 4, 0.6561}, {0.9, 5, 0.5904900000000001},
		{0.9, 20, 0.12157665459056935}, {0.95, 4, 0.8145062499999999}, {0.3, 3, 0.026999999999999996},
		{0.1, 4, 0.00010000000000000002}, {0.5, 10, 0.0009765625},
	} {
		if got := PowInt(tc.x, tc.k); got != tc.want {
			t.Errorf("PowInt(%v, %d) = %.17g, want %.17g", tc.x, tc.k, got, tc.want)
		}
	}
}

// Phase 6 hand_check: episode ←→→→ scored with V = exact_values(0.5) = {1: −0.5, 2: 0, 3: 0.5}.
func TestGAE_Phase6HandCheck(t *testing.T) {
	rewards := []float64{0, 0, 0, 1}
	values := []float64{0, -0.5, 0, 0.5} // V(2), V(1), V(2), V(3)
	deltas, a1, ret1 := GAE(rewards, values, 0, true, 0.9, 1.0)
	closeAll(t, "δ", deltas, []float64{-0.45, 0.5, 0.45, 0.5}, 1e-12)
	closeAll(t, "A(λ=1)", a1, []float64{0.729, 1.31, 0.9, 0.5}, 1e-12) // G_t − V(s_t)
	closeAll(t, "returns(λ=1)", ret1, ReturnsBackward(rewards, 0.9), 1e-12)
	_, a0, _ := GAE(rewards, values, 0, true, 0.9, 0.0)
	closeAll(t, "A(λ=0)", a0, deltas, 1e-12) // TD error
	_, ah, _ := GAE(rewards, values, 0, true, 0.9, 0.5)
	closeAll(t, "A(λ=0.5)", ah, []float64{-0.0883125, 0.80375, 0.675, 0.5}, 1e-12)
}

// A truncated episode bootstraps from lastValue; a terminated one ignores it.
func TestGAE_TruncatedBootstraps(t *testing.T) {
	rewards, values := []float64{0, 0}, []float64{0.2, 0.4}
	dTerm, _, _ := GAE(rewards, values, 0.7, true, 0.9, 0.95)
	dTrunc, _, _ := GAE(rewards, values, 0.7, false, 0.9, 0.95)
	closeAll(t, "δ terminated", dTerm, []float64{0.9*0.4 - 0.2, -0.4}, 1e-15)
	closeAll(t, "δ truncated", dTrunc, []float64{0.9*0.4 - 0.2, 0.9*0.7 - 0.4}, 1e-15)
}
