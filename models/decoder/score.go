package decoder

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/gomlxfix"
	"github.com/posttrain/posttrain/internal/named"
)

// Checksum summarizes the logits at every real position p (mask = 1) and vocabulary entry v:
// Σ logit, Σ |logit|, Σ logit², Σ logit·w[v] with w[v] = ((v·7919) mod 1009)/1009 − 0.5.
type Checksum struct {
	Positions   int     `json:"positions"`
	Sum         float64 `json:"sum"`
	AbsSum      float64 `json:"abs_sum"`
	SumSq       float64 `json:"sum_sq"`
	WeightedSum float64 `json:"weighted_sum"`
}

// ScoreResult is what Score computes for a batch.
type ScoreResult struct {
	LogProbs   [][]float64 // [B][S] TokenLogProbs (every position)
	Scored     [][]float32 // [B][S] ScoredMask
	Loss       float64     // MeanNLL over the scored tokens
	LastIndex  []int       // each row's last real position
	LastLogits [][]float32 // [B][V] the logits there
	Checksum   Checksum
	GradNames  []string  // with grad: HF names, in ctx.IterVariables() order
	GradL2     []float64 // ‖∂loss/∂w‖₂ per tensor
	GlobalL2   float64   // root sum of squares of GradL2
}

// scoreInputs are Score's graph inputs: ids, position ids, attention mask [B,S] int32, the scored
// mask [B,S] float32 and each row's last real position [B] int32. T is any on the host and *Node
// in the graph (internal/named).
type scoreInputs[T any] struct{ IDs, Pos, Mask, Scored, LastIndex T }

// scoreOutputs are Score's graph outputs: log-probs [B,S], the loss, the last logits [B,V], the
// checksum [5] and, with grad, Σ g² of each gradient tensor (in Gradients' order).
type scoreOutputs[T any] struct {
	LogProbs, Loss, LastLogits, Checksum T
	GradSquares                          []T
}

// Score runs the model on a batch: per-token log-probs, the mean NLL over the completion tokens,
// logits checksums, the last real position's logits and, with grad, the per-tensor gradient
// norms of the loss. ctx holds the weights.
func Score(backend backends.Backend, ctx *context.Context, cfg *Config, batch *Batch, grad bool) (res *ScoreResult, err error) {
	if err := batch.Validate(cfg.VocabSize); err != nil {
		return nil, err
	}
	if n, m := len(batch.IDs[0]), cfg.MaxPositionEmbeddings; m > 0 && n > m { // checked before any graph: 40,000 tokens ran out of memory
		return nil, fmt.Errorf("batch: rows of %d positions exceed the model's max_position_embeddings %d", n, m)
	}
	b, s := batch.Dims()
	res = &ScoreResult{Scored: ScoredMask(batch.Mask, batch.CompletionStart), LastIndex: LastIndex(batch.Mask)}
	last := make([]int32, b)
	for r, t := range res.LastIndex {
		last[r] = int32(t)
	}
	var names []string
	var sig named.Signature
	fn := func(ctx *context.Context, nodes []*Node) []*Node {
		in := named.Bind[scoreInputs[*Node]](sig.Inputs(nodes))
		h := Hidden(ctx, cfg, in.IDs, in.Pos, in.Mask) // [B,S,D]
		lp := TargetLogProbs(ctx, cfg, h, in.IDs)
		loss := MeanNLL(lp, in.Scored)
		at := Stack([]*Node{Iota(h.Graph(), in.LastIndex.Shape(), 0), in.LastIndex}, -1) // [B,2]
		out := scoreOutputs[*Node]{LogProbs: lp, Loss: loss, LastLogits: Logits(ctx, cfg, Gather(h, at)),
			Checksum: checksum(ctx, cfg, h, in.Mask)}
		if grad {
			var grads []*Node
			names, grads = Gradients(ctx, loss)
			for _, g := range grads {
				out.GradSquares = append(out.GradSquares, ReduceAllSum(Square(ConvertDType(g, dtypes.Float64))))
			}
		}
		return sig.Outputs(named.Of[*Node](out))
	}
	var outs scoreOutputs[*tensors.Tensor]
	err = gomlxfix.Call(func() {
		exec, err := context.NewExec(backend, ctx, fn)
		if err != nil {
			panic(err)
		}
		defer exec.Finalize()
		in := scoreInputs[any]{IDs: tensors.FromValue(batch.IDs), Pos: tensors.FromValue(PositionIDs(batch.Mask)),
			Mask: tensors.FromValue(batch.Mask), Scored: tensors.FromValue(res.Scored), LastIndex: tensors.FromValue(last)}
		args, err := sig.Args(named.Of[any](in))
		if err != nil {
			panic(err)
		}
		ts, err := exec.Exec(args...)
		if err != nil {
			panic(err)
		}
		l, err := sig.Results(ts)
		if err != nil {
			panic(err)
		}
		outs = named.Bind[scoreOutputs[*tensors.Tensor]](l)
	})
	if err != nil {
		return nil, fmt.Errorf("%s score: %w", cfg.errName(), err)
	}
	return res, res.fill(outs, names, b, s, cfg.VocabSize)
}

