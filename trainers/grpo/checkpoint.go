package grpo

import (
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
)

// grpoState is trainer_state.json's extra for GRPO (rollout.State: the generation round and the
// logging window) with the "random" reward's call count (its draws depend on it; absent when the
// run never called it).
type grpoState struct {
	rollout.State
	RandomRewardCalls uint64 `json:"random_reward_calls,omitempty"`
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
	gs := grpoState{State: rollout.State{Round: t.round, OptimizerSteps: cp.OptimizerSteps, Window: loop.ExactWindow(t.logs.window)}}
	if t.random != nil {
		gs.RandomRewardCalls = t.random.Calls
	}
	return rollout.Save(cp.State, "grpo", gs, t.cursor, t.tokensSeen)
}

// Resume restores the run's position and the synced reference weights from a checkpoint (the
// driver restores the policy and the AdamW state). The next step generates a fresh batch.
func (s source) Resume(dir string, st *checkpoint.State) (int, error) {
	t := s.Trainer
	var gs grpoState
	tokens, err := rollout.Resume(st, "grpo", &gs, t.cursor)
	if err != nil {
		return 0, err
	}
	if t.ref != nil {
		if err := t.readReference(dir, st.GlobalStep); err != nil {
			return 0, err
		}
	}
	t.globalStep, t.round, t.tokensSeen = st.GlobalStep, gs.Round, tokens
	if t.random != nil {
		t.random.Calls = gs.RandomRewardCalls
	}
	t.batch, t.batchSteps = nil, 0
	t.logs.window = loop.FromExactWindow(gs.Window)
	return gs.OptimizerSteps, nil
}
