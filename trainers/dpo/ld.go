package dpo

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/posttrain/posttrain/trainers/engine/tokenmask"
)

// LDLogProbs are the policy's length-desensitised sequence log-probs of LD-DPO (Liu et al. 2024,
// "Length Desensitization in Directed Preference Optimization", arXiv:2409.06411; TRL DPOConfig
// ld_alpha), exactly as TRL v0.24's concatenated_forward computes them (the reference's are not
// changed, TRL's `is_ref_model`): the public part, up to the shorter completion's length l_p =
// min(l_w, l_l), counts fully and the rest is scaled by α,
//
//	log π̃(y) = Σ_{t < l_p, t < l} m_t·lp_t + α·Σ_{l_p ≤ t < l} m_t·lp_t,   l = Σ_t m_t of the row
//
// where t is TRL's column index in the left-flushed row [prompt, completion, padding] (posttrain's
// row layout), counted from the row's first token, not from the completion's: TRL compares
// `torch.arange(seq_len)` with the completion lengths. So completion tokens in columns ≥ l are
// dropped, and a row whose prompt is at least as long as its completion gets 0 (TRL v0.24's rule,
// copied). logps, scored [2B,T] (chosen rows first, then the rejected rows of the same pairs;
// logps[t] scores token t) → [2B]. TRL replaces all_logps by this sum even when ipo
// length-normalises the others.
func LDLogProbs(logps, scored *Node, alpha float64) *Node {
	g := logps.Graph()
	n, t := logps.Shape().Dim(0), logps.Shape().Dim(1)
	b := n / 2
	in := tokenmask.BoolMask(scored)
	lens := ReduceSum(ConvertDType(in, dtypes.Int32), 1)                      // [2B]: l
	public := Min(Slice(lens, AxisRange(0, b)), Slice(lens, AxisRange(b, n))) // [B]: l_p
	public = Concatenate([]*Node{public, public}, 0)                          // [2B]
	col := Iota(g, shapes.Make(dtypes.Int32, n, t), 1)                        // [2B,T]: t
	perRow := func(x *Node) *Node { return BroadcastToDims(Reshape(x, n, 1), n, t) }
	inRow := LessThan(col, perRow(lens))
	isPublic := LessThan(col, perRow(public))
	lp := tokenmask.Masked(logps, in) // TRL zeroes per_token_logps off the completion
	front := tokenmask.SeqSum(lp, LogicalAnd(isPublic, inRow))
	rear := tokenmask.SeqSum(lp, LogicalAnd(LogicalNot(isPublic), inRow))
	return Add(front, MulScalar(rear, alpha))
}
