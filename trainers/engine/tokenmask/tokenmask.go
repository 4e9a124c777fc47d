// Package tokenmask holds the masked token reductions every loss in trainers/ is written with:
// a sequence's sum or mean over its completion tokens, the mean over all of a batch's tokens, and
// the masking that keeps −∞ and padding garbage out of both the values and the gradients.
package tokenmask

import (
	"slices"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
)

// Token tensors, as every loss in trainers/ receives them:
//
//	logps [B,T] float: log π(y_t | x, y<t) of the token actually in the sequence
//	mask  [B,T] bool or 0/1 float: true on completion tokens, false on prompt and padding
//
// Masked positions may hold anything (−∞ from a masked softmax, garbage from padding): every helper
// below zeroes them with Where before any arithmetic, so neither the value nor the gradient can turn
// into NaN there.

// BoolMask returns mask as a Bool tensor (a float mask is true where it is non-zero).
func BoolMask(mask *Node) *Node {
	if mask.DType() == dtypes.Bool {
		return mask
	}
	return NotEqual(mask, ZerosLike(mask))
}

// FloatMask returns mask as 0/1 in dtype.
func FloatMask(mask *Node, dtype dtypes.DType) *Node {
	return ConvertDType(BoolMask(mask), dtype)
}

// Masked returns x with the positions where mask is false set to 0 (shapes equal, or mask a prefix
// of x's shape). The gradient to x at those positions is exactly 0.
func Masked(x, mask *Node) *Node {
	m := BoolMask(mask)
	if !slices.Equal(m.Shape().Dimensions, x.Shape().Dimensions) {
		m = BroadcastToDims(m, x.Shape().Dimensions...)
	}
	return Where(m, x, ZerosLike(x))
}

// TokenCount returns Σ mask over the last axis, [B,T] → [B], in x's dtype, without gradient.
func TokenCount(mask *Node, dtype dtypes.DType) *Node {
	return StopGradient(ReduceSum(FloatMask(mask, dtype), -1))
}

// SeqSum returns Σ_t x[b,t]·mask[b,t], [B,T] → [B]. On log-probs: log π(y|x) of each sequence (식 (8.1)).
func SeqSum(x, mask *Node) *Node {
	return ReduceSum(Masked(x, mask), -1)
}

// SeqMean returns the per-sequence mean over the masked tokens, [B,T] → [B]; a sequence with no
// token gives 0 (its count is clamped to 1, as TRL's `mask.sum(-1).clamp(min=1.0)`).
func SeqMean(x, mask *Node) *Node {
	return Div(SeqSum(x, mask), MaxScalar(TokenCount(mask, x.DType()), 1))
}

// TokenMean returns the mean of x over every masked token of the batch, [B,T] → scalar; the count
// is clamped to 1 (TRL's `masked_batch_mean`).
func TokenMean(x, mask *Node) *Node {
	count := StopGradient(ReduceAllSum(FloatMask(mask, x.DType())))
	return Div(ReduceAllSum(Masked(x, mask)), MaxScalar(count, 1))
}
