package loop

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/models/qwen2"
	"github.com/posttrain/posttrain/models/safetensors"
)

// OptimizerName is the checkpoint file holding AdamW's state: exp_avg.<HF name> and
// exp_avg_sq.<HF name> (float32), as PyTorch names the moments.
const OptimizerName = "optimizer.safetensors"

// extra is trainer_state.json's "extra": what an exact resume needs beyond HF's keys.
type extra struct {
	OptimizerSteps int    `json:"optimizer_steps"` // AdamW's step count t
	Window         window `json:"window"`          // metrics accumulated since the last log line
}

// modelFiles writes the model into a temporary directory under the output directory and returns
// writers that move each file into place, for checkpoint.Save and checkpoint.WriteFiles.
func (t *trainer) modelFiles() (map[string]checkpoint.WriteFunc, func(), error) {
	tmp, err := os.MkdirTemp(t.cfg.OutputDir, ".model-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	if err := t.m.Save(tmp); err != nil {
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

// save writes OUTPUT_DIR/checkpoint-<step>: the model (HF layout), the optimizer state and
// trainer_state.json with the data position, atomically; then prunes to save_total_limit.
func (t *trainer) save() error {
	files, cleanup, err := t.modelFiles()
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	defer cleanup()
	files[OptimizerName] = t.opt.WriteState
	ex, _ := json.Marshal(extra{OptimizerSteps: t.opt.Steps(), Window: t.win})
	st := &checkpoint.State{
		GlobalStep: t.step, Epoch: t.epochFloat(), MaxSteps: t.total, NumTrainEpochs: t.cfg.NumTrainEpochs,
		LoggingSteps: t.cfg.LoggingSteps, SaveSteps: t.cfg.SaveSteps,
		TrainBatchSize:     t.cfg.PerDeviceTrainBatchSize * t.cfg.GradientAccumulationSteps,
		NumInputTokensSeen: t.tokensSeen, LogHistory: t.history,
		Data:  checkpoint.DataPosition{Epoch: t.epoch, Offset: t.offset},
		RNG:   map[string][]uint64{"data_order": {uint64(t.cfg.Seed)}},
		Extra: map[string]json.RawMessage{"posttrain": ex},
	}
	dir, err := checkpoint.Save(t.cfg.OutputDir, st, files, t.cfg.SaveTotalLimit)
	if err != nil {
		return err
	}
	t.lastSaved = t.step
	t.saved = append(t.saved, dir)
	t.logger.Info("saved checkpoint", "dir", dir)
	return nil
}

// saveFinal writes the final model into OUTPUT_DIR itself, as HF's trainer.save_model().
func (t *trainer) saveFinal() error {
	files, cleanup, err := t.modelFiles()
	if err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	defer cleanup()
	return checkpoint.WriteFiles(t.cfg.OutputDir, files)
}

// WriteState writes the AdamW moments to path as safetensors (exp_avg.<HF name>, exp_avg_sq.<HF
// name>, float32); AdamW's step count goes to trainer_state.json.
func (o *Optimizer) WriteState(path string) error {
	var out []*safetensors.Tensor
	for i, name := range o.names {
		for _, s := range []struct {
			prefix string
			v      *context.Variable
		}{{"exp_avg.", o.expAvg[i]}, {"exp_avg_sq.", o.expAvg2[i]}} {
			v, err := s.v.Value()
			if err != nil {
				return err
			}
			f, err := qwen2.Float32s(v)
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
	for i, name := range o.names {
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

// resume restores the weights, the optimizer state and the position from a checkpoint.
func (t *trainer) resume(dir string) error {
	st, err := checkpoint.Load(dir)
	if err != nil {
		return err
	}
	var ex extra
	if raw, ok := st.Extra["posttrain"]; ok {
		if err := json.Unmarshal(raw, &ex); err != nil {
			return fmt.Errorf("%s: extra: %w", checkpoint.StateName, err)
		}
	}
	weights, err := safetensors.ReadModelDir(dir)
	if err != nil {
		return err
	}
	byName, err := float32Tensors(weights, "")
	if err != nil {
		return err
	}
	if err := t.m.SetWeights(byName); err != nil {
		return err
	}
	if err := t.opt.ReadState(filepath.Join(dir, OptimizerName), ex.OptimizerSteps); err != nil {
		return err
	}
	if st.Data.Offset < 0 || st.Data.Offset > t.n {
		return fmt.Errorf("data position %d is outside the %d examples (is this the same dataset?)", st.Data.Offset, t.n)
	}
	t.step, t.epoch, t.offset = st.GlobalStep, st.Data.Epoch, st.Data.Offset
	t.order = Order(t.n, t.cfg.Seed, t.epoch)
	t.tokensSeen, t.history, t.lastSaved = st.NumInputTokensSeen, st.LogHistory, st.GlobalStep
	t.win = ex.Window
	if t.win.Sums == nil {
		t.win.Sums = map[string]float64{}
	}
	return nil
}

// float32Tensors converts stored tensors (any float dtype) to float32 GoMLX tensors by name.
func float32Tensors(stored map[string]*safetensors.Tensor, prefix string) (map[string]*tensors.Tensor, error) {
	out := make(map[string]*tensors.Tensor, len(stored))
	for name, st := range stored {
		f, err := st.Float32s()
		if err != nil {
			return nil, err
		}
		out[prefix+name] = tensors.FromFlatDataAndDimensions(f, st.Shape...)
	}
	return out, nil
}
