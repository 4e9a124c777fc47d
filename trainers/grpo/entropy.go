package grpo

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/posttrain/posttrain/trainers/engine/tokenmask"
)

// HighEntropyMask is TRL's top_entropy_quantile ρ (Wang et al. 2025, "Beyond the 80/20 Rule",
// arXiv:2506.01939; GRPOTrainer.get_high_entropy_mask, called from _compute_loss with threshold
// 1 − ρ): only the completion tokens whose entropy reaches the (1−ρ) quantile of the entropies of
// this micro-batch's completion tokens keep their policy-gradient term,
//
//	τ = quantile_{1−ρ}({H_t : mask_t}),   keep_t = mask_t ∧ H_t ≥ τ,   ℓ_t ← keep_t·ℓ_t
//
// entropy, mask [B,T] (mask bool or 0/1) → bool [B,T]. ρ = 0.2 keeps the top 20% (the paper's
// choice); ρ = 0 keeps only the highest-entropy token(s); with no completion token nothing is kept.
// The quantile is MaskedQuantile's (torch.quantile, linear interpolation).
func HighEntropyMask(entropy, mask *Node, topQuantile float64) *Node {
	valid := BroadcastToDims(tokenmask.BoolMask(mask), entropy.Shape().Dimensions...)
	tau := MaskedQuantile(entropy, valid, 1-topQuantile)
	keep := GreaterOrEqual(entropy, BroadcastToDims(tau, entropy.Shape().Dimensions...))
	return LogicalAnd(keep, valid)
}

// MaskedQuantile is torch.quantile(x[mask], q) with its default linear interpolation, in x's
// dtype as torch computes it for a float32 tensor and a Python float q: with s the n selected
// values sorted ascending,
//
//	r = q·(n−1),  lo = s[⌊r⌋],  hi = s[⌈r⌉],  w = r − ⌊r⌋
//	quantile = w < 0.5 ? lo + w·(hi − lo) : hi − (hi − lo)·(1 − w)      (torch.lerp)
//
// x, mask of one shape (mask bool or 0/1) → a scalar; +Inf or NaN when nothing is selected. GoMLX
// has no sort, so s[k] is found by counting: s[k] = min{x_i : #{j : x_j ≤ x_i} ≥ k+1}, an
// [N,N] comparison for N = x's size (a micro-batch's B·T; XLA fuses it into one reduction).
func MaskedQuantile(x, mask *Node, q float64) *Node {
	g, dt, n := x.Graph(), x.DType(), x.Shape().Size()
	flat := StopGradient(Reshape(x, n))
	valid := Reshape(tokenmask.BoolMask(mask), n)
	square := func(v *Node, axis int) *Node { return BroadcastToDims(InsertAxes(v, axis), n, n) }
	// atMost[i] = #{j selected : x_j ≤ x_i}, the 1-based rank of x_i's last tie.
	le := LogicalAnd(LessOrEqual(square(flat, 0), square(flat, 1)), square(valid, 0)) // [i,j]: x_j ≤ x_i
	atMost := ReduceSum(ConvertDType(le, dtypes.Int32), 1)                            // [N]
	// orderStat is s[k], k an int32 scalar, 0-based.
	orderStat := func(k *Node) *Node {
		ok := LogicalAnd(valid, GreaterOrEqual(atMost, AddScalar(k, 1)))
		return ReduceAllMin(Where(ok, flat, BroadcastToDims(Infinity(g, dt, 1), n)))
	}
	count := ReduceAllSum(ConvertDType(valid, dtypes.Int32))
	r := Mul(Scalar(g, dt, q), ConvertDType(AddScalar(count, -1), dt)) // float32(q)·(n−1), as torch
	below := Floor(r)
	w := Sub(r, below)
	lo := orderStat(ConvertDType(below, dtypes.Int32))
	hi := orderStat(ConvertDType(Ceil(r), dtypes.Int32))
	d := Sub(hi, lo)
	small := Add(lo, Mul(w, d))
	large := Sub(hi, Mul(d, OneMinus(w)))
	return Where(LessThan(Abs(w), Scalar(g, dt, 0.5)), small, large)
}
