package grpo

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/trainers/loop"
)

// grpoState is trainer_state.json's extra for GRPO: what a resume needs beyond HF's keys. As in
// TRL (grpo_trainer.py L1001-1009), buffered rollouts are not saved: a resumed run generates a
// fresh batch, from the saved prompt position and generation round (which seeds the sampler).
type grpoState struct {
	Round          int `json:"round"`
	OptimizerSteps int `json:"optimizer_steps"`
	// RandomRewardCalls is the "random" reward's call count (its draws depend on it); absent when
	// the run never called it.
	RandomRewardCalls uint64 `json:"random_reward_calls,omitempty"`
}

// save writes OUTPUT_DIR/checkpoint-<step>: the model (HF layout, via loop.Model.Save), the AdamW
// state (loop.OptimizerName), the reference weights once sync_ref_model has mixed them
// (ReferenceName) and trainer_state.json, atomically; then prunes to save_total_limit.
func (t *Trainer) save() (string, error) {
	if err := os.MkdirAll(t.cfg.OutputDir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(t.cfg.OutputDir, ".model-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := t.s.Model.Save(tmp); err != nil {
		return "", fmt.Errorf("grpo: save checkpoint: %w", err)
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return "", err
	}
	files := map[string]checkpoint.WriteFunc{loop.OptimizerName: t.opt.WriteState}
	if t.ref != nil && t.globalStep >= t.cfg.RefModelSyncSteps { // synced at least once
		files[ReferenceName] = t.writeReference
	}
	for _, e := range entries {
		src := filepath.Join(tmp, e.Name())
		files[e.Name()] = func(path string) error { return os.Rename(src, path) }
	}
	extra, _ := json.Marshal(grpoState{Round: t.round, OptimizerSteps: t.opt.Steps(), RandomRewardCalls: randomCalls.Load()})
	st := &checkpoint.State{
		GlobalStep: t.globalStep, Epoch: t.epochAt(t.globalStep), MaxSteps: t.totalSteps,
		NumTrainEpochs: t.cfg.NumTrainEpochs, LoggingSteps: t.cfg.LoggingSteps, SaveSteps: t.cfg.SaveSteps,
		TrainBatchSize: t.stepBatch, NumInputTokensSeen: t.tokensSeen, LogHistory: t.history,
		Data:  checkpoint.DataPosition{Epoch: t.epoch, Offset: t.offset},
		RNG:   map[string][]uint64{"prompt_order": {uint64(t.cfg.Seed)}},
		Extra: map[string]json.RawMessage{"grpo": extra},
	}
	dir, err := checkpoint.Save(t.cfg.OutputDir, st, files, t.cfg.SaveTotalLimit)
	if err != nil {
		return "", fmt.Errorf("grpo: %w", err)
	}
	t.log.Info("grpo: saved checkpoint", "dir", dir)
	return dir, nil
}

// resume restores the weights, the AdamW state, the synced reference weights and the run's
// position from a checkpoint.
func (t *Trainer) resume(dir string) error {
	st, err := checkpoint.Load(dir)
	if err != nil {
		return err
	}
	var gs grpoState
	if err := json.Unmarshal(st.Extra["grpo"], &gs); err != nil {
		return fmt.Errorf("resume %s: not a GRPO checkpoint (trainer_state.json extra.grpo): %w", dir, err)
	}
	stored, err := safetensors.ReadModelDir(dir)
	if err != nil {
		return fmt.Errorf("resume %s: %w", dir, err)
	}
	weights := map[string]*tensors.Tensor{}
	for name, s := range stored {
		f, err := s.Float32s()
		if err != nil {
			return fmt.Errorf("resume %s: %s: %w", dir, name, err)
		}
		weights[name] = tensors.FromFlatDataAndDimensions(f, s.Shape...)
	}
	if err := t.s.Model.SetWeights(weights); err != nil {
		return fmt.Errorf("resume %s: %w", dir, err)
	}
	if err := t.opt.ReadState(filepath.Join(dir, loop.OptimizerName), gs.OptimizerSteps); err != nil {
		return fmt.Errorf("resume %s: %w", dir, err)
	}
	if t.ref != nil {
		if err := t.readReference(dir, st.GlobalStep); err != nil {
			return fmt.Errorf("resume %s: %w", dir, err)
		}
	}
	t.globalStep, t.round, t.tokensSeen = st.GlobalStep, gs.Round, st.NumInputTokensSeen
	randomCalls.Store(gs.RandomRewardCalls)
	t.epoch, t.offset, t.order = st.Data.Epoch, st.Data.Offset, nil
	t.history = st.LogHistory
	t.log.Info("grpo: resumed", "checkpoint", dir, "step", t.globalStep)
	return nil
}
