package loop

import (
	"encoding/json"
	"fmt"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/fsmode"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/internal/tensorboard"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/lora"
	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/trainers/engine/config"
)

// OptimizerName is the checkpoint file holding AdamW's state: exp_avg.<HF name> and
// exp_avg_sq.<HF name> (float32), as PyTorch names the moments.
const OptimizerName = "optimizer.safetensors"

// extra is trainer_state.json's "extra" of a Method's run: what an exact resume needs beyond HF's
// keys.
type extra struct {
	OptimizerSteps int    `json:"optimizer_steps"` // AdamW's step count t
	Window         window `json:"window"`          // metrics accumulated since the last log line
}

// RunFiles is what a run writes at the top of OUTPUT_DIR besides its checkpoint-N directories:
// the logs (with report_to tensorboard, the runs/ directory of event files) and the resolved
// configuration (Files), and the final model's files (Model: weights, configs, tokenizer, the
// value model, the model card), which the final save lists in checkpoint.ModelMark.
// overwrite_output_dir removes exactly these (the model's only when the mark lists them, and the
// checkpoints and temporaries); any other file in the directory is left alone, and model files the
// mark does not list refuse the directory.
var RunFiles = checkpoint.Run{
	Files: []string{runlog.MetricsName, runlog.CompletionsName, "eval_completions.jsonl", config.ResolvedName, tensorboard.RunsDir},
	Marks: []string{runlog.MetricsName, runlog.CompletionsName, "eval_completions.jsonl"},
	Model: append([]string{trainable.CardName, "model.safetensors", "model-*-of-*.safetensors", "model.safetensors.index.json",
		decoder.ConfigFileName, decoder.GenerationConfigFileName, lora.ConfigName, lora.WeightsName, trainable.ValueDir}, decoder.TokenizerFiles...),
}

