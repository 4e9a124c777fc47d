package trainable

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/shard"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/trainers/engine/step"
)

// ScoreInputs are token rows as a reward model's graph takes them: ids, HF position ids and
// attention mask [N,T] int32, right-padded, and the position each row is scored at [N] int32
// (decoder.LastNonPad). T is any on the host and *graph.Node in the graph.
type ScoreInputs[T any] struct{ IDs, Pos, Mask, Last T }

// ScoreRows lays out token rows for decoder.Rewards: right-padded to a shape bucket, each scored
// at its last token that is not pad (the model's pad_token_id).
func ScoreRows(rows [][]int32, pad *int) ScoreInputs[any] {
	r := PadRows(rows, make([]int, len(rows)), Bucket(MaxLen(rows)))
	return ScoreInputs[any]{IDs: r.IDs, Pos: r.Pos, Mask: r.Mask, Last: decoder.LastNonPad(r.IDs, r.Mask, pad)}
}

// Scorer runs a reward model forward-only on batches of token rows (GRPO's --reward-model,
// `posttrain score-reward`, PPO's reward model): one compiled graph per shape bucket.
type Scorer struct {
	Model   *Model
	batch   int // rows of a pass on each device
	devices int // SplitRows' devices (1: one)
	eval    *step.ContextEval
}

// NewScorer compiles the reward model m's forward pass on backend, scoring batch rows at a time.
// m must be a classifier with one label (LoadClassifier).
func NewScorer(backend backends.Backend, m *Model, batch int) (*Scorer, error) {
	if m.Config.NumLabels != 1 {
		return nil, fmt.Errorf("reward model %s: want a sequence-classification checkpoint with num_labels 1 (architectures *ForSequenceClassification), got %s",
			m.Dir, describeHead(m.Config))
	}
	if batch < 1 {
		return nil, fmt.Errorf("reward model %s: batch must be ≥ 1, got %d", m.Dir, batch)
	}
	cfg := m.Config
	ev, err := step.NewContextEval(backend, m.Ctx.Reuse(), func(ctx *context.Context, in named.Inputs) map[string]*Node {
		r := named.Bind[ScoreInputs[*Node]](in)
		return map[string]*Node{"rewards": decoder.Rewards(ctx, cfg, r.IDs, r.Pos, r.Mask, r.Last)}
	})
	if err != nil {
		return nil, err
	}
	return &Scorer{Model: m, batch: batch, devices: 1, eval: ev}, nil
}

func describeHead(c *decoder.Config) string {
	if c.IsClassifier() {
		return fmt.Sprintf("num_labels %d", c.NumLabels)
	}
	return "a causal LM (" + c.Family().Architecture + ")"
}

// LoadScorer loads the reward model checkpoint in dir, which must be a *ForSequenceClassification
// one with num_labels 1 (as `posttrain reward` writes: a causal LM's new score head would give
// random rewards), and compiles its scorer. Its config's pad_token_id is the one it was trained
// with; a checkpoint without one gets the tokenizer's pad_token, else its eos_token, as TRL's
// GRPOTrainer gives a reward model.
func LoadScorer(backend backends.Backend, dir string, bf16 bool, batch int) (*Scorer, error) {
	cfg, err := decoder.ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	if cfg.NumLabels != 1 {
		return nil, fmt.Errorf("reward model %s: want a sequence-classification checkpoint with num_labels 1 (architectures *ForSequenceClassification, as `posttrain reward` writes), got %s",
			dir, describeHead(cfg))
	}
	m, _, err := LoadClassifier(dir, bf16, 1, 0)
	if err != nil {
		return nil, err
	}
	if m.Config.PadTokenID == nil { // TRL's GRPOTrainer: the tokenizer's pad_token, else its eos_token
		pad, err := m.Text.PadTokenID("")
		if err != nil {
			return nil, fmt.Errorf("reward model %s: %w", dir, err)
		}
		m.Config.PadTokenID = &pad
	}
	return NewScorer(backend, m, batch)
}

// SplitRows scores over the devices of rows (internal/shard), the batch rows of a pass on each
// device: the rows of a pass split over them, the reward model's weights replicated.
func (s *Scorer) SplitRows(rows *shard.Rows) {
	s.devices = 1
	if rows != nil {
		s.devices = rows.N()
	}
	s.eval.SplitRows(rows)
}

// Score returns the reward of each token row, in order, batch rows at a time.
func (s *Scorer) Score(rows [][]int32) ([]float64, error) {
	out := make([]float64, 0, len(rows))
	pass := s.batch * s.devices
	for lo := 0; lo < len(rows); lo += pass {
		r, err := s.ScoreLayout(ScoreRows(rows[lo:min(lo+pass, len(rows))], s.Model.Config.PadTokenID))
		if err != nil {
			return nil, err
		}
		out = append(out, r...)
	}
	return out, nil
}

// ScoreLayout returns the rewards of one batch of rows laid out by the caller (ids, positions,
// attention mask, and the position each row is scored at), e.g. PPO's TRL get_reward layout.
func (s *Scorer) ScoreLayout(in ScoreInputs[any]) ([]float64, error) {
	outs, err := s.eval.Run(named.Of[any](in))
	if err != nil {
		return nil, fmt.Errorf("reward model %s: %w", s.Model.Dir, err)
	}
	r := outs["rewards"]
	if r.DType() != dtypes.Float32 {
		return nil, fmt.Errorf("reward model %s: rewards of dtype %s, want float32", s.Model.Dir, r.DType())
	}
	out := make([]float64, 0, r.Shape().Dim(0))
	for _, v := range r.Value().([]float32) {
		out = append(out, float64(v))
	}
	return out, nil
}
