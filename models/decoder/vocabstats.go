package decoder

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// LogSumSquaredProbs returns q[b,t] = log Σ_v p(v | hidden[b,t])² [B,S] float32, the log of the
// collision probability of the next-token distribution, computed as TRL's WPO does,
// `torch.logsumexp(2 * log_softmax(logits), dim=-1)`, on chunk positions' logits [B,chunk,V] at a
// time (never the whole [B,S,V]). No gradient flows through it (TRL computes it under no_grad).
func LogSumSquaredProbs(ctx *context.Context, cfg *Config, hidden *Node, chunk int) *Node {
	var parts []*Node
	ForEachChunk(StopGradient(hidden), chunk, func(_, _ int, h *Node) {
		x := MulScalar(LogSoftmax(Logits(ctx, cfg, h), -1), 2) // [B,c,V]: log p²
		top := StopGradient(ReduceAndKeep(x, ReduceMax, -1))   // [B,c,1]
		sum := ReduceSum(Exp(Sub(x, top)), -1)                 // [B,c]
		parts = append(parts, Add(Log(sum), Squeeze(top, -1))) // [B,c]
	})
	if len(parts) == 1 {
		return StopGradient(parts[0])
	}
	return StopGradient(Concatenate(parts, 1)) // [B,S]
}

// TargetLogSumSquaredProbs is LogSumSquaredProbs aligned as TargetLogProbs: q[b,t] = log Σ_v
// p(v | ids[b,<t])² for t ≥ 1 (the distribution that scores token t), 0 at t = 0; hidden [B,S,D]
// → [B,S] float32, chunked by ChunkLen.
func TargetLogSumSquaredProbs(ctx *context.Context, cfg *Config, hidden *Node) *Node {
	b, s := hidden.Shape().Dim(0), hidden.Shape().Dim(1)
	first := Zeros(hidden.Graph(), shapes.Make(dtypes.Float32, b, 1))
	if s == 1 {
		return first
	}
	h := Slice(StopGradient(hidden), AxisRange(), AxisRange(0, s-1)) // [B,S-1,D]: scores t+1
	q := LogSumSquaredProbs(ctx, cfg, h, cfg.ChunkLen(b, s-1))
	return Concatenate([]*Node{first, q}, 1) // [B,S]
}
