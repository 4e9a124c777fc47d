package decoder

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// LogitSums returns s[b,t] = Σ_v Logits(hidden[b,t])[v] [B,S] float32, the logits summed over the
// vocabulary, without computing them: the LM head has no bias, so Σ_v h·W_v = h·(Σ_v W_v), one
// dot product of hidden [B,S,D] with the head's rows summed over V ([D], in float32). This is what
// TRL's logits/chosen and logits/rejected metrics reduce, at the cost of one [V,D] column sum
// instead of a [B,S,V] tensor (1.2 GB at 2048 tokens for Qwen's V = 151,936).
func LogitSums(ctx *context.Context, cfg *Config, hidden *Node) *Node {
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

// TargetLogitSums is LogitSums aligned as TargetLogProbs: s[b,t] = Σ_v logits[b,t-1,v] for t ≥ 1
// (the logits that score token t), 0 at t = 0; hidden [B,S,D] → [B,S] float32.
func TargetLogitSums(ctx *context.Context, cfg *Config, hidden *Node) *Node {
	b, s := hidden.Shape().Dim(0), hidden.Shape().Dim(1)
	first := Zeros(hidden.Graph(), shapes.Make(dtypes.Float32, b, 1))
	if s == 1 {
		return first
	}
	prev := Slice(LogitSums(ctx, cfg, hidden), AxisRange(), AxisRange(0, s-1)) // [B,S-1]: scores t+1
	return Concatenate([]*Node{first, prev}, 1)                                // [B,S]
}
