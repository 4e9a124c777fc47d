package decoder

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// LogitSums returns s[b,t] = Σ_v Logits(hidden[b,t])[v] [B,S] float32 from hidden [B,S,D], the
// logits summed over the vocabulary: what TRL's logits/chosen and logits/rejected metrics reduce.
// It is a metric: hidden is detached (StopGradient), so no gradient flows through it and the
// backward pass does not grow.
//
// Without a final soft cap the logits z_v = h·W_v are linear in the LM head, which has no bias, so
//
//	Σ_v z_v = h·(Σ_v W_v)
//
// one dot product of hidden with the head's rows summed over V ([D], in float32): one [V,D]
// column sum instead of a [B,S,V] tensor (1.2 GB at 2048 tokens for Qwen's V = 151,936).
// Gemma 3 with final_logit_softcapping c logs the capped logits, which are not linear,
//
//	Σ_v c·tanh(z_v/c)
//
// so they are computed (Logits caps them) ChunkLen positions at a time, as TargetLogProbs does,
// and summed in float32 per position; only [B,chunk,V] of them exist at once.
func LogitSums(ctx *context.Context, cfg *Config, hidden *Node) *Node {
	hidden = StopGradient(hidden)
	if cfg.Gemma != nil && cfg.Gemma.FinalLogitSoftcapping != 0 {
		return cappedLogitSums(ctx, cfg, hidden)
	}
	var w *Node
	if cfg.TieWordEmbeddings {
		w = embedding(ctx.Reuse().In("model"), cfg, hidden.Graph())
	} else {
		w = weight(ctx.Reuse().In("lm_head"), hidden.Graph(), "weight", hidden.DType(), cfg.VocabSize, cfg.HiddenSize)
	}
	colSum := ExpandAxes(ReduceSum(ConvertDType(w, dtypes.Float32), 0), -1) // [D,1]
	h := ConvertDType(hidden, dtypes.Float32)                               // [...,D]
	sums := DotGeneral(h, []int{h.Rank() - 1}, nil, colSum, []int{0}, nil)  // [...,1]
	return Reshape(sums, h.Shape().Dimensions[:h.Rank()-1]...)              // [...]
}

// cappedLogitSums is LogitSums from the soft-capped logits: s[b,t] = Σ_v c·tanh(z[b,t,v]/c)
// [B,S] float32, materializing [B,chunk,V] logits at a time (the chunks of HeadLogProbs).
func cappedLogitSums(ctx *context.Context, cfg *Config, hidden *Node) *Node {
	b, s := hidden.Shape().Dim(0), hidden.Shape().Dim(1)
	var parts []*Node
	ForEachChunk(hidden, cfg.ChunkLen(b, s), func(_, _ int, h *Node) {
		parts = append(parts, ReduceSum(Logits(ctx, cfg, h), -1)) // [B,c,V] capped, float32 → [B,c]
	})
	if len(parts) == 1 {
		return parts[0]
	}
	return Concatenate(parts, 1) // [B,S]
}

// TargetLogitSums is LogitSums aligned as TargetLogProbs: s[b,t] = Σ_v logits[b,t-1,v] for t ≥ 1
// (the logits that score token t), 0 at t = 0; hidden [B,S,D] → [B,S] float32, detached.
func TargetLogitSums(ctx *context.Context, cfg *Config, hidden *Node) *Node {
	b, s := hidden.Shape().Dim(0), hidden.Shape().Dim(1)
	first := Zeros(hidden.Graph(), shapes.Make(dtypes.Float32, b, 1))
	if s == 1 {
		return first
	}
	// The sums of every position, then sliced: the same graph as LogitSums, so XLA rounds each
	// position as it does there (slicing the hidden states first changed its fusion and the last bits).
	prev := Slice(LogitSums(ctx, cfg, hidden), AxisRange(), AxisRange(0, s-1)) // [B,S-1]: scores t+1
	return Concatenate([]*Node{first, prev}, 1)                                // [B,S]
}
