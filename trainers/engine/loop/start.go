package loop

import (
	"context"
	"io"
	"log/slog"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Env is what starting a method needs besides its configuration and the directory of its model:
// every method's Run takes it (trainers.Method.Run), whoever calls it (the command line, the
// demos, the tests).
type Env struct {
	Backend backends.Backend
	Logger  *slog.Logger // nil: slog's default logger
	// Progress receives the progress bar (a terminal) or plain log lines; nil discards them.
	Progress io.Writer
	// ResolveModel turns a model option naming another checkpoint (a reward or value model: a
	// local directory or a Hub id) into its local directory; nil: the option is a local directory.
	ResolveModel func(ctx context.Context, ref string) (string, error)
}

// Resolve is ResolveModel(ref), or ref itself when Env has no resolver.
func (e Env) Resolve(ctx context.Context, ref string) (string, error) {
	if e.ResolveModel == nil {
		return ref, nil
	}
	return e.ResolveModel(ctx, ref)
}

// Log is the Env's logger, or slog's default one.
func (e Env) Log() *slog.Logger {
	if e.Logger == nil {
		return slog.Default()
	}
	return e.Logger
}

// RunOnDataset is the start shared by the methods that train on a fixed dataset (SFT, DPO, KTO,
// the reward model): it reads cfg's dataset with read, builds the method on it with build (and on
// eval_dataset when the run evaluates, WithEvalData) and trains m (Run).
func RunOnDataset(ctx context.Context, cfg config.Config, m *trainable.Model, read data.ReadOptions, env Env, build func(*data.Dataset) (Method, error)) (*Result, error) {
	c := cfg.Common()
	train := read
	train.Split, train.Config = c.DatasetTrainSplit, c.DatasetConfig
	var d *data.Dataset
	var err error
	if len(c.Datasets) > 0 { // TRL's mixture, in place of dataset_name
		d, err = data.ReadMixture(c.Datasets, read)
	} else {
		d, err = data.ReadFileWith(c.Dataset, train)
	}
	if err != nil {
		return nil, err
	}
	trainer, err := build(d)
	if err != nil {
		return nil, err
	}
	method, err := WithEvalData(trainer, c, read, build)
	if err != nil {
		return nil, err
	}
	return Run(ctx, m, method, Options{Config: cfg, Backend: env.Backend, Progress: env.Progress, Logger: env.Logger})
}

// TrainOnDataset is RunOnDataset on the checkpoint in modelDir loaded for training
// (trainable.LoadForTraining: float32 masters, bf16 copies, LoRA with use_peft): the start of
// SFT, DPO and KTO.
func TrainOnDataset(ctx context.Context, cfg config.Config, modelDir string, read data.ReadOptions, env Env, build func(*trainable.Model, *data.Dataset) (Method, error)) (*Result, error) {
	m, err := trainable.LoadForTraining(modelDir, cfg)
	if err != nil {
		return nil, err
	}
	return RunOnDataset(ctx, cfg, m, read, env, func(d *data.Dataset) (Method, error) { return build(m, d) })
}
