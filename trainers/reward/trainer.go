// Package reward trains reward models with TRL v0.24's RewardTrainer semantics
// (trl/trainer/reward_trainer.py, reward_config.py): a sequence-classification model
// (models/decoder's score head, num_labels 1) scores each preference pair's chosen and rejected
// sequence at its last non-padding token, and the Bradley-Terry loss −log σ(r_c − r_r − margin)
// (plus center_rewards_coefficient's centring term) trains it. It is a loop.Method on the shared
// driver. The pieces GRPO and PPO share to score completions with a reward model live below the
// trainers: the encodings in models/encode (RewardTrainingIDs, RewardInputIDs), the batched scorer
// in trainers/engine/trainable (Scorer), the score head in models/decoder.
package reward

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// MarginColumn is the optional per-pair column of TRL's DataCollatorForPreference.
const MarginColumn = "margin"

// Trainer is TRL's RewardTrainer as a loop.Method: a micro-batch of B pairs is one forward pass
// over 2B rows (the chosen sequences, then the rejected ones, as DataCollatorForPreference lays
// them out), right-padded.
type Trainer struct {
	model            *trainable.Model
	cfg              *Config
	chosen, rejected [][]int32
	margin           []float32
	warnings         []string
}

// New tokenizes the preference rows of d (explicit or implicit prompt, standard or
// conversational) with RewardTrainingIDs, drops the pairs longer than max_length as TRL filters them, reads
// the margin column, and sets the model's pad_token_id and the tokenizer's pad_token (encode.Text.SetPadToken). m must be a classifier with
// one label (trainable.LoadClassifier).
func New(m *trainable.Model, d *data.Dataset, cfg *Config) (*Trainer, error) {
	if d.Format != data.Preference {
		return nil, fmt.Errorf("%s: a reward model trains on preference rows (chosen, rejected, optional prompt), got %s", d.Path, d.Format)
	}
	if m.Config.NumLabels != 1 {
		return nil, fmt.Errorf("model %s: a reward model has one output (num_labels 1), got %d", m.Dir, m.Config.NumLabels)
	}
	pad, err := m.Text.SetPadToken(cfg.PadToken)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Dir, err)
	}
	m.Config.PadTokenID = &pad
	hasMargin := len(d.Rows) > 0 && d.Rows[0].Columns[MarginColumn] != nil
	t := &Trainer{model: m, cfg: cfg}
	dropped := 0
	for _, r := range d.Rows {
		c, err := m.Text.RewardTrainingIDs(r.Prompt, r.Chosen)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: chosen: %w", d.Path, r.Line, err)
		}
		rj, err := m.Text.RewardTrainingIDs(r.Prompt, r.Rejected)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: rejected: %w", d.Path, r.Line, err)
		}
		margin, err := rowMargin(r, hasMargin)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", d.Path, r.Line, err)
		}
		if cfg.MaxLength > 0 && (len(c) > cfg.MaxLength || len(rj) > cfg.MaxLength) {
			dropped++
			continue
		}
		t.chosen, t.rejected, t.margin = append(t.chosen, c), append(t.rejected, rj), append(t.margin, margin)
	}
	if len(t.chosen) == 0 {
		return nil, fmt.Errorf("%s: all %d pairs are longer than max_length %d tokens (chosen or rejected): nothing to train on", d.Path, dropped, cfg.MaxLength)
	}
	if dropped > 0 {
		t.warnings = append(t.warnings, fmt.Sprintf("%s: %d of %d pairs dropped: chosen or rejected longer than max_length %d tokens (TRL filters them)",
			d.Path, dropped, len(d.Rows), cfg.MaxLength))
	}
	return t, nil
}

