package dpo

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/trainers/engine/graphtest"
)

func softplus(x float64) float64 { return math.Log1p(math.Exp(x)) }

// One pair with log π(y_w) = −1, log π(y_l) = −2, log π_ref(y_w) = −1.5, log π_ref(y_l) = −1:
// log-ratios c = ½, r = −1, margin m = 3/2; reference-free c' = −1, r' = −2, m' = 1.
// Each case is the type's loss through LossTypes (as Combine calls it) at β = 1, its logits by hand,
// and rewards/chosen, which TRL always computes against the real reference: β·c = ½.
func TestLogits_DivergencesAndReferenceFree(t *testing.T) {
	pc, pr, rc, rr := []float64{-1}, []float64{-2}, []float64{-1.5}, []float64{-1}
	cases := []struct {
		name string
		typ  string
		o    Params
		want float64 // the loss
	}{
		// reverse_kl (and forward_kl, which TRL v0.24 computes the same way): z = m = 3/2.
		{"reverse_kl", "sigmoid", Params{FDivergence: ReverseKL}, softplus(-1.5)},
		{"forward_kl", "sigmoid", Params{FDivergence: ForwardKL}, softplus(-1.5)},
		{"default", "sigmoid", Params{}, softplus(-1.5)},
		// js: z = m − (softplus(c) − softplus(r)) = 3/2 − softplus(½) + softplus(−1).
		{"js_divergence", "sigmoid", Params{FDivergence: JSDivergence}, softplus(-(1.5 - softplus(0.5) + softplus(-1)))},
		// α = 1: z = (e^{−α·r} − e^{−α·c})/α = e − e^{−½}.
		{"alpha_divergence α=1", "sigmoid", Params{FDivergence: AlphaDivergence, FAlphaCoef: 1}, softplus(-(math.E - math.Exp(-0.5)))},
		// α = ½: z = (e^{½} − e^{−¼})/½; hinge max(0, 1 − z) = 0 since z ≈ 1.74.
		{"alpha_divergence α=½ hinge", "hinge", Params{FDivergence: AlphaDivergence, FAlphaCoef: 0.5}, 0},
		{"alpha_divergence α=½ ipo", "ipo", Params{FDivergence: AlphaDivergence, FAlphaCoef: 0.5},
			math.Pow(2*(math.Exp(0.5)-math.Exp(-0.25))-0.5, 2)},
		// reference_free: z = m' = 1; js with c' = −1, r' = −2: z = 1 − softplus(−1) + softplus(−2).
		{"reference_free", "sigmoid", Params{ReferenceFree: true}, softplus(-1)},
		{"reference_free js", "sigmoid", Params{ReferenceFree: true, FDivergence: JSDivergence}, softplus(-(1 - softplus(-1) + softplus(-2)))},
		// apo_zero reads c', r': (1 − σ(−1)) + σ(−2).
		{"reference_free apo_zero", "apo_zero", Params{ReferenceFree: true}, 1 - sigmoid(-1) + sigmoid(-2)},
		// sppo_hard recomputes its log-ratios from the reference: (½ − ½)² + (−1 + ½)² = ¼, either way,
		// and ignores the divergence.
		{"sppo_hard", "sppo_hard", Params{}, 0.25},
		{"sppo_hard reference_free α", "sppo_hard", Params{ReferenceFree: true, FDivergence: AlphaDivergence, FAlphaCoef: 1}, 0.25},
	}
	for _, c := range cases {
		c.o.Beta = 1
		out := graphtest.Eval(t, func(in []*Node) []*Node {
			p := Pairs{PolicyChosen: in[0], PolicyRejected: in[1], RefChosen: in[2], RefRejected: in[3]}
			loss, m := Combine([]string{c.typ}, nil, p, c.o)
			return []*Node{loss, m.RewardsChosen}
		}, pc, pr, rc, rr)
		if !graphtest.Within(out[0][0], c.want, 1e-14) {
			t.Errorf("%s: loss = %.15g, want %.15g", c.name, out[0][0], c.want)
		}
		if out[1][0] != 0.5 {
			t.Errorf("%s: rewards/chosen = %v, want β·(log π − log π_ref) = 0.5 against the real reference", c.name, out[1][0])
		}
	}
}

// The js logits' gradient flows through the softplus terms: ∂z/∂log π(y_w) = 1 − σ(c) at c = ½,
// ∂z/∂log π(y_l) = −1 + σ(r) at r = −1; the α logits' through both exponentials:
// ∂z/∂log π(y_w) = e^{−α·c}, ∂z/∂log π(y_l) = −e^{−α·r}; and TRL's cap_exp keeps e^{−α·c} finite
// (exp(min(−α·c, 88.7228))) with zero gradient past the cap.
func TestLogits_GradientsAndCap(t *testing.T) {
	grads := func(o Params, pc, rc float64) (z, dc, dr float64) {
		out := graphtest.Eval(t, func(in []*Node) []*Node {
			z := Logits(Pairs{PolicyChosen: in[0], PolicyRejected: in[1], RefChosen: in[2], RefRejected: in[3]}, o)
			g := Gradient(ReduceAllSum(z), in[0], in[1])
			return []*Node{z, g[0], g[1]}
		}, []float64{pc}, []float64{-2}, []float64{rc}, []float64{-1})
		return out[0][0], out[1][0], out[2][0]
	}
	_, dc, dr := grads(Params{FDivergence: JSDivergence}, -1, -1.5)
	if !graphtest.Within(dc, 1-sigmoid(0.5), 1e-15) || !graphtest.Within(dr, -1+sigmoid(-1), 1e-15) {
		t.Errorf("js: ∂z = %v, %v; want %v, %v", dc, dr, 1-sigmoid(0.5), -1+sigmoid(-1))
	}
	_, dc, dr = grads(Params{FDivergence: AlphaDivergence, FAlphaCoef: 1}, -1, -1.5)
	if !graphtest.Within(dc, math.Exp(-0.5), 1e-15) || !graphtest.Within(dr, -math.E, 1e-15) {
		t.Errorf("alpha: ∂z = %v, %v; want e^{−½}, −e", dc, dr)
	}
	z, dc, _ := grads(Params{FDivergence: AlphaDivergence, FAlphaCoef: 1}, -200, 0) // −α·c = 200 > cap
	if want := math.E - math.Exp(ExpCap); z != want || dc != 0 {
		t.Errorf("alpha capped: z = %v, ∂z/∂c = %v; want e − e^88.7228 = %v, 0", z, dc, want)
	}
}
