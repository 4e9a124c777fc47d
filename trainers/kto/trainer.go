package kto

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
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/tokenmask"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Trainer is KTO as a loop.Method (TRL's KTOTrainer). With loss_type "kto" each example also
// carries a KL row: its prompt with the completion of the previous example of its chunk of
// per_device_train_batch_size rows in dataset order (the first takes the chunk's last), TRL's
// _get_kl_dataset "shift by one". The policy's log-probs of the KL rows are computed without
// gradient; with the reference's they give the reference point z = max(0, mean(policy − ref)).
// loss_type "apo_zero_unpaired" has no reference point, so no KL rows (TRL: calculate_KL False).
// Reference log-probs come from the starting weights, computed once before training.
type Trainer struct {
	model         *trainable.Model
	cfg           *Config
	rows, kl      []encode.Encoded // kl is empty without a KL term
	desirable     []bool
	refRow, refKL []float32
}

// withKL reports whether the loss uses the KL reference point (TRL's calculate_KL).
func (t *Trainer) withKL() bool { return t.cfg.LossType != "apo_zero_unpaired" }

// New tokenizes d (unpaired rows: prompt, completion, label; conversational ones rendered with the
// chat template), builds the KL rows and computes the reference log-probs on backend.
func New(backend backends.Backend, m *trainable.Model, d *data.Dataset, cfg *Config) (*Trainer, error) {
	if d.Format != data.Unpaired {
		return nil, fmt.Errorf("%s: kto needs unpaired rows (prompt, completion, label), got %s", d.Path, d.Format)
	}
	if cfg.LossType != "kto" && cfg.LossType != "apo_zero_unpaired" {
		return nil, fmt.Errorf("kto: loss_type %q is not implemented; valid: kto, apo_zero_unpaired", cfg.LossType)
	}
	t := &Trainer{model: m, cfg: cfg}
	b := cfg.PerDeviceTrainBatchSize
	if t.withKL() && b < 2 {
		return nil, fmt.Errorf("kto: per_device_train_batch_size must be ≥ 2: the KL term pairs each prompt with another row's completion")
	}
	std, addEOS, err := m.Text.Standard(d)
	if err != nil {
		return nil, err
	}
	// TRL's KTOTrainer ignores max_completion_length for decoder-only models (Truncate).
	tr := Truncation(encode.Lengths{MaxPrompt: cfg.MaxPromptLength, Max: cfg.MaxLength, Mode: cfg.TruncationMode})
	for lo := 0; lo < len(std.Rows); lo += b {
		chunk := std.Rows[lo:min(lo+b, len(std.Rows))]
		for k, r := range chunk {
			other := chunk[(k+len(chunk)-1)%len(chunk)]
			row, err := m.Text.EncodePair(r.Prompt.String, r.Completion.String, addEOS, tr)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", d.Path, r.Line, err)
			}
			t.rows, t.desirable = append(t.rows, row), append(t.desirable, r.Label)
			if !t.withKL() {
				continue
			}
			kl, err := m.Text.EncodePair(r.Prompt.String, other.Completion.String, addEOS, tr)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: KL row (this prompt with the completion of line %d): %w", d.Path, r.Line, other.Line, err)
			}
			t.kl = append(t.kl, kl)
		}
	}
	all := append(append([]encode.Encoded{}, t.rows...), t.kl...)
	sums, _, err := trainable.ReferenceLogProbs(backend, m, all, b)
	if err != nil {
		return nil, fmt.Errorf("kto reference log-probs: %w", err)
	}
	t.refRow, t.refKL = sums[:len(t.rows)], sums[len(t.rows):]
	return t, nil
}

// NumExamples implements loop.Method.
func (t *Trainer) NumExamples() int { return len(t.rows) }

// Sequential implements loop.Sequential: the rows are trained on in the dataset's order at every
// pass, as TRL v0.24's KTOTrainer (its _get_train_sampler returns a SequentialSampler, for both
// loss types), so each micro-batch holds the very rows its KL completions were shifted within.
func (t *Trainer) Sequential() bool { return true }

// Units implements loop.Method: KTO's loss is a mean over examples.
func (t *Trainer) Units(int) float64 { return 1 }

// Tokens implements loop.Method (the KL rows are not counted, as TRL's num_input_tokens_seen).
func (t *Trainer) Tokens(i int) int { return len(t.rows[i].IDs) }

// batch is a micro-batch as the graph takes it without the KL term (loss_type apo_zero_unpaired).
type batch[T any] struct {
	trainable.RowInputs[T]   // the rows' ids, pos, mask, completion mask [B,T]
	Ref                    T // their reference log-probs [B]
	Desirable              T // their labels [B] bool
}

// klBatch is a micro-batch with the KL term: batch, then the KL rows [B,T'] and their reference
// log-probs [B].
type klBatch[T any] struct {
	batch[T]
	KL    trainable.RowInputs[T]
	RefKL T
}

// Batch implements loop.Method: batch, or klBatch with the KL term.
func (t *Trainer) Batch(idx []int) (named.Feed, error) {
	rows, ref, good := make([]encode.Encoded, len(idx)), make([]float32, len(idx)), make([]bool, len(idx))
	for k, i := range idx {
		rows[k], ref[k], good[k] = t.rows[i], t.refRow[i], t.desirable[i]
	}
	in := batch[any]{RowInputs: trainable.EncodedRows(rows).Fields(), Ref: ref, Desirable: good}
	if !t.withKL() {
		return named.Of[any](in), nil
	}
	kl, refKL := make([]encode.Encoded, len(idx)), make([]float32, len(idx))
	for k, i := range idx {
		kl[k], refKL[k] = t.kl[i], t.refKL[i]
	}
	return named.Of[any](klBatch[any]{batch: in, KL: trainable.EncodedRows(kl).Fields(), RefKL: refKL}), nil
}

