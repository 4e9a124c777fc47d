package grpo

import (
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/trainers/engine/graphtest"
)

// entropyMask evaluates HighEntropyMask and its threshold τ on float32 entropies.
func entropyMask(t *testing.T, entropy [][]float32, mask [][]float32, topQuantile float64) (tau float64, keep []float64) {
	t.Helper()
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		return []*Node{
			MaskedQuantile(in[0], in[1], 1-topQuantile),
			ConvertDType(HighEntropyMask(in[0], in[1], topQuantile), dtypes.Float32),
		}
	}, entropy, mask)
	return out[0][0], out[1]
}

// TRL's GetHighEntropyMaskTester cases (tests/test_grpo_trainer.py; threshold = 1 − ρ), with τ by
// hand: r = q·(n−1), τ = lerp(s[⌊r⌋], s[⌈r⌉], r − ⌊r⌋) over the n unpadded entropies sorted.
func TestHighEntropyMask_TRLCases(t *testing.T) {
	e := [][]float32{{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, {0.7, 0.8, 0.9, 1.0, 1.1, 1.2}}
	m := [][]float32{{1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0}} // 1.1, 1.2 are padding: not in the quantile
	e1 := [][]float32{{0.1, 0.2, 0.3, 1.4, 0.5, 0.14}, {0.5, 0.6, 0.7, 0.8, 0.9, 1.0}}
	m1 := [][]float32{{1, 1, 1, 1, 0, 0}, {1, 1, 1, 1, 0, 0}}
	for _, c := range []struct {
		name          string
		entropy, mask [][]float32
		rho, tau      float64
		keep          []float64
	}{
		// n = 10, q = 0.8: r = 7.2, lerp(0.8, 0.9, 0.2) = 0.8 + 0.2·0.1 = 0.82 (w < 0.5 branch).
		{"q0.8", e, m, 0.2, 0.82, []float64{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0}},
		// sorted 0.1 0.2 0.3 0.5 0.6 0.7 0.8 1.4, q = 0.8: r = 5.6, 0.8 − 0.1·0.4 = 0.76 (w ≥ 0.5).
		{"q0.8-other", e1, m1, 0.2, 0.76, []float64{0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0}},
		// q = 0.5: r = 4.5, w = 0.5 takes the second form: 0.6 − 0.1·0.5 = 0.55.
		{"q0.5", e, m, 0.5, 0.55, []float64{0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0}},
		// q = 0: the minimum, every unpadded token stays.
		{"q0", e, m, 1, 0.1, []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
		// q = 1: the maximum, 1.0; only that token.
		{"q1", e, m, 0, 1.0, []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0}},
	} {
		tau, keep := entropyMask(t, c.entropy, c.mask, c.rho)
		if !graphtest.Within(tau, c.tau, 1e-6) {
			t.Errorf("%s: τ = %v, want %v", c.name, tau, c.tau)
		}
		for i, want := range c.keep {
			if keep[i] != want {
				t.Errorf("%s: keep = %v, want %v", c.name, keep, c.keep)
				break
			}
		}
	}
}

// A hand check off TRL's grid, plus the edges: a padded token with the largest entropy neither
// moves τ nor is kept; ties at τ are kept (H ≥ τ); no completion token keeps nothing.
func TestHighEntropyMask_InterpolationTiesEmpty(t *testing.T) {
	// ρ = 0.3 → q = 0.7; unpadded 0.3 1.7 0.9 2.5 1.1 sorted 0.3 0.9 1.1 1.7 2.5; r = 0.7·4 = 2.8:
	// τ = s[3] − (s[3] − s[2])·(1 − 0.8) = 1.7 − 0.6·0.2 = 1.58 → keep 1.7 and 2.5.
	tau, keep := entropyMask(t, [][]float32{{0.3, 1.7, 0.9}, {2.5, 1.1, 9.0}}, [][]float32{{1, 1, 1}, {1, 1, 0}}, 0.3)
	if !graphtest.Within(tau, 1.58, 1e-6) {
		t.Errorf("τ = %v, want 1.58", tau)
	}
	if want := []float64{0, 1, 0, 1, 0, 0}; !slices.Equal(keep, want) {
		t.Errorf("keep = %v, want %v", keep, want)
	}
	// Ties: 1 1 1 2, ρ = 0.5: r = 1.5 between two 1s → τ = 1, all four kept.
	tau, keep = entropyMask(t, [][]float32{{1, 1}, {1, 2}}, [][]float32{{1, 1}, {1, 1}}, 0.5)
	if tau != 1 || !slices.Equal(keep, []float64{1, 1, 1, 1}) {
		t.Errorf("ties: τ = %v, keep = %v; want τ = 1 and every token", tau, keep)
	}
	// All padding: nothing kept (TRL returns an all-False mask); τ is not a number.
	tau, keep = entropyMask(t, [][]float32{{0.5, 0.7}}, [][]float32{{0, 0}}, 0.2)
	if !slices.Equal(keep, []float64{0, 0}) || !(math.IsNaN(tau) || math.IsInf(tau, 1)) {
		t.Errorf("empty: τ = %v, keep = %v; want no token", tau, keep)
	}
}

// In the loss the mask multiplies the clipped term only: β·k3 stays on every completion token and
// the aggregation still divides by all of them (TRL: per_token_loss * entropy_mask, then + β·KL,
// then the completion_mask aggregation).
func TestGRPOLoss_EntropyMaskScalesSurrogateOnly(t *testing.T) {
	logps := [][]float64{{math.Log(0.5), math.Log(0.25)}}
	ref := [][]float64{{math.Log(0.25), math.Log(0.25)}}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		inputs := Inputs{LogProbs: in[0], OldLogProbs: StopGradient(in[0]), RefLogProbs: in[1], Mask: OnesLike(in[0]),
			Advantages: in[2], EntropyMask: in[3]}
		l, _ := Loss(inputs, Params{EpsLow: 0.2, EpsHigh: 0.2, Beta: 0.1}, TokenRatio, BNPOMean)
		return []*Node{l, Neg(Gradient(l, in[0])[0])}
	}, logps, ref, []float64{2}, [][]float64{{0, 1}})
	// ρ = 1: token 0 masked → ℓ_0 = β·k3(0.5 vs 0.25) = 0.1·(0.5 − ln 0.5 − 1); token 1: −2 + 0.
	k3 := 0.5 - math.Log(0.5) - 1
	if got, want := out[0][0], (0.1*k3-2)/2; !graphtest.Within(got, want, 1e-12) {
		t.Errorf("loss = %v, want (β·k3 − A)/2 = %v", got, want)
	}
	// −∂L/∂logp: token 0 only the KL's −β(1 − π_ref/π)/2 = −0.1·0.5/2; token 1 A/2 = 1.
	for i, want := range []float64{-0.1 * 0.5 / 2, 1} {
		if got := out[1][i]; !graphtest.Within(got, want, 1e-12) {
			t.Errorf("token %d: −∂L/∂logp = %v, want %v", i, got, want)
		}
	}
}