func (res *ScoreResult) fill(outs scoreOutputs[*tensors.Tensor], names []string, b, s, vocab int) error {
	lp, err := Float64s(outs.LogProbs)
	if err != nil {
		return err
	}
	res.LogProbs = make([][]float64, b)
	for r := range b {
		res.LogProbs[r] = lp[r*s : (r+1)*s]
	}
	res.Loss = float64(tensors.ToScalar[float32](outs.Loss))
	last, err := Float32s(outs.LastLogits)
	if err != nil {
		return err
	}
	res.LastLogits = make([][]float32, b)
	for r := range b {
		res.LastLogits[r] = last[r*vocab : (r+1)*vocab]
	}
	stats := tensors.MustCopyFlatData[float64](outs.Checksum)
	res.Checksum = Checksum{Positions: int(stats[0]), Sum: stats[1], AbsSum: stats[2], SumSq: stats[3], WeightedSum: stats[4]}
	res.GradNames = names
	for _, t := range outs.GradSquares {
		sq := tensors.ToScalar[float64](t)
		res.GradL2 = append(res.GradL2, math.Sqrt(sq))
		res.GlobalL2 += sq
	}
	res.GlobalL2 = math.Sqrt(res.GlobalL2)
	return nil
}

// checksum returns [positions, Σ logit, Σ |logit|, Σ logit², Σ logit·w] over the real positions
// of mask [B,S], in float64, a chunk of logits at a time.
func checksum(ctx *context.Context, cfg *Config, h, mask *Node) *Node {
	g := h.Graph()
	w := make([]float64, cfg.VocabSize)
	for v := range w {
		w[v] = float64((v*7919)%1009)/1009 - 0.5
	}
	weights := ExpandLeftToRank(Const(g, w), 3) // [1,1,V]
	m := ConvertDType(mask, dtypes.Float64)
	sums := []*Node{ReduceAllSum(m)}
	b, s := h.Shape().Dim(0), h.Shape().Dim(1)
	ForEachChunk(h, cfg.ChunkLen(b, s), func(start, end int, hc *Node) {
		logits := ConvertDType(Logits(ctx, cfg, hc), dtypes.Float64)       // [B,c,V]
		mc := ExpandAxes(Slice(m, AxisRange(), AxisRange(start, end)), -1) // [B,c,1]
		for i, x := range []*Node{logits, Abs(logits), Square(logits), Mul(logits, weights)} {
			sum := ReduceAllSum(Mul(x, mc))
			if len(sums) <= i+1 {
				sums = append(sums, sum)
			} else {
				sums[i+1] = Add(sums[i+1], sum)
			}
		}
	})
	return Stack(sums, 0) // [5]
}
