package decoder

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// DefaultChunkElements bounds the logits computed at once by the chunked functions: B·chunk·V
// float32s (64 Mi elements = 256 MiB; Qwen's V = 151,936 at B = 8 gives 55 positions per chunk).
// Config.ChunkElements overrides it for one model.
const DefaultChunkElements = 64 << 20

// ChunkLen is the number of positions per chunk for a batch of b rows of s positions: at most
// ChunkElements (else DefaultChunkElements) logits at once.
func (c *Config) ChunkLen(b, s int) int {
	elements := c.ChunkElements
	if elements <= 0 {
		elements = DefaultChunkElements
	}
	return max(1, min(s, elements/max(1, b*c.VocabSize)))
}

// ForEachChunk calls fn with successive chunks hidden[:, start:end] [B,c,D] of hidden [B,S,D],
// chunk positions at a time. The slices are differentiable (gomlxfix's Slice gradient).
func ForEachChunk(hidden *Node, chunk int, fn func(start, end int, h *Node)) {
	s := hidden.Shape().Dim(1)
	for start := 0; start < s; start += chunk {
		end := min(s, start+chunk)
		fn(start, end, Slice(hidden, AxisRange(), AxisRange(start, end)))
	}
}

// HeadLogProbs returns lp[b,t] = log softmax(Logits(hidden[b,t]))[targets[b,t]] [B,S] float32,
// materializing only chunk positions' logits [B,chunk,V] at a time.
func HeadLogProbs(ctx *context.Context, cfg *Config, hidden, targets *Node, chunk int) *Node {
	targets = ConvertDType(targets, dtypes.Int32)
	var parts []*Node
	ForEachChunk(hidden, chunk, func(start, end int, h *Node) {
		lp, _ := CheckpointedChunk(h, func(h *Node) (*Node, []*Node) {
			lsm := LogSoftmax(Logits(ctx, cfg, h), -1)                                       // [B,c,V]
			return PickTargets(lsm, Slice(targets, AxisRange(), AxisRange(start, end))), nil // [B,c]
		})
		parts = append(parts, lp)
	})
	if len(parts) == 1 {
		return parts[0]
	}
	return Concatenate(parts, 1) // [B,S]
}

// PickTargets is x[b,t,targets[b,t]] [B,c] of x [B,c,V] and targets [B,c] (int32): the one
// element of each row, as a sum of the row with every other element zeroed, so that its gradient
// is an elementwise select XLA fuses rather than a scatter into a zeroed [B,c,V] buffer of its
// own (which XLA allocated for every chunk at once). The value is x's element exactly (one
// non-zero term).
func PickTargets(x, targets *Node) *Node {
	vocab := Iota(x.Graph(), shapes.Make(dtypes.Int32, x.Shape().Dimensions...), -1)
	hit := Equal(vocab, BroadcastToDims(ExpandAxes(ConvertDType(targets, dtypes.Int32), -1), x.Shape().Dimensions...))
	return ReduceSum(Where(hit, x, ZerosLike(x)), -1)
}

// TokenLogProbs returns lp[b,t] = log p(ids[b,t] | ids[b,<t]) [B,S] float32 for t ≥ 1 (the
// logits at t-1 scoring the token at t), and 0 at t = 0. pos are the position ids and mask the
// attention mask [B,S]; the logits are computed in chunks of ChunkLen positions.
func TokenLogProbs(ctx *context.Context, cfg *Config, ids, pos, mask *Node) *Node {
	return TargetLogProbs(ctx, cfg, Hidden(ctx, cfg, ids, pos, mask), ids)
}

// TargetLogProbs is TokenLogProbs from the hidden states [B,S,D] of ids [B,S].
func TargetLogProbs(ctx *context.Context, cfg *Config, hidden, ids *Node) *Node {
	b, s := ids.Shape().Dim(0), ids.Shape().Dim(1)
	first := Zeros(ids.Graph(), shapes.Make(dtypes.Float32, b, 1))
	if s == 1 {
		return first
	}
	h := Slice(hidden, AxisRange(), AxisRange(0, s-1))          // [B,S-1,D]: predicts t+1
	next := Slice(ids, AxisRange(), AxisRange(1, s))            // [B,S-1]
	lp := HeadLogProbs(ctx, cfg, h, next, cfg.ChunkLen(b, s-1)) // [B,S-1]
	return Concatenate([]*Node{first, lp}, 1)                   // [B,S]
}

// MeanNLL is the loss −Σ lp·scored / max(Σ scored, 1) over the scored tokens (scored [B,S] 0/1).
func MeanNLL(lp, scored *Node) *Node {
	scored = ConvertDType(scored, lp.DType())
	return Div(Neg(ReduceAllSum(Mul(lp, scored))), MaxScalar(ReduceAllSum(scored), 1))
}

// Gradients returns ∂loss/∂w for every trainable variable of ctx that loss depends on, with its
// HF name, in the order of ctx.IterVariables() — the order BuildTrainableVariablesGradientsGraph
// uses and optimizers' UpdateGraphWithGradients expects. A tied head's embedding gets one gradient.
func Gradients(ctx *context.Context, loss *Node) (names []string, grads []*Node) {
	var wrt []*Node
	for v := range ctx.IterVariables() {
		if v.Trainable && v.InUseByGraph(loss.Graph()) {
			names = append(names, HFName(v.Scope(), v.Name()))
			wrt = append(wrt, v.ValueGraph(loss.Graph()))
		}
	}
	if len(wrt) == 0 {
		return nil, nil
	}
	return names, Gradient(loss, wrt...)
}