// CheckOutputDir checks, before any work, what the driver checks again when it starts
// (prepareOutput): no input of cfg (nor configFile, the --config file) is or lies in output_dir;
// a previous run there needs resume or overwrite; a model posttrain did not write refuses it; a live
// run there refuses it, naming its pid. When output_dir exists it then takes its lock
// (checkpoint.Lock) for the rest of the run, so a second run is refused before it loads anything;
// release gives it back. A refusal writes nothing.
func CheckOutputDir(cfg config.Config, configFile string) (release func(), err error) {
	c := cfg.Common()
	if err := checkInputs(cfg, configFile); err != nil {
		return nil, err
	}
	if err := checkpoint.CheckUnlocked(c.OutputDir); err != nil {
		return nil, err
	}
	if err := RunFiles.Check(c.OutputDir, resuming(c), c.OverwriteOutputDir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(c.OutputDir); err != nil {
		return func() {}, nil // made and locked when the driver starts
	}
	return checkpoint.Lock(c.OutputDir)
}

// checkInputs refuses an output_dir that is or contains a path the run reads, with or without
// overwrite_output_dir (a run's own checkpoint read by --resume is not an input).
func checkInputs(cfg config.Config, configFile string) error {
	inputs := config.Inputs(cfg)
	if configFile != "" {
		inputs = append(inputs, checkpoint.Input{Name: "the configuration (--config)", Path: configFile})
	}
	return checkpoint.CheckOutside("output_dir", cfg.Common().OutputDir, inputs)
}

func resuming(cfg *config.Training) bool { return cfg.Resume || cfg.ResumeFromCheckpoint != "" }

// prepareOutput readies OUTPUT_DIR before anything is written to it: it takes the directory's lock
// (released by close), refuses inputs inside it, then checkpoint.Run.Start: stale temporaries of a
// killed run are removed; a previous run there needs --resume, or --overwrite-output-dir, which
// removes it first.
func (d *driver) prepareOutput() error {
	release, err := checkpoint.Lock(d.cfg.OutputDir)
	if err != nil {
		return err
	}
	d.unlock = release
	if err := checkInputs(d.opts.Config, ""); err != nil {
		return err
	}
	return RunFiles.Start(d.cfg.OutputDir, resuming(d.cfg), d.cfg.OverwriteOutputDir, d.logger)
}

// modelFiles writes the model into a temporary directory under the output directory and returns
// writers that move each file into place, for checkpoint.Save and checkpoint.WriteFiles.
func (d *driver) modelFiles() (map[string]checkpoint.WriteFunc, func(), error) {
	if err := os.MkdirAll(d.cfg.OutputDir, 0o755); err != nil {
		return nil, nil, err
	}
	tmp, err := fsmode.MkdirTemp(d.cfg.OutputDir, checkpoint.ModelTmpPrefix)
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	if err := d.m.Save(tmp); err != nil {
		cleanup()
		return nil, nil, err
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	files := map[string]checkpoint.WriteFunc{}
	for _, e := range entries {
		src := filepath.Join(tmp, e.Name())
		files[e.Name()] = func(path string) error { return os.Rename(src, path) }
	}
	return files, cleanup, nil
}

// save writes OUTPUT_DIR/checkpoint-<step>: the model (HF layout), the optimizer state,
// trainer_state.json and the source's state and files, atomically; then prunes to
// save_total_limit.
func (d *driver) save() error {
	files, cleanup, err := d.modelFiles()
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	defer cleanup()
	files[OptimizerName] = d.opt.WriteState
	args, err := config.MarshalRun(d.opts.Config)
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	files[config.ResolvedName] = func(path string) error { return os.WriteFile(path, args, 0o644) }
	epoch, _ := d.src.Epoch()
	st := &checkpoint.State{
		GlobalStep: d.step, Epoch: epoch, MaxSteps: d.total, NumTrainEpochs: d.cfg.NumTrainEpochs,
		LoggingSteps: d.cfg.LoggingSteps, SaveSteps: d.cfg.SaveSteps,
		TrainBatchSize: d.cfg.PerDeviceTrainBatchSize * d.cfg.GradientAccumulationSteps,
		LogHistory:     d.history,
		Method:         d.opts.Config.Method(), Fingerprints: d.fps,
	}
	if err := d.src.Save(&Checkpoint{State: st, Files: files, OptimizerSteps: d.opt.Steps()}); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	dir, err := checkpoint.Save(d.cfg.OutputDir, st, files, d.cfg.SaveTotalLimit)
	if err != nil {
		return err
	}
	d.lastSaved = d.step
	d.saved = append(d.saved, dir)
	d.logger.Info("saved checkpoint", "dir", dir)
	return nil
}

// saveFinal writes the final model into OUTPUT_DIR itself, as HF's trainer.save_model(), with its
// model card (README.md), as TRL's trainers write one.
func (d *driver) saveFinal() error {
	files, cleanup, err := d.modelFiles()
	if err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	defer cleanup()
	card := trainable.ModelCard(d.opts.Config, d.step, d.last)
	files[trainable.CardName] = func(path string) error { return os.WriteFile(path, card, 0o644) }
	return checkpoint.WriteModelFiles(d.cfg.OutputDir, "posttrain "+d.opts.Config.Method(), files)
}

// resume checks the checkpoint (Load's validation, then checkResume), then restores the source's position and state, then the weights and the optimizer state,
// from a checkpoint.
func (d *driver) resume(dir string) error {
	st, err := checkpoint.Load(dir)
	if err != nil {
		return err
	}
	if err := d.checkResume(dir, st); err != nil {
		return err
	}
	optSteps, err := d.src.Resume(dir, st)
	if err != nil {
		return err
	}
	if err := d.resumeWeights(dir); err != nil {
		return err
	}
	if err := d.opt.ReadState(filepath.Join(dir, OptimizerName), optSteps); err != nil {
		return err
	}
	d.step, d.history, d.lastSaved = st.GlobalStep, st.LogHistory, st.GlobalStep
	return nil
}

// resumeWeights restores the trained weights of a checkpoint: the model's, or the adapter's
// (adapter_model.safetensors) over the base weights this run loaded.
func (d *driver) resumeWeights(dir string) error {
	if d.m.Adapter != nil {
		weights, err := lora.ReadWeights(dir)
		if err != nil {
			return err
		}
		return d.m.SetAdapterWeights(weights, filepath.Join(dir, lora.WeightsName))
	}
	weights, err := safetensors.ReadModelDir(dir)
	if err != nil {
		return err
	}
	byName, err := trainable.Float32Tensors(weights, "")
	if err != nil {
		return err
	}
	if err := d.m.SetWeights(byName); err != nil {
		return err
	}
	return d.m.ResumeValue(dir)
}

// Save adds the data position (pass and offset, with the seed that orders each pass), the tokens
// seen, AdamW's step count and the unlogged window to the checkpoint.
func (s *methodSource) Save(cp *Checkpoint) error {
	ex, err := json.Marshal(extra{OptimizerSteps: cp.OptimizerSteps, Window: s.win})
	if err != nil { // not reached: the window's floats are written exactly, NaN included
		return fmt.Errorf("checkpoint state: %w", err)
	}
	st := cp.State
	st.NumInputTokensSeen = s.tokensSeen
	st.Data = checkpoint.DataPosition{Epoch: s.epoch, Offset: s.offset}
	st.RNG = map[string][]uint64{"data_order": {uint64(s.cfg.Seed)}}
	st.Extra = map[string]json.RawMessage{"posttrain": ex}
	return nil
}

// Resume restores what Save added.
func (s *methodSource) Resume(_ string, st *checkpoint.State) (int, error) {
	var ex extra
	if raw, ok := st.Extra["posttrain"]; ok {
		if err := json.Unmarshal(raw, &ex); err != nil {
			return 0, fmt.Errorf("%s: extra: %w", checkpoint.StateName, err)
		}
	}
	if st.Data.Offset < 0 || st.Data.Offset > s.n {
		return 0, fmt.Errorf("data position %d is outside the %d examples (is this the same dataset?)", st.Data.Offset, s.n)
	}
	s.step, s.epoch, s.offset = st.GlobalStep, st.Data.Epoch, st.Data.Offset
	s.order = s.passOrder(s.epoch)
	s.tokensSeen = st.NumInputTokensSeen
	s.win = ex.Window
	if s.win.Sums == nil {
		s.win.Sums = map[string]float64{}
	}
	return ex.OptimizerSteps, nil
}

// WriteState writes the AdamW moments to path as safetensors (exp_avg.<HF name>, exp_avg_sq.<HF
// name>, float32; none for the plain step); AdamW's step count goes to trainer_state.json.
func (o *Optimizer) WriteState(path string) error {
	var out []*safetensors.Tensor
	for i, name := range o.names[:len(o.expAvg)] {
		for _, s := range []struct {
			prefix string
			v      *context.Variable
		}{{"exp_avg.", o.expAvg[i]}, {"exp_avg_sq.", o.expAvg2[i]}} {
			v, err := s.v.Value()
			if err != nil {
				return err
			}
			f, err := decoder.Float32s(v)
			if err != nil {
				return err
			}
			out = append(out, safetensors.FromFloat32s(s.prefix+name, v.Shape().Dimensions, f, "F32"))
		}
	}
	return safetensors.WriteFile(path, out, map[string]string{"format": "pt"})
}

// ReadState restores the AdamW moments written by WriteState and sets the step count to steps.
func (o *Optimizer) ReadState(path string, steps int) error {
	opt, _, err := safetensors.ReadFile(path)
	if err != nil {
		return err
	}
	for i, name := range o.names[:len(o.expAvg)] {
		for _, s := range []struct {
			key string
			v   *context.Variable
		}{{"exp_avg." + name, o.expAvg[i]}, {"exp_avg_sq." + name, o.expAvg2[i]}} {
			st, ok := opt[s.key]
			if !ok {
				return fmt.Errorf("%s: tensor %s is missing", path, s.key)
			}
			f, err := st.Float32s()
			if err != nil {
				return err
			}
			if err := s.v.SetValue(tensors.FromFlatDataAndDimensions(f, st.Shape...)); err != nil {
				return err
			}
		}
	}
	o.steps = steps
	return nil
}
