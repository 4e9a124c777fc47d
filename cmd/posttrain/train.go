package main

// Shared by every training command (sft, dpo, kto, reward, grpo, ppo): flags from the method's TRL config
// (trainers.Lookup), the output directory, backend and model resolution, Ctrl-C checkpointing, and the
// method's Run.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/gomlx/gomlx/backends"
	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/models/hub"
	"github.com/posttrain/posttrain/trainers"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
)

// trainCommand is `posttrain <method> --model M --dataset FILE --output-dir DIR [flags]`: the
// method's configuration (trainers.Lookup) from its defaults, --config and the flags, then the
// method's Run (runTrain). check, when set, refuses a configuration before anything is opened
// (a usage error); summary, when set, is the run's last line (else trainSummary's).
func trainCommand(method, usage, description string, check func(config.Config) error, summary func(config.Config, *loop.Result) string) *cli.Command {
	m, err := trainers.Lookup(method)
	if err != nil {
		panic(err)
	}
	freshFlags[method] = func() []cli.Flag { return config.Flags(m.Default()) }
	return &cli.Command{
		Name:        method,
		Usage:       usage,
		Description: description,
		Flags:       config.Flags(m.Default()),
		Action: configAction(m.Default, func(ctx context.Context, cmd *cli.Command, cfg config.Config) error {
			if check != nil {
				if err := check(cfg); err != nil {
					return usageError{err}
				}
			}
			return runTrain(ctx, cmd, cfg, m, summary)
		}),
	}
}

// configAction is a trainer command's Action: no positional arguments, the configuration from
// newCfg's defaults, --config and the flags (a bad one is a usage error naming it), then run; its
// error is prefixed with the command's name.
func configAction[C config.Config](newCfg func() C, run func(context.Context, *cli.Command, C) error) cli.ActionFunc {
	return func(ctx context.Context, cmd *cli.Command) error {
		if cmd.Args().Len() > 0 {
			return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
		}
		cfg := newCfg()
		if err := config.FromCommand(cmd, cfg); err != nil {
			return usageError{err}
		}
		if err := run(ctx, cmd, cfg); err != nil {
			return fmt.Errorf("%s: %w", cmd.FullName(), err)
		}
		return nil
	}
}

// runTrain opens the session (the output directory, the backend, the model's directory), runs the
// method and prints its summary. Ctrl-C saves a checkpoint and returns an error naming it (a
// second Ctrl-C exits at once).
func runTrain(ctx context.Context, cmd *cli.Command, cfg config.Config, m trainers.Method, summary func(config.Config, *loop.Result) string) error {
	s, err := openTrainSession(ctx, cmd, cfg)
	if err != nil {
		return err
	}
	defer s.close()
	res, err := m.Run(s.ctx, cfg, s.dir, loop.Env{Backend: s.b, Logger: s.logger, Progress: s.progress, ResolveModel: resolveModel})
	if err != nil {
		return err
	}
	line := trainSummary(cfg.Method(), res, cfg.Common().OutputDir)
	if summary != nil {
		line = summary(cfg, res)
	}
	_, err = fmt.Fprintln(cmd.Root().Writer, line)
	return err
}

// trainSession is what a trainer command opens before its trainer, in this order: the output
// directory checked and, when it exists, locked (before anything is loaded or downloaded), a logger on the error stream, Ctrl-C
// saving a checkpoint (checkpoint.NotifyContext; --resume continues), the model resolved (a local
// directory or the Hub) and the backend.
type trainSession struct {
	ctx      context.Context // cancelled by Ctrl-C
	logger   *slog.Logger
	progress io.Writer // the progress bar's stream
	dir      string    // the model's local directory
	b        backends.Backend
	stop     func()
	unlock   func() // releases the output directory's lock
}

