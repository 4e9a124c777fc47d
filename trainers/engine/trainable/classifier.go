package trainable

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/encode"
)

// LoadClassifier reads a checkpoint directory as a sequence-classification model of numLabels
// outputs for training (a reward model: 1), as AutoModelForSequenceClassification.from_pretrained
// does: a *ForSequenceClassification checkpoint as it is, a causal LM without its LM head and
// with a new score head drawn from seed (decoder.LoadClassifier; fresh reports it). Saved, it is
// a *ForSequenceClassification checkpoint (config.json's architectures, id2label, pad_token_id;
// the score.weight tensor).
func LoadClassifier(dir string, bf16 bool, numLabels int, seed uint64) (m *Model, fresh bool, err error) {
	ctx, cfg, fresh, err := decoder.LoadClassifier(dir, dtypes.Float32, numLabels, seed)
	if err != nil {
		return nil, false, err
	}
	txt, err := encode.Load(dir, encode.Options{VocabSize: cfg.VocabSize})
	if err != nil {
		return nil, false, fmt.Errorf("model %s: %w", dir, err)
	}
	m = &Model{Dir: dir, Config: cfg, Ctx: ctx, DType: dtypes.Float32, Text: txt}
	if bf16 {
		if err := m.ToBF16(); err != nil {
			return nil, false, err
		}
	}
	return m, fresh, nil
}
