package trainable

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/trainers/engine/step"
	"github.com/posttrain/posttrain/trainers/engine/tokenmask"
)

// EncodedRows pads rows (right, to a bucket) with the completions scored.
func EncodedRows(rows []encode.Encoded) Rows {
	ids, from := make([][]int32, len(rows)), make([]int, len(rows))
	for i, r := range rows {
		ids[i], from[i] = r.IDs, r.Start
	}
	return PadRows(ids, from, Bucket(MaxLen(ids)))
}

// SequenceLogProbs returns, for every row, log π(completion | prompt) = Σ_t lp_t over the
// completion tokens (tokenmask.SeqSum) and its per-token mean (tokenmask.SeqMean), under the model's current
// weights: the frozen reference of DPO and KTO when called before training. Rows are run in
// batches of batch, in order. Values are the float32 results, so feeding them back as inputs
// reproduces what the graph computed.
func SequenceLogProbs(backend backends.Backend, m *Model, rows []encode.Encoded, batch int) (sums, means []float32, err error) {
	return sequenceLogProbs(backend, m, rows, batch, false)
}

// ReferenceLogProbs is SequenceLogProbs under the reference policy π_ref of DPO and KTO: the
// model's current weights (the starting ones, called before training), with its adapter
// disabled (decoder.DisableAdapter) when it has one, as TRL's null_ref_context does under PEFT: no
// second copy of the weights.
func ReferenceLogProbs(backend backends.Backend, m *Model, rows []encode.Encoded, batch int) (sums, means []float32, err error) {
	return sequenceLogProbs(backend, m, rows, batch, true)
}

func sequenceLogProbs(backend backends.Backend, m *Model, rows []encode.Encoded, batch int, reference bool) (sums, means []float32, err error) {
	cfg := m.Config
	ev, err := step.NewContextEval(backend, m.Ctx.Reuse(), func(ctx *context.Context, in named.Inputs) map[string]*graph.Node {
		r := named.Bind[RowInputs[*graph.Node]](in)
		if reference {
			decoder.DisableAdapter(ctx, r.IDs.Graph())
		}
		lp := decoder.TokenLogProbs(ctx, cfg, r.IDs, r.Pos, r.Mask)
		return map[string]*graph.Node{"sums": tokenmask.SeqSum(lp, r.Loss), "means": tokenmask.SeqMean(lp, r.Loss)}
	})
	if err != nil {
		return nil, nil, err
	}
	for lo := 0; lo < len(rows); lo += batch {
		outs, err := ev.Run(EncodedRows(rows[lo:min(lo+batch, len(rows))]).Inputs())
		if err != nil {
			return nil, nil, err
		}
		for name, dst := range map[string]*[]float32{"sums": &sums, "means": &means} {
			if outs[name].DType() != dtypes.Float32 {
				return nil, nil, fmt.Errorf("sequence log-probs: dtype %s, want float32", outs[name].DType())
			}
			*dst = append(*dst, outs[name].Value().([]float32)...)
		}
	}
	return sums, means, nil
}