// rowMargin reads a row's margin: a finite number in every row when the first row has one
// (TRL collates the column only then), absent from every row otherwise.
func rowMargin(r data.Row, want bool) (float32, error) {
	v, ok := r.Columns[MarginColumn]
	if !want {
		if ok {
			return 0, fmt.Errorf("column %q is here but not in the first row: give it in every row or in none", MarginColumn)
		}
		return 0, nil
	}
	f, isNum := v.(float64)
	switch {
	case !ok:
		return 0, fmt.Errorf("column %q is missing (the first row has it: give it in every row)", MarginColumn)
	case !isNum || math.IsNaN(f) || math.IsInf(f, 0):
		return 0, fmt.Errorf("column %q must be a finite number, got %v", MarginColumn, v)
	}
	return float32(f), nil
}

// Warnings implements loop.Warner: the pairs max_length dropped.
func (t *Trainer) Warnings() []string { return t.warnings }

// NumExamples implements loop.Method: the number of pairs.
func (t *Trainer) NumExamples() int { return len(t.chosen) }

// Units implements loop.Method: the loss is a mean over pairs.
func (t *Trainer) Units(int) float64 { return 1 }

// Tokens implements loop.Method: the pair's tokens (TRL's num_tokens sums the attention mask of
// both sequences).
func (t *Trainer) Tokens(i int) int { return len(t.chosen[i]) + len(t.rejected[i]) }

// Inputs are a batch of B pairs as the reward graph takes it: 2B rows (chosen first, then
// rejected; trainable.ScoreInputs) and the margins [B].
type Inputs[T any] struct {
	trainable.ScoreInputs[T]
	Margin T
}

// Batch implements loop.Method.
func (t *Trainer) Batch(idx []int) (named.Feed, error) {
	rows := make([][]int32, 0, 2*len(idx))
	margin := make([]float32, 0, len(idx))
	for _, i := range idx {
		rows, margin = append(rows, t.chosen[i]), append(margin, t.margin[i])
	}
	for _, i := range idx {
		rows = append(rows, t.rejected[i])
	}
	return named.Of[any](Inputs[any]{ScoreInputs: trainable.ScoreRows(rows, t.model.Config.PadTokenID), Margin: margin}), nil
}

// Loss implements loop.Method: Loss over the B pairs, times B/norm so that the micro-batches of a
// step average over all its pairs, and TRL's metrics (Metrics).
func (t *Trainer) Loss(ctx *context.Context, inputs named.Inputs, norm *Node) (*Node, map[string]*Node) {
	in := named.Bind[Inputs[*Node]](inputs)
	r := decoder.Rewards(ctx, t.model.Config, in.IDs, in.Pos, in.Mask, in.Last) // [2B]
	b := r.Shape().Dim(0) / 2
	chosen, rejected := Slice(r, AxisRange(0, b)), Slice(r, AxisRange(b, 2*b))
	loss := Loss(chosen, rejected, in.Margin, t.cfg.CenterRewardsCoefficient)
	share := Div(Scalar(r.Graph(), dtypes.Float32, float64(b)), norm)
	return Mul(loss, share), Metrics(chosen, rejected)
}

// Finish implements loop.Finisher: each metric's mean over the window's micro-batches (TRL
// averages its per-batch values at each log), and num_tokens, the tokens trained on so far.
func (t *Trainer) Finish(w loop.Window) map[string]float64 {
	out := map[string]float64{"num_tokens": float64(w.TokensSeen)}
	for name := range w.Sums {
		out[name] = w.Mean(name)
	}
	return out
}

// FromTokens is the Trainer of pairs already tokenized (RewardTrainingIDs' rows) with their
// margins: New without the tokenization (posttrain bench memory compiles its graphs on synthetic
// pairs). m's config must have one label and a pad token id.
func FromTokens(m *trainable.Model, cfg *Config, chosen, rejected [][]int32, margin []float32) (*Trainer, error) {
	if m.Config.NumLabels != 1 || m.Config.PadTokenID == nil {
		return nil, fmt.Errorf("reward: the model must be a classifier with one label and a pad token id")
	}
	if len(chosen) != len(rejected) || len(chosen) != len(margin) {
		return nil, fmt.Errorf("reward: %d chosen, %d rejected rows, %d margins", len(chosen), len(rejected), len(margin))
	}
	return &Trainer{model: m, cfg: cfg, chosen: chosen, rejected: rejected, margin: margin}, nil
}
