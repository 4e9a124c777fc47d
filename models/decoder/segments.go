package decoder

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Packed rows: several sequences laid end to end in one row, told apart by segment ids
// seg [B,S] int32 (1, 2, … per sequence, 0 = padding). Attending only within a segment, with
// positions restarting at 0 in each, gives every sequence exactly the hidden states it has alone:
// what HF's flash-attention varlen path computes from position ids that restart (TRL's padding-free
// packing). A row with one segment is ordinary causal attention over the whole row (TRL's
// "wrapped" packing).

// SegmentMask is causal attention restricted to the query's own sequence: seg [B,S] → allowed
// [B,S,S] bool, allowed[b,q,k] = k ≤ q ∧ seg[b,q] = seg[b,k] ≠ 0. A padding query attends to
// nothing (its softmax is uniform over masked scores and never reaches a real token).
func SegmentMask(seg *Node) *Node {
	b, s := seg.Shape().Dim(0), seg.Shape().Dim(1)
	causal := BroadcastToDims(ExpandAxes(LowerTriangular(seg.Graph(), s), 0), b, s, s) // [B,S,S]
	q := BroadcastToDims(Reshape(seg, b, s, 1), b, s, s)                               // seg[b,q]
	k := BroadcastToDims(Reshape(seg, b, 1, s), b, s, s)                               // seg[b,k]
	same := LogicalAnd(Equal(q, k), NotEqual(k, ZerosLike(k)))
	return LogicalAnd(causal, same) // [B,S,S]
}

// HiddenSegments is Hidden for packed rows: ids, pos (restarting per sequence, SegmentPositionIDs)
// and seg [B,S] → hidden states [B,S,D].
func HiddenSegments(ctx *context.Context, cfg *Config, ids, pos, seg *Node) *Node {
	return Decoder(ctx, cfg, ids, pos, SegmentMask(seg), nil)
}

// TokenLogProbsSegments is TokenLogProbs for packed rows: lp[b,t] = log p(ids[b,t] | the tokens
// of its own sequence before t) [B,S] float32. At a sequence's first token the value is the
// previous sequence's prediction of it, which no loss should count (SegmentScored).
func TokenLogProbsSegments(ctx *context.Context, cfg *Config, ids, pos, seg *Node) *Node {
	return TargetLogProbs(ctx, cfg, HiddenSegments(ctx, cfg, ids, pos, seg), ids)
}
