package reward

import (
	"context"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Run is `posttrain reward`: it loads the checkpoint in modelDir as a sequence classifier with one
// label (a causal LM gets a new score head, as AutoModelForSequenceClassification), reads the
// preference pairs and trains (loop.RunOnDataset).
func Run(ctx context.Context, cfg *Config, modelDir string, env loop.Env) (*loop.Result, error) {
	m, fresh, err := trainable.LoadClassifier(modelDir, cfg.BF16, 1, uint64(cfg.Seed))
	if err != nil {
		return nil, err
	}
	if fresh {
		env.Log().Info("reward model: a causal LM; its LM head is dropped and a new score head drawn (AutoModelForSequenceClassification, num_labels 1)", "model", modelDir)
	}
	return loop.RunOnDataset(ctx, cfg, m, data.ReadOptions{}, env, func(d *data.Dataset) (loop.Method, error) {
		return New(m, d, cfg)
	})
}
