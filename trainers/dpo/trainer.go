package dpo

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Trainer is DPO as a loop.Method (TRL's DPOTrainer): each pair's chosen and rejected completions
// follow its prompt; a micro-batch of B pairs is one forward pass over 2B rows (chosen rows, then
// rejected rows, as TRL's concatenated_forward). The reference log-probs come from the starting
// weights, computed once for the whole dataset before training (TRL's precompute_ref_log_probs),
// so no second copy of the weights is resident.
type Trainer struct {
	model             *trainable.Model
	cfg               *Config
	chosen, rejected  []encode.Encoded
	refChosen, refRej []float32 // per pair: Σ, or mean with ipo in the list, of the reference log-probs
}

// New tokenizes d (preference rows; conversational ones rendered with the model's chat template)
// and computes the reference log-probs with the model's current weights on backend.
func New(backend backends.Backend, m *trainable.Model, d *data.Dataset, cfg *Config) (*Trainer, error) {
	if d.Format != data.Preference {
		return nil, fmt.Errorf("%s: dpo needs preference rows (prompt, chosen, rejected), got %s", d.Path, d.Format)
	}
	if err := CheckLossTypes(cfg.LossType); err != nil {
		return nil, err
	}
	std, addEOS, err := m.Text.Standard(d)
	if err != nil {
		return nil, err
	}
	t := &Trainer{model: m, cfg: cfg}
	tr := Truncation(encode.Lengths{MaxPrompt: cfg.MaxPromptLength, MaxCompletion: cfg.MaxCompletionLength, Max: cfg.MaxLength, Mode: cfg.TruncationMode})
	for _, r := range std.Rows {
		c, err := m.Text.EncodePair(r.Prompt.String, r.Chosen.String, addEOS, tr)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: chosen: %w", d.Path, r.Line, err)
		}
		rj, err := m.Text.EncodePair(r.Prompt.String, r.Rejected.String, addEOS, tr)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: rejected: %w", d.Path, r.Line, err)
		}
		t.chosen, t.rejected = append(t.chosen, c), append(t.rejected, rj)
	}
	batch := cfg.PerDeviceTrainBatchSize
	sums, means, err := trainable.ReferenceLogProbs(backend, m, append(append([]encode.Encoded{}, t.chosen...), t.rejected...), batch)
	if err != nil {
		return nil, fmt.Errorf("dpo reference log-probs: %w", err)
	}
	ref := sums
	if LengthNormalised(cfg.LossType) {
		ref = means
	}
	n := len(t.chosen)
	t.refChosen, t.refRej = ref[:n], ref[n:]
	return t, nil
}

// NumExamples implements loop.Method: the number of pairs.
func (t *Trainer) NumExamples() int { return len(t.chosen) }

// Units implements loop.Method: DPO's loss is a mean over pairs.
func (t *Trainer) Units(int) float64 { return 1 }

// Tokens implements loop.Method.
func (t *Trainer) Tokens(i int) int { return len(t.chosen[i].IDs) + len(t.rejected[i].IDs) }

// batch is a micro-batch of B pairs as the graph takes it: 2B rows, chosen rows first.
type batch[T any] struct {
	trainable.RowInputs[T]   // ids, pos, mask, completion mask [2B,T]
	Ref                    T // the reference log-probs [2B]
}

// Batch implements loop.Method: the pairs idx as a batch, chosen rows first.
func (t *Trainer) Batch(idx []int) (named.Feed, error) {
	rows := make([]encode.Encoded, 0, 2*len(idx))
	ref := make([]float32, 0, 2*len(idx))
	for _, i := range idx {
		rows, ref = append(rows, t.chosen[i]), append(ref, t.refChosen[i])
	}
	for _, i := range idx {
		rows, ref = append(rows, t.rejected[i]), append(ref, t.refRej[i])
	}
	return named.Of[any](batch[any]{RowInputs: trainable.EncodedRows(rows).Fields(), Ref: ref}), nil
}