// Finish implements loop.Finisher as TRL's KTOTrainer.log: rewards, logps and logits per split are the
// window's sums over its count (omitted when the window had no example of that split), margins
// their difference, kl the mean over micro-batches.
func (t *Trainer) Finish(w loop.Window) map[string]float64 {
	out := map[string]float64{"kl": w.Mean("kl")}
	for _, split := range []string{"chosen", "rejected"} {
		n := w.Sums["count/"+split]
		if n == 0 {
			continue
		}
		for _, metric := range []string{"rewards", "logps", "logits"} {
			out[metric+"/"+split] = w.Sums[metric+"/"+split+"_sum"] / n
		}
	}
	c, okC := out["rewards/chosen"]
	r, okR := out["rewards/rejected"]
	if okC && okR {
		out["rewards/margins"] = c - r
	}
	return out
}

// Loss implements loop.Method: kto.Loss with the KL reference point, or APOZeroUnpairedLoss,
// times B/norm. The logits metrics come from the same forward pass, summed over the vocabulary
// without materializing the logits. The metrics are the sums and counts TRL stores
// (kto_trainer.py L1442-1469), which Finish turns into its logged values.
func (t *Trainer) Loss(ctx *context.Context, inputs named.Inputs, norm *Node) (*Node, map[string]*Node) {
	cfg := t.model.Config
	var in klBatch[*Node]
	if t.withKL() {
		in = named.Bind[klBatch[*Node]](inputs)
	} else {
		in.batch = named.Bind[batch[*Node]](inputs)
	}
	ids, pos, mask, scored, ref, good := in.IDs, in.Pos, in.Mask, in.Loss, in.Ref, in.Desirable
	b := ids.Shape().Dim(0)
	h := decoder.Hidden(ctx, cfg, ids, pos, mask)
	policy := SeqLogProbs(decoder.TargetLogProbs(ctx, cfg, h, ids), scored)
	hp := LossConfig{Beta: t.cfg.Beta, DesirableWeight: t.cfg.DesirableWeight, UndesirableWeight: t.cfg.UndesirableWeight}
	var loss *Node
	var m Metrics
	if t.withKL() {
		var policyKL *Node
		decoder.NoGradient(ids.Graph(), func() {
			policyKL = StopGradient(SeqLogProbs(decoder.TokenLogProbs(ctx, cfg, in.KL.IDs, in.KL.Pos, in.KL.Mask), in.KL.Loss))
		})
		loss, m = Loss(policy, ref, good, ReferencePoint(policyKL, in.RefKL), hp)
	} else {
		loss, m = APOZeroUnpairedLoss(policy, ref, good, hp)
	}
	p := StopGradient(policy)
	logits := RowLogitSums(decoder.LogitSums(ctx, cfg, h), mask)
	bad := LogicalNot(good)
	metrics := map[string]*Node{
		"rewards/chosen_sum": m.RewardsChosenSum, "rewards/rejected_sum": m.RewardsRejectedSum,
		"logps/chosen_sum": ReduceAllSum(tokenmask.Masked(p, good)), "logps/rejected_sum": ReduceAllSum(tokenmask.Masked(p, bad)),
		"logits/chosen_sum": ReduceAllSum(tokenmask.Masked(logits, good)), "logits/rejected_sum": ReduceAllSum(tokenmask.Masked(logits, bad)),
		"count/chosen": m.CountChosen, "count/rejected": m.CountRejected, "kl": m.KL,
	}
	share := Div(Scalar(ids.Graph(), dtypes.Float32, float64(b)), norm)
	return Mul(loss, ConvertDType(share, loss.DType())), metrics
}

// Rewards returns the mean implicit reward β·(log π − log π_ref) of the desirable and of the
// undesirable examples under the model's current weights.
func (t *Trainer) Rewards(backend backends.Backend) (desirable, undesirable float64, err error) {
	sums, _, err := trainable.SequenceLogProbs(backend, t.model, t.rows, t.cfg.PerDeviceTrainBatchSize)
	if err != nil {
		return 0, 0, err
	}
	var n [2]int
	var s [2]float64
	for i, lp := range sums {
		k := 1
		if t.desirable[i] {
			k = 0
		}
		s[k] += t.cfg.Beta * float64(lp-t.refRow[i])
		n[k]++
	}
	return s[0] / float64(max(1, n[0])), s[1] / float64(max(1, n[1])), nil
}

// FromEncoded is the Trainer of rows already encoded, with their KL rows (empty for
// apo_zero_unpaired), labels and reference log-probs (as New computes them): New without the
// tokenization and the reference pass (posttrain bench memory compiles its graphs on synthetic
// rows).
func FromEncoded(m *trainable.Model, cfg *Config, rows, kl []encode.Encoded, desirable []bool, refRow, refKL []float32) (*Trainer, error) {
	t := &Trainer{model: m, cfg: cfg, rows: rows, kl: kl, desirable: desirable, refRow: refRow, refKL: refKL}
	nKL := 0
	if t.withKL() {
		nKL = len(rows)
	}
	if len(desirable) != len(rows) || len(refRow) != len(rows) || len(kl) != nKL || len(refKL) != nKL {
		return nil, fmt.Errorf("kto: %d rows, %d labels, %d reference log-probs, %d KL rows and %d of their log-probs", len(rows), len(desirable), len(refRow), len(kl), len(refKL))
	}
	return t, nil
}
