package rl_test

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/trainers/engine/graphtest"
	"github.com/posttrain/posttrain/trainers/engine/rl"
)

// Phase 12 hand_check: a token with A > 0 and ratio 1.25 stops learning under GRPO's ε = 0.2 but
// still learns under DAPO's clip-higher ε_high = 0.28 (coefficient ratio·A).
func TestClippedSurrogate_ClipHigher(t *testing.T) {
	for _, c := range []struct {
		epsHigh, want float64
	}{{0.2, 0}, {0.28, 1}} { // want: −∂ℓ/∂ρ = 0 (clipped) or A = 1
		out := graphtest.Eval(t, func(in []*Node) []*Node {
			loss := ReduceAllSum(rl.ClippedSurrogate(in[0], in[1], 0.2, c.epsHigh))
			return []*Node{loss, Neg(Gradient(loss, in[0])[0])}
		}, [][]float64{{1.25}}, []float64{1})
		if got, want := out[1][0], c.want; !graphtest.Within(got, want, 1e-15) {
			t.Errorf("ε_high=%v: −∂ℓ/∂ρ = %v, want %v", c.epsHigh, got, want)
		}
		if got, want := out[0][0], -math.Min(1.25, 1+c.epsHigh); !graphtest.Within(got, want, 1e-15) {
			t.Errorf("ε_high=%v: ℓ = %v, want %v", c.epsHigh, got, want)
		}
	}
}

// Two-sided clipping (INTELLECT-2, TRL delta) by hand, ε = 0.2, δ = 2:
//
//	ρ    A    standard −min(ρA, clip(ρ)A)        two-sided −min(min(ρ,δ)A, clip(ρ)A)
//	3   +1    −min(3, 1.2)   = −1.2, ∂ = 0        −min(2, 1.2)    = −1.2, ∂ = 0
//	3   −1    −min(−3, −1.2) =  3,   −∂ℓ/∂ρ = −1  −min(−2, −1.2)  =  2,   ∂ = 0  (capped)
//	1.5 −1    −min(−1.5, −1.2) = 1.5, −∂ℓ/∂ρ = −1  same (ρ < δ)
//	0.5 −1    −min(−0.5, −0.8) = 0.8, ∂ = 0       same
//	0.5 +1    −min(0.5, 0.8) = −0.5, −∂ℓ/∂ρ = 1   same
func TestTwoSidedClippedSurrogate_HandCheck(t *testing.T) {
	ratios := [][]float64{{3, 3, 1.5, 0.5, 0.5}}
	adv := [][]float64{{1, -1, -1, -1, 1}}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		two := rl.TwoSidedClippedSurrogate(in[0], in[1], 0.2, 0.2, 2)
		std := rl.ClippedSurrogate(in[0], in[1], 0.2, 0.2)
		return []*Node{two, Neg(Gradient(ReduceAllSum(two), in[0])[0]), std, Neg(Gradient(ReduceAllSum(std), in[0])[0])}
	}, ratios, adv)
	for _, c := range []struct {
		name       string
		got, wantV []float64
	}{
		{"two-sided ℓ", out[0], []float64{-1.2, 2, 1.5, 0.8, -0.5}},
		{"two-sided −∂ℓ/∂ρ", out[1], []float64{0, 0, -1, 0, 1}},
		{"standard ℓ", out[2], []float64{-1.2, 3, 1.5, 0.8, -0.5}},
		{"standard −∂ℓ/∂ρ", out[3], []float64{0, -1, -1, 0, 1}},
	} {
		for i, want := range c.wantV {
			if !graphtest.Within(c.got[i], want, 1e-15) {
				t.Errorf("%s at ρ=%v A=%v: got %v, want %v", c.name, ratios[0][i], adv[0][i], c.got[i], want)
			}
		}
	}

}

// Per-token advantages (PPO with GAE, phase 9): the gradient w.r.t. log ρ is rl.PPOClipTerm's
// coefficient on a grid that includes the exact bounds, where Python's min keeps the unclipped term.
func TestClippedSurrogate_PerTokenMatchesPPOClipTerm(t *testing.T) {
	ratios := [][]float64{{0.5, 0.8, 1.0, 1.2, 1.5}, {0.5, 0.8, 1.0, 1.2, 1.5}, {0.7, 0.9, 1.1, 1.3, 1.0}}
	adv := [][]float64{{1, 1, 1, 1, 1}, {-1, -1, -1, -1, -1}, {0.3, -2, 0, 0.4, -0.1}}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		logRatio := Log(in[0])
		loss := ReduceAllSum(rl.ClippedSurrogate(Exp(logRatio), in[1], 0.2, 0.2))
		return []*Node{Neg(Gradient(loss, logRatio)[0]), rl.ClippedSurrogate(in[0], in[1], 0.2, 0.2)}
	}, ratios, adv)
	for i := range ratios {
		for j := range ratios[i] {
			obj, coef := rl.PPOClipTerm(ratios[i][j], adv[i][j], 0.2)
			k := i*len(ratios[i]) + j
			if got := out[0][k]; !graphtest.Within(got, coef, 1e-15) {
				t.Errorf("ρ=%v A=%v: −∂ℓ/∂log ρ = %v, PPOClipTerm coefficient %v", ratios[i][j], adv[i][j], got, coef)
			}
			if got := -out[1][k]; !graphtest.Within(got, obj, 1e-15) {
				t.Errorf("ρ=%v A=%v: −ℓ = %v, PPOClipTerm objective %v", ratios[i][j], adv[i][j], got, obj)
			}
		}
	}
}