// Loss implements loop.Method: the loss types of the list summed with loss_weights (Combine),
// plus rpo_alpha × the chosen rows' NLL (WithNLL), times B/norm so that the micro-batches of a
// step average over all its pairs. One forward pass gives the log-probs, the NLL and the
// logits metrics; the logits are summed over the vocabulary without being materialized. The
// metrics are TRL's (dpo_trainer.py L1782-1805): MetricNames, logits/chosen and
// logits/rejected, and nll_loss only with rpo_alpha or loss_type sft.
func (t *Trainer) Loss(ctx *context.Context, inputs named.Inputs, norm *Node) (*Node, map[string]*Node) {
	in := named.Bind[batch[*Node]](inputs)
	ids, pos, mask, scored, ref := in.IDs, in.Pos, in.Mask, in.Loss, in.Ref
	cfg := t.model.Config
	b := ids.Shape().Dim(0) / 2
	h := decoder.Hidden(ctx, cfg, ids, pos, mask)  // [2B,T,D]
	lp := decoder.TargetLogProbs(ctx, cfg, h, ids) // [2B,T]
	var seq *Node
	switch {
	case t.cfg.LDAlpha > 0: // TRL: replaces all_logps, the ipo mean included; the reference keeps its own
		seq = LDLogProbs(lp, scored, t.cfg.LDAlpha)
	case LengthNormalised(t.cfg.LossType):
		seq = MeanLogProbs(lp, scored)
	default:
		seq = SeqLogProbs(lp, scored)
	}
	half := func(x *Node, k int) *Node { return Slice(x, AxisRange(k*b, (k+1)*b)) }
	p := Pairs{PolicyChosen: half(seq, 0), PolicyRejected: half(seq, 1), RefChosen: half(ref, 0), RefRejected: half(ref, 1)}
	needsNLL := NeedsNLL(t.cfg.LossType, t.cfg.RPOAlpha)
	if needsNLL {
		p.NLL = NLL(half(lp, 0), NLLMask(half(ids, 0), half(scored, 0)))
	}
	params := Params{Beta: t.cfg.Beta, LabelSmoothing: ExoLabelSmoothing(t.cfg.LossType, t.cfg.LabelSmoothing), DiscopopTau: t.cfg.DiscopopTau,
		ReferenceFree: t.cfg.ReferenceFree, FDivergence: t.cfg.FDivergenceType, FAlphaCoef: t.cfg.FAlphaDivergenceCoef}
	var loss *Node
	var m Metrics
	if t.cfg.UseWeighting { // TRL: losses·policy_weights per pair, after rpo, then the mean
		loss, m = CombinePairs(t.cfg.LossType, t.cfg.LossWeights, p, params)
		if t.cfg.RPOAlpha > 0 {
			loss = WithNLL(loss, p.NLL, t.cfg.RPOAlpha)
		}
		loss = Weighted(loss, WPOWeights(lp, decoder.TargetLogSumSquaredProbs(ctx, cfg, h), scored))
	} else {
		loss, m = Combine(t.cfg.LossType, t.cfg.LossWeights, p, params)
		if t.cfg.RPOAlpha > 0 {
			loss = WithNLL(loss, p.NLL, t.cfg.RPOAlpha)
		}
	}
	sums := StopGradient(decoder.TargetLogitSums(ctx, cfg, h)) // [2B,T]
	metrics := m.Named()
	metrics["logits/chosen"] = MeanLogits(half(sums, 0), half(scored, 0), cfg.VocabSize)
	metrics["logits/rejected"] = MeanLogits(half(sums, 1), half(scored, 1), cfg.VocabSize)
	if needsNLL {
		metrics["nll_loss"] = StopGradient(p.NLL)
	}
	share := Div(Scalar(ids.Graph(), dtypes.Float32, float64(b)), norm)
	return Mul(loss, ConvertDType(share, loss.DType())), metrics
}

// FromEncoded is the Trainer of pairs already encoded, with their reference log-probs (as New
// computes them): New without the tokenization and the reference pass, for callers that hold ids
// (posttrain bench memory compiles its graphs on synthetic pairs).
func FromEncoded(m *trainable.Model, cfg *Config, chosen, rejected []encode.Encoded, refChosen, refRejected []float32) (*Trainer, error) {
	if len(chosen) != len(rejected) || len(chosen) != len(refChosen) || len(chosen) != len(refRejected) {
		return nil, fmt.Errorf("dpo: %d chosen, %d rejected rows, %d and %d reference log-probs", len(chosen), len(rejected), len(refChosen), len(refRejected))
	}
	if err := CheckLossTypes(cfg.LossType); err != nil {
		return nil, err
	}
	return &Trainer{model: m, cfg: cfg, chosen: chosen, rejected: rejected, refChosen: refChosen, refRej: refRejected}, nil
}