func openTrainSession(ctx context.Context, cmd *cli.Command, cfg config.Config) (*trainSession, error) {
	if err := checkOutsideGGUFCache("output_dir", cfg.Common().OutputDir); err != nil {
		return nil, err
	}
	if err := checkDatasetIsAFile(cfg.Common().Dataset); err != nil {
		return nil, err
	}
	unlock, err := loop.CheckOutputDir(cfg, cmd.String(config.ConfigFlag))
	if err != nil {
		return nil, err
	}
	c := cfg.Common()
	errw := cmd.Root().ErrWriter
	logger := slog.New(slog.NewTextHandler(errw, nil))
	ctx, stop := checkpoint.NotifyContext(ctx, logger)
	// The backend first: --devices is checked against it before the model is resolved.
	b, err := newBackendWith(errw, c.Backend, backend.Options{GPU: backend.GPUOptions{
		MemoryFraction: c.GPUMemoryFraction, Deterministic: c.FullDeterminism, TF32: c.TF32}})
	if err == nil && c.DefaultBF16OnGPU(backend.IsCUDA(backend.Resolve(c.Backend)), config.Given(cmd, cfg, "bf16")) {
		logger.Info("bf16 on: TRL's default on a GPU (float32 master weights and optimizer state); --bf16=false trains in float32")
	}
	if err == nil {
		err = config.ResolveDevices(cfg, backend.Resolve(c.Backend), b.NumDevices(), backend.IsPureGo(b), backend.IsXLACPU(b))
		if err != nil {
			b.Finalize()
			err = usageError{err}
		}
	}
	var dir string
	if err == nil {
		if dir, err = resolveModel(ctx, c.Model); err != nil {
			b.Finalize()
		}
	}
	if err == nil { // Hub dataset ids to their snapshots in the cache
		// Only the files of the splits the run reads: the train split, and the test split where
		// the run evaluates on dataset_name's.
		train := hub.DatasetFiles{Config: c.DatasetConfig, Splits: []string{c.DatasetTrainSplit}}
		if (c.EvalStrategy != "no" || c.EvalOnStart) && c.EvalDataset == "" {
			train.Splits = append(train.Splits, c.DatasetTestSplit)
		}
		if c.Dataset, err = resolveDataset(ctx, "dataset_name", c.Dataset, train); err == nil {
			c.EvalDataset, err = resolveDataset(ctx, "eval_dataset", c.EvalDataset,
				hub.DatasetFiles{Config: c.DatasetConfig, Splits: []string{c.DatasetTestSplit}})
		}
		for i, e := range c.Datasets {
			if err == nil {
				c.Datasets[i].Path, err = resolveDataset(ctx, fmt.Sprintf("datasets[%d]", i), e.Path,
					hub.DatasetFiles{Config: e.Name, Splits: []string{cmp.Or(e.Split, "train")}})
			}
		}
		if err != nil {
			b.Finalize()
		}
	}
	if err != nil {
		stop()
		unlock()
		return nil, err
	}
	return &trainSession{ctx: ctx, logger: logger, progress: errw, dir: dir, b: b, stop: stop, unlock: unlock}, nil
}

// close frees the backend, stops listening for Ctrl-C and releases the output directory.
func (s *trainSession) close() {
	s.b.Finalize()
	s.stop()
	s.unlock()
}

// trainSummary is a run's last line: the steps, the last logged loss (when a training line was
// logged: a resume of a finished run trains nothing and logs none), where the model and metrics are.
func trainSummary(method string, res *loop.Result, outputDir string) string {
	var steps string
	switch {
	case res.Steps == res.Start && res.Start > 0:
		steps = fmt.Sprintf("nothing left to train: resumed at step %d, where the run ends", res.Start)
	case res.Start > 0:
		steps = fmt.Sprintf("%d steps (%d after resuming at step %d)", res.Steps, res.Steps-res.Start, res.Start)
	default:
		steps = fmt.Sprintf("%d steps", res.Steps)
	}
	if loss, ok := res.Last.Metrics["loss"]; ok && res.Steps > res.Start {
		steps += fmt.Sprintf("; loss %.4g", loss)
	}
	return fmt.Sprintf("%s: %s; model in %s, metrics in %s/metrics.jsonl", method, steps, outputDir, outputDir)
}

// checkDatasetIsAFile refuses a dataset_name that is a pipe, a device or a socket (`--dataset
// <(zcat x.jsonl.gz)`): the run reads it once, and the resume check and the model card identify
// the dataset by hashing its content again, which a pipe no longer has; that fingerprint would be
// the empty file's. A registered source (a name that is no file) and a regular file pass.
func checkDatasetIsAFile(path string) error {
	st, err := os.Stat(path)
	if err != nil || st.Mode().IsRegular() || st.IsDir() {
		return nil // missing or a directory: the dataset reader says what it is
	}
	return fmt.Errorf("dataset_name (--dataset) %s is not a regular file (%s): a run fingerprints its dataset by content for --resume and the model card, which a pipe cannot give twice; write it to a file first", path, st.Mode().Type())
}
