package sft

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/decoder"
)

// HeadStats is decoder.TargetLogProbs plus, from the same chunks of logits, whether the argmax
// predicts the token and the entropy of each position's predictive distribution: ids [B,S],
// hidden [B,S,D] → lp [B,S] float32 (lp[t] scores ids[t] from position t−1's logits; 0 at t = 0),
// correct [B,S] bool (likewise; false at t = 0), entropy [B,S] float32 (entropy[t] of position
// t's own logits, the last position's included; no gradient).
func HeadStats(ctx *context.Context, cfg *decoder.Config, hidden, ids *Node) (lp, correct, entropy *Node) {
	g := ids.Graph()
	b, s := ids.Shape().Dim(0), ids.Shape().Dim(1)
	// next[t] = ids[t+1], what position t's logits predict; the last position predicts nothing (0,
	// its lp and correct dropped by the shift below).
	next := Concatenate([]*Node{ConvertDType(Slice(ids, AxisRange(), AxisRange(1, s)), dtypes.Int32),
		Zeros(g, shapes.Make(dtypes.Int32, b, 1))}, 1) // [B,S]
	var lps, oks, ents []*Node
	decoder.ForEachChunk(hidden, cfg.ChunkLen(b, s), func(start, end int, hc *Node) {
		lp, stats := decoder.CheckpointedChunk(hc, func(hc *Node) (*Node, []*Node) {
			logits := decoder.Logits(ctx, cfg, hc) // [B,c,V]
			lsm := LogSoftmax(logits, -1)
			tgt := Slice(next, AxisRange(), AxisRange(start, end))
			sl := StopGradient(lsm)
			return decoder.PickTargets(lsm, tgt), []*Node{ArgmaxCorrect(logits, tgt), Neg(ReduceSum(Mul(Exp(sl), sl), -1))}
		})
		lps, oks, ents = append(lps, lp), append(oks, stats[0]), append(ents, stats[1])
	})
	cat := func(parts []*Node) *Node {
		if len(parts) == 1 {
			return parts[0]
		}
		return Concatenate(parts, 1)
	}
	// shift puts position t−1's value at t, first at t = 0.
	shift := func(x, first *Node) *Node {
		return Concatenate([]*Node{first, Slice(x, AxisRange(), AxisRange(0, s-1))}, 1)
	}
	lp = shift(cat(lps), Zeros(g, shapes.Make(dtypes.Float32, b, 1)))
	correct = shift(cat(oks), Zeros(g, shapes.Make(dtypes.Bool, b, 1)))
	return lp, correct, cat(ents)
}
