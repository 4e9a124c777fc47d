package sft

import (
	"context"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Run is `posttrain sft`: the checkpoint in modelDir loaded for training, the dataset read, the
// method built on it and trained (loop.TrainOnDataset: resuming when asked; training_args.yaml,
// metrics.jsonl, the checkpoints and the final model in OUTPUT_DIR).
func Run(ctx context.Context, cfg *Config, modelDir string, env loop.Env) (*loop.Result, error) {
	return loop.TrainOnDataset(ctx, cfg, modelDir, data.ReadOptions{TextField: cfg.DatasetTextField, Stream: true}, env, func(m *trainable.Model, d *data.Dataset) (loop.Method, error) {
		return New(m, d, cfg)
	})
}
