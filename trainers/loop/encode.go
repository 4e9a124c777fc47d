package loop

import (
	"fmt"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/models/qwen2"
	"github.com/posttrain/posttrain/trainers/step"
)

// Encoded is a prompt followed by a completion, as token ids; the completion starts at Start.
type Encoded struct {
	IDs   []int32
	Start int
}

// Completion returns the completion's length in tokens.
func (e Encoded) Completion() int { return len(e.IDs) - e.Start }

// Lengths are the truncation limits of preference-style trainers (TRL's max_prompt_length and
// max_length; 0 = no limit).
type Lengths struct{ MaxPrompt, Max int }

// EncodePair tokenizes a rendered prompt and completion separately, as TRL's DPO and KTO
// trainers do, appending EOS to the completion when addEOS (standard data) and it is not there.
// The prompt keeps its last MaxPrompt tokens; if prompt+completion is still longer than Max the
// completion keeps its first Max−len(prompt) tokens (TRL KTO's rule). A doubled special token in
// the text is an error.
func (m *Model) EncodePair(prompt, completion string, addEOS bool, l Lengths) (Encoded, error) {
	if addEOS {
		eos, _, err := m.EOS()
		if err != nil {
			return Encoded{}, err
		}
		if !strings.HasSuffix(completion, eos) {
			completion += eos
		}
	}
	if err := chat.CheckDoubledText(prompt+completion, m.Specials()); err != nil {
		return Encoded{}, err
	}
	p, c := m.Tokenizer.Encode(prompt), m.Tokenizer.Encode(completion)
	if len(c) == 0 {
		return Encoded{}, fmt.Errorf("empty completion")
	}
	if l.MaxPrompt > 0 && len(p) > l.MaxPrompt {
		p = p[len(p)-l.MaxPrompt:]
	}
	if l.Max > 0 && len(p)+len(c) > l.Max {
		c = c[:max(1, l.Max-len(p))]
	}
	ids := make([]int32, 0, len(p)+len(c))
	for _, id := range append(p, c...) {
		ids = append(ids, int32(id))
	}
	return Encoded{IDs: ids, Start: len(p)}, nil
}

// EncodedRows pads rows (right, to a bucket) with the completions scored.
func EncodedRows(rows []Encoded) Rows {
	ids, from := make([][]int32, len(rows)), make([]int, len(rows))
	for i, r := range rows {
		ids[i], from[i] = r.IDs, r.Start
	}
	return PadRows(ids, from, Bucket(MaxLen(ids)))
}

// SequenceLogProbs returns, for every row, log π(completion | prompt) = Σ_t lp_t over the
// completion tokens (step.SeqSum) and its per-token mean (step.SeqMean), under the model's current
// weights: the frozen reference of DPO and KTO when called before training. Rows are run in
// batches of batch, in order. Values are the float32 results, so feeding them back as inputs
// reproduces what the graph computed.
func SequenceLogProbs(backend backends.Backend, m *Model, rows []Encoded, batch int) (sums, means []float32, err error) {
	cfg := m.Config
	ev, err := step.NewContextEval(backend, m.Ctx.Reuse(), func(ctx *context.Context, in []*graph.Node) []*graph.Node {
		lp := qwen2.TokenLogProbs(ctx, cfg, in[0], in[1], in[2])
		return []*graph.Node{step.SeqSum(lp, in[3]), step.SeqMean(lp, in[3])}
	})
	if err != nil {
		return nil, nil, err
	}
	for lo := 0; lo < len(rows); lo += batch {
		outs, err := ev.Run(EncodedRows(rows[lo:min(lo+batch, len(rows))]).Inputs()...)
		if err != nil {
			return nil, nil, err
		}
		for k, dst := range []*[]float32{&sums, &means} {
			if outs[k].DType() != dtypes.Float32 {
				return nil, nil, fmt.Errorf("sequence log-probs: dtype %s, want float32", outs[k].DType())
			}
			*dst = append(*dst, outs[k].Value().([]float32)...)
		}
	}
	return sums, means, nil
}
