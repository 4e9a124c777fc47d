package grpo

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/posttrain/posttrain/trainers/engine/graphtest"
	"github.com/posttrain/posttrain/trainers/engine/tokenmask"
)

// TRL 1.x's surrogates, per token, against their derivatives by hand (float64): with L = Σ_t m_t·ℓ_t,
//
//	cispo  −∂L/∂log π_t = min(ρ_t, c)·A          (the detached weight)
//	sapo   −∂L/∂log π_t = 4σ(1−σ)·A·ρ_t,  σ = σ(τ(ρ_t − 1)), τ by the sign of A
//	vespo  −∂L/∂log π_t = φ·A,  φ = e^λ w^k e^(−λw), w = exp Σ_t m_t (log π_t − log π_old,t)
func TestTRL1Surrogates_Gradients(t *testing.T) {
	logps := [][]float64{{-1.0, -0.5, -2.0}, {-0.3, -1.2, -0.8}}
	old := [][]float64{{-1.3, -0.2, -2.0}, {-0.3, -0.9, -1.9}}
	mask := [][]float64{{1, 1, 1}, {1, 1, 0}}
	adv := []float64{0.7, -1.1}
	sum := func(perToken, m *Node) *Node { return ReduceAllSum(tokenmask.Masked(perToken, m)) }
	vp := VESPOParams{KPos: 2, LambdaPos: 3, KNeg: 3, LambdaNeg: 2}
	for _, c := range []struct {
		name string
		p    Params
		want func(b, tok int, rho float64) float64
	}{
		{"cispo", Params{Surrogate: "cispo", EpsHigh: 1.2}, func(b, _ int, rho float64) float64 { return math.Min(rho, 1.2) * adv[b] }},
		{"sapo", Params{Surrogate: "sapo", SAPOTempPos: 1, SAPOTempNeg: 1.05}, func(b, _ int, rho float64) float64 {
			tau := 1.05
			if adv[b] > 0 {
				tau = 1
			}
			s := 1 / (1 + math.Exp(-tau*(rho-1)))
			return 4 * s * (1 - s) * adv[b] * rho
		}},
		{"vespo", Params{Surrogate: "vespo", VESPO: vp}, func(b, _ int, _ float64) float64 {
			logW := 0.0
			for tok := range logps[b] {
				logW += mask[b][tok] * (logps[b][tok] - old[b][tok])
			}
			k, l := vp.KPos, vp.LambdaPos
			if adv[b] < 0 {
				k, l = vp.KNeg, vp.LambdaNeg
			}
			return math.Exp(l+k*logW-l*math.Exp(logW)) * adv[b]
		}},
	} {
		out := graphtest.Eval(t, func(in []*Node) []*Node {
			l, _ := Loss(Inputs{LogProbs: in[0], OldLogProbs: in[1], Mask: in[2], Advantages: in[3]}, c.p, TokenRatio, sum)
			return []*Node{Neg(Gradient(l, in[0])[0])}
		}, logps, old, mask, adv)
		for b := range logps {
			for tok := range logps[b] {
				want := 0.0
				if mask[b][tok] != 0 {
					want = c.want(b, tok, math.Exp(logps[b][tok]-old[b][tok]))
				}
				if got := out[0][b*3+tok]; !graphtest.Within(got, want, 1e-12) {
					t.Errorf("%s: row %d token %d: −∂L/∂log π = %v, want %v", c.name, b, tok, got, want)
				}
			}
		}
	}
}
