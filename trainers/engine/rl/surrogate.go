package rl

import (
	"slices"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
)

// The clipped surrogate is the one graph of this package: GRPO's and PPO's policy loss
// (trainers/grpo, trainers/ppo) and the extras' PPO on CartPole (toy/gymrl) all take it from here;
// PPOClipTerm is its float64 form for the course's host-side updates.

// ClippedSurrogate is PPO's clipped objective as a per-token loss (식 (7.2), (11.2)):
//
//	ℓ_t = −min(ρ_t·A, clip(ρ_t, 1−ε_low, 1+ε_high)·A)
//
// ratio [B,T] or [B,1]; advantages [B] (one per sequence, GRPO) or [B,T] (per token, PPO with
// GAE) → [B,T'] with T' the larger last dimension. min is Python's min(unclipped, clipped): the
// clipped term only when strictly smaller, so the gradient is exactly the course's coefficient
// (rl.PPOClipTerm): 0 when clipped (A > 0 and ρ > 1+ε_high, or A < 0 and ρ < 1−ε_low), else
// −A·∂ρ, ties included (ρ = 1 at the first update takes the unclipped branch).
func ClippedSurrogate(ratio, advantages *Node, epsLow, epsHigh float64) *Node {
	rho, a := broadcastRatio(ratio, advantages)
	return minSurrogate(rho, clipRatio(rho, epsLow, epsHigh), a)
}

// TwoSidedClippedSurrogate is INTELLECT-2's two-sided clipping (Prime Intellect 2025,
// arXiv:2505.07291; TRL GRPOConfig delta, grpo_trainer.py _compute_loss "Two-sided clipping"): the
// unclipped term's ratio is capped at δ before the min,
//
//	ℓ_t = −min(min(ρ_t, δ)·A, clip(ρ_t, 1−ε_low, 1+ε_high)·A)      (δ > 1+ε_high)
//
// For A ≥ 0 nothing changes (the clipped term is already the smaller one above 1+ε_high). For
// A < 0 and ρ > δ the loss is −δ·A with zero gradient instead of −ρ·A growing with ρ: a token
// whose probability rose a lot under a negative advantage can no longer dominate the update.
// Shapes as ClippedSurrogate.
func TwoSidedClippedSurrogate(ratio, advantages *Node, epsLow, epsHigh, delta float64) *Node {
	rho, a := broadcastRatio(ratio, advantages)
	return minSurrogate(MinScalar(rho, delta), clipRatio(rho, epsLow, epsHigh), a)
}

// broadcastRatio brings the ratio ([B,T] or [B,1]) and the detached advantages ([B] or [B,T]) to
// one shape [B,T'].
func broadcastRatio(ratio, advantages *Node) (rho, a *Node) {
	a = ConvertDType(StopGradient(advantages), ratio.DType())
	if a.Rank() == 1 {
		a = InsertAxes(a, -1) // [B] → [B,1]
	}
	dims := slices.Clone(ratio.Shape().Dimensions)
	dims[1] = max(dims[1], a.Shape().Dimensions[1])
	return BroadcastToDims(ratio, dims...), BroadcastToDims(a, dims...)
}

// clipRatio is clip(ρ, 1−ε_low, 1+ε_high).
func clipRatio(rho *Node, epsLow, epsHigh float64) *Node {
	return MinScalar(MaxScalar(rho, 1-epsLow), 1+epsHigh)
}

// minSurrogate is −min(unclipped·A, clipped·A), the clipped term only when strictly smaller.
func minSurrogate(unclippedRatio, clippedRatio, a *Node) *Node {
	clipped := Mul(clippedRatio, a)
	unclipped := Mul(unclippedRatio, a)
	return Neg(Where(LessThan(clipped, unclipped), clipped, unclipped))
}
