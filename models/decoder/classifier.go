package decoder

// The sequence-classification form of every family (transformers' Qwen2ForSequenceClassification,
// Qwen3ForSequenceClassification, LlamaForSequenceClassification): the decoder, no LM head, and a
// linear `score` head without bias [num_labels, hidden] applied to the hidden state of each row's
// last non-padding token. A reward model (TRL's RewardTrainer, PPO's value and reward models) is
// one with num_labels 1.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/safetensors"
)

// ScoreWeight is the HF name of the classification head's weight [num_labels, hidden].
const ScoreWeight = "score.weight"

// classifierSuffix ends the architecture name of a sequence-classification checkpoint.
const classifierSuffix = "ForSequenceClassification"

// IsClassifier reports whether the config is a sequence-classification model (a score head
// instead of the LM head).
func (c *Config) IsClassifier() bool { return c.NumLabels > 0 }

// ClassifierArchitecture is config.json's architectures[0] of the family's classification model,
// e.g. Qwen2ForSequenceClassification.
func (c *Config) ClassifierArchitecture() string {
	if a := c.Family().Classifier; a != "" {
		return a
	}
	return strings.TrimSuffix(c.Family().Architecture, "ForCausalLM") + classifierSuffix
}

// parseClassifier reads what makes a config.json a sequence-classification one, as transformers'
// PretrainedConfig does: architectures[0] ending in ForSequenceClassification, num_labels as the
// size of id2label (else num_labels, else transformers' default 2), and pad_token_id.
func parseClassifier(c *Config, data []byte) error {
	var raw struct {
		Architectures []string          `json:"architectures"`
		ID2Label      map[string]string `json:"id2label"`
		NumLabels     *int              `json:"num_labels"`
		PadTokenID    json.RawMessage   `json:"pad_token_id"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("parse config: %w", err)
	}
	var err error
	if c.PadTokenID, err = optionalID(raw.PadTokenID); err != nil {
		return fmt.Errorf("config field pad_token_id: %w", err)
	}
	if len(raw.Architectures) == 0 || !strings.HasSuffix(raw.Architectures[0], classifierSuffix) {
		return nil
	}
	switch {
	case len(raw.ID2Label) > 0:
		c.NumLabels = len(raw.ID2Label)
	case raw.NumLabels != nil:
		c.NumLabels = *raw.NumLabels
	default:
		c.NumLabels = 2
	}
	if c.NumLabels < 1 {
		return fmt.Errorf("config field num_labels: must be ≥ 1 for %s, got %d", raw.Architectures[0], c.NumLabels)
	}
	return nil
}

// classifierConfigJSON sets the keys of a classification model's config.json: its architecture,
// id2label/label2id (from which transformers derives num_labels) and pad_token_id, which
// *ForSequenceClassification needs to find the last token of a padded row.
func classifierConfigJSON(m map[string]any, cfg *Config) {
	if !cfg.IsClassifier() {
		return
	}
	m["architectures"] = []string{cfg.ClassifierArchitecture()}
	id2label, label2id := map[string]string{}, map[string]int{}
	for i := range cfg.NumLabels {
		id2label[fmt.Sprint(i)] = fmt.Sprintf("LABEL_%d", i)
		label2id[fmt.Sprintf("LABEL_%d", i)] = i
	}
	m["id2label"], m["label2id"] = id2label, label2id
	delete(m, "num_labels")
	if cfg.PadTokenID != nil {
		m["pad_token_id"] = *cfg.PadTokenID
	}
}

// LastNonPad is the position each row's score is read at, as *ForSequenceClassification picks it:
// the rightmost token that is not pad_token_id (so with pad = eos a trailing EOS is skipped), only
// among the row's real tokens (mask 1; posttrain pads with id 0), and 0 when there is none
// (torch's argmax of zeros). pad nil: the last real token.
func LastNonPad(ids, mask [][]int32, pad *int) []int32 {
	out := make([]int32, len(ids))
	for r, row := range ids {
		for t, id := range row {
			if mask[r][t] == 1 && (pad == nil || int(id) != *pad) {
				out[r] = int32(t)
			}
		}
	}
	return out
}

// Scores applies the score head to the hidden state [B,T,D] at positions last [B] (int32):
// [B, num_labels] float32, HF's pooled logits. The row's hidden state is picked by a one-hot
// contraction (its gradient reaches only that position).
func Scores(ctx *context.Context, cfg *Config, hidden, last *Node) *Node {
	g := hidden.Graph()
	t := hidden.Shape().Dim(1)
	pick := OneHot(last, t, hidden.DType())      // [B,T]
	pooled := Einsum("bt,btd->bd", pick, hidden) // [B,D]
	w := weight(ctx.Reuse().In("score"), g, "weight", hidden.DType(), cfg.NumLabels, cfg.HiddenSize)
	s := DotGeneral(pooled, []int{1}, nil, w, []int{1}, nil) // [B,L]
	return ConvertDType(s, dtypes.Float32)
}

// Rewards is the reward model's forward pass: ids, pos, mask [B,T] and last [B] (LastNonPad) →
// the scalar rewards [B] float32 (num_labels must be 1).
func Rewards(ctx *context.Context, cfg *Config, ids, pos, mask, last *Node) *Node {
	s := Scores(ctx, cfg, Hidden(ctx, cfg, ids, pos, mask), last)
	return Reshape(s, s.Shape().Dim(0))
}

// scoreHeadRandSeed2 is the second PCG word of a new score head's initialisation stream.
const scoreHeadRandSeed2 = 0x5c04e4ead

// NewScoreHead draws a new score head [numLabels, hidden] as transformers initialises one that a
// checkpoint does not have (_init_weights of an nn.Linear: N(0, initializer_range²)), from seed.
func NewScoreHead(cfg *Config, numLabels int, seed uint64) *safetensors.Tensor {
	rng := rand.New(rand.NewPCG(seed, scoreHeadRandSeed2))
	data := make([]float32, numLabels*cfg.HiddenSize)
	for i := range data {
		data[i] = float32(rng.NormFloat64() * cfg.InitializerRange)
	}
	return safetensors.FromFloat32s(ScoreWeight, []int{numLabels, cfg.HiddenSize}, data, "F32")
}

// LoadClassifier reads the checkpoint in dir as a sequence-classification model with numLabels
// labels, as AutoModelForSequenceClassification.from_pretrained(dir, num_labels=numLabels) does:
// a classification checkpoint loads as it is (its num_labels must be numLabels); a causal LM
// loses its LM head and gets a new score head drawn from seed (NewScoreHead). fresh reports the
// latter.
func LoadClassifier(dir string, dtype dtypes.DType, numLabels int, seed uint64) (ctx *context.Context, cfg *Config, fresh bool, err error) {
	if cfg, err = ReadConfig(dir); err != nil {
		return nil, nil, false, err
	}
	if cfg.IsClassifier() && cfg.NumLabels != numLabels {
		return nil, nil, false, fmt.Errorf("%s %s: the checkpoint is a %s with num_labels %d, want %d", cfg.errName(), dir, cfg.ClassifierArchitecture(), cfg.NumLabels, numLabels)
	}
	stored, err := safetensors.ReadModelDir(dir)
	if err != nil {
		return nil, nil, false, fmt.Errorf("%s: %w", cfg.errName(), err)
	}
	if !cfg.IsClassifier() {
		fresh = true
		cfg.NumLabels = numLabels
		delete(stored, "lm_head.weight")
		stored[ScoreWeight] = NewScoreHead(cfg, numLabels, seed)
	}
	ctx = context.New()
	if err := SetWeights(ctx, cfg, stored, dtype, weightsFile(dir)); err != nil {
		return nil, nil, false, err
	}
	return ctx, cfg, fresh, nil
}

// TokenScores applies the score head to every position of hidden [B,T,D]: [B,T,num_labels]
// float32, transformers' model.score(hidden_states[-1]) before the pooling (TRL's PPO reads its
// value model this way, one value per token).
func TokenScores(ctx *context.Context, cfg *Config, hidden *Node) *Node {
	w := weight(ctx.Reuse().In("score"), hidden.Graph(), "weight", hidden.DType(), cfg.NumLabels, cfg.HiddenSize)
	s := DotGeneral(hidden, []int{2}, nil, w, []int{1}, nil) // [B,T,L]
	return ConvertDType(s, dtypes.Float32)
}
