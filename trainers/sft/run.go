package sft

import (
	"context"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Run is `posttrain sft`: it loads the checkpoint in modelDir for training (LoRA when use_peft),
// reads the dataset and trains (loop.RunOnDataset: resuming when asked; training_args.yaml,
// metrics.jsonl, the checkpoints and the final model in OUTPUT_DIR).
func Run(ctx context.Context, cfg *Config, modelDir string, env loop.Env) (*loop.Result, error) {
	m, err := trainable.LoadForTraining(modelDir, cfg)
	if err != nil {
		return nil, err
	}
	return loop.RunOnDataset(ctx, cfg, m, data.ReadOptions{TextField: cfg.DatasetTextField}, env, func(d *data.Dataset) (loop.Method, error) {
		return New(m, d, cfg)
	})
}
