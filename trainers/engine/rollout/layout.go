package rollout

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/decoder"
)

// A rollout batch is laid out as TRL lays it out (grpo_trainer.py L1379-1384, ppo_trainer.py's
// query_responses): the prompt left-padded to P, the completion right-padded to C, so every
// completion starts at position P:
//
//	ids, pos, attn [B,P+C] int32 (attn 1 = a token the model attends to)
//
// The logits at P−1+t belong to completion token t (TRL's logits_to_keep, [:, context_length−1:−1]).

// Sequences are the token rows of a rollout batch (ids, pos, attn [B,P+C] int32): the inputs of
// the forward-only graphs and the token part of a loss graph's micro-batch. T is any on the host,
// *Node in the graph (internal/named).
type Sequences[T any] struct{ IDs, Pos, Attn T }

// Layout is the [P+C] layout of prompt+completion rows and the padding rule of one trainer.
type Layout struct {
	PromptLen, CompletionLen int // P, C
	// Pad is the id the padding is written with.
	Pad int32
	// ByID: TRL's PPO forward()/get_reward(): attention = ids ≠ Pad (a generated pad id too), the
	// pads' ids replaced by 0, position ids the exclusive cumsum of the attention. Otherwise
	// (GRPO): attention = the prompt's and the completion's tokens, position ids HF's
	// cumsum(attn)−1 (decoder.PositionIDs).
	ByID bool
}

// Sequences lays out prompts[i]+completions[i]; a prompt longer than P or a completion longer
// than C is an error.
func (l Layout) Sequences(prompts, completions [][]int32) (Sequences[any], error) {
	P, C := l.PromptLen, l.CompletionLen
	var ids, pos, attn [][]int32
	for i, p := range prompts {
		c := completions[i]
		if len(p) > P || len(c) > C {
			return Sequences[any]{}, fmt.Errorf("row %d has %d prompt and %d completion tokens, over the %d+%d layout", i, len(p), len(c), P, C)
		}
		row, a := make([]int32, P+C), make([]int32, P+C)
		for t := range row {
			row[t] = l.Pad
		}
		copy(row[P-len(p):], p)
		copy(row[P:], c)
		if l.ByID {
			ps, n := make([]int32, P+C), int32(0)
			for t, id := range row {
				ps[t] = n
				if id != l.Pad {
					a[t], n = 1, n+1
				} else {
					row[t] = 0
				}
			}
			pos = append(pos, ps)
		} else {
			for t := P - len(p); t < P+len(c); t++ {
				a[t] = 1
			}
		}
		ids, attn = append(ids, row), append(attn, a)
	}
	if !l.ByID {
		pos = decoder.PositionIDs(attn)
	}
	return Sequences[any]{IDs: ids, Pos: pos, Attn: attn}, nil
}

// CompletionLogProbs returns, for the C completion tokens of a rollout batch, the log-probs of
// the tempered policy log softmax(logits/T)[y_t] [B,C] float32 (both trainers divide the logits
// by the sampling temperature before scoring, TRL #4159; PPO's T is temperature + 1e-7) and the
// entropy of that distribution −Σ_v p_v log p_v [B,C] (detached, for the entropy metrics). Only
// the completion positions go through the LM head, chunk by chunk, so at most cfg.ChunkLen's
// bound of logits (decoder.DefaultChunkElements) exist at once.
func CompletionLogProbs(ctx *context.Context, cfg *decoder.Config, in Sequences[*Node], completionLen int, temperature float64) (logps, entropy *Node) {
	b, s := in.IDs.Shape().Dim(0), in.IDs.Shape().Dim(1)
	p := s - completionLen
	hidden := decoder.Hidden(ctx, cfg, in.IDs, in.Pos, in.Attn)                        // [B,S,D]
	h := Slice(hidden, AxisRange(), AxisRange(p-1, s-1))                               // [B,C,D]: predicts P..S-1
	targets := ConvertDType(Slice(in.IDs, AxisRange(), AxisRange(p, s)), dtypes.Int32) // [B,C]
	var lps, ents []*Node
	decoder.ForEachChunk(h, cfg.ChunkLen(b, completionLen), func(start, end int, hc *Node) {
		lp, ent := decoder.CheckpointedChunk(hc, func(hc *Node) (*Node, []*Node) {
			logits := decoder.Logits(ctx, cfg, hc) // [B,c,V] float32
			if temperature != 1 {
				logits = DivScalar(logits, temperature)
			}
			lsm := LogSoftmax(logits, -1) // [B,c,V]
			d := StopGradient(lsm)
			return decoder.PickTargets(lsm, Slice(targets, AxisRange(), AxisRange(start, end))), []*Node{Neg(ReduceSum(Mul(Exp(d), d), -1))} // [B,c], [B,c]
		})
		lps, ents = append(lps, lp), append(ents, ent[0])
	})
	if len(lps) == 1 {
		return lps[0], ents[0]
	}
	return Concatenate(lps, 1), Concatenate(ents, 1)
}
