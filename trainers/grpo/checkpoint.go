package grpo

import (
	"encoding/json"
	"fmt"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/trainers/engine/loop"
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
	// Window is the unlogged metrics of the logging window (absent at a logging step, where it
	// is empty), so that a resumed run logs the lines of a straight one.
	Window map[string]loop.ExactFloats `json:"window,omitempty"`
}

// Save adds GRPO's part to a checkpoint the driver writes (the model in HF layout, the AdamW state
// and trainer_state.json): the prompt position (epoch and offset of the seeded prompt order), the
// tokens seen, the generation round, and the reference weights once sync_ref_model has mixed them
// (ReferenceName).
func (s source) Save(cp *loop.Checkpoint) error {
	t := s.Trainer
	if t.ref != nil && t.globalStep >= t.cfg.RefModelSyncSteps { // synced at least once
		cp.Files[ReferenceName] = t.writeReference
	}
	gs := grpoState{Round: t.round, OptimizerSteps: cp.OptimizerSteps}
	if t.random != nil {
		gs.RandomRewardCalls = t.random.Calls
	}
	gs.Window = loop.ExactWindow(t.logs.window)
	extra, err := json.Marshal(gs)
	if err != nil {
		return err
	}
	st := cp.State
	st.NumInputTokensSeen = t.tokensSeen
	t.cursor.Save(st)
	st.Extra = map[string]json.RawMessage{"grpo": extra}
	return nil
}

// Resume restores the run's position and the synced reference weights from a checkpoint (the
// driver restores the policy and the AdamW state). The next step generates a fresh batch.
func (s source) Resume(dir string, st *checkpoint.State) (int, error) {
	t := s.Trainer
	var gs grpoState
	if err := json.Unmarshal(st.Extra["grpo"], &gs); err != nil {
		return 0, fmt.Errorf("not a GRPO checkpoint (trainer_state.json extra.grpo): %w", err)
	}
	if t.ref != nil {
		if err := t.readReference(dir, st.GlobalStep); err != nil {
			return 0, err
		}
	}
	t.globalStep, t.round, t.tokensSeen = st.GlobalStep, gs.Round, st.NumInputTokensSeen
	if t.random != nil {
		t.random.Calls = gs.RandomRewardCalls
	}
	t.cursor.Resume(st)
	t.batch, t.batchSteps = nil, 0
	t.logs.window = loop.FromExactWindow(gs.Window)
	return gs.OptimizerSteps, nil
}
