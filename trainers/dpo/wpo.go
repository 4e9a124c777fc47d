package dpo

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/posttrain/posttrain/trainers/engine/tokenmask"
)

// WPOWeights are the per-pair weights of WPO (Zhou et al. 2024, "WPO: Enhancing RLHF with Weighted
// Preference Optimization", arXiv:2406.11827, eq. 2; TRL use_weighting), exactly as TRL v0.24's
// concatenated_forward computes them, without gradient:
//
//	w(y) = Σ_t m_t·m_{t+1}·lp_t / n  −  Σ_t m_t·q_t / n,   n = Σ_t m_t
//	weight = min(exp(w(y_w) + w(y_l)), 1)
//
// where lp_t = log π(y_t | …) scores token t, q_t = log Σ_v π(v | …)² is the log collision
// probability of the distribution that scores token t (decoder.TargetLogSumSquaredProbs), and m the
// completion mask. The m_{t+1} on lp is TRL's: its per-token log-probs are already rolled one
// position right when it subtracts `logsumexp(2·logprobs)` at the unrolled positions and applies
// the unrolled loss mask, so the log-prob term covers the completion's tokens but the last (and
// pairs lp_t with the q of token t+1 in the sum), while the q term covers all of them. lp, q,
// scored [2B,T], chosen rows first → [B]. n is clamped to 1 (TRL: NaN for a row with no completion).
func WPOWeights(lp, q, scored *Node) *Node {
	lp, q = StopGradient(lp), StopGradient(q)
	n, t := lp.Shape().Dim(0), lp.Shape().Dim(1)
	m := tokenmask.FloatMask(scored, lp.DType())
	zero := Zeros(lp.Graph(), shapes.Make(lp.DType(), n, 1))
	next := Concatenate([]*Node{Slice(m, AxisRange(), AxisRange(1, t)), zero}, 1) // m_{t+1}
	logps := ReduceSum(Mul(tokenmask.Masked(lp, scored), next), 1)                // [2B]
	adjust := ReduceSum(tokenmask.Masked(ConvertDType(q, lp.DType()), scored), 1) // [2B]
	w := Div(Sub(logps, adjust), MaxScalar(ReduceSum(m, 1), 1))                   // [2B]
	b := n / 2
	return StopGradient(MinScalar(Exp(Add(Slice(w, AxisRange(0, b)), Slice(w, AxisRange(b, n)))), 1))
}

// Weighted is TRL get_batch_loss_metrics with use_weighting: the per-pair loss (CombinePairs, plus
// rpo_alpha·NLL) times the pair's WPOWeights, then the mean over the B pairs:
//
//	L = mean_b weight_b·(Σ_i w_i·L_ib + α·NLL)
func Weighted(perPair, weights *Node) *Node {
	return ReduceAllMean(Mul(perPair, ConvertDType(weights, perPair.DType())))
}
