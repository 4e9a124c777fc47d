package ppo

import (
	"encoding/json"
	"fmt"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/trainers/engine/loop"
)

// ppoState is trainer_state.json's extra for PPO: what an exact resume needs beyond HF's keys and
// the driver's files (the policy, value_model/ and the AdamW state of both). Rollouts are not
// saved: a checkpoint is written between updates, and the next update generates afresh from the
// saved round (which seeds the sampler and the PPO epochs' permutations) and prompt position.
type ppoState struct {
	Round          int `json:"round"`
	Episode        int `json:"episode"`
	OptimizerSteps int `json:"optimizer_steps"`
	// Window is the unlogged updates' metrics (absent at a logging step).
	Window map[string]loop.ExactFloats `json:"window,omitempty"`
}

// Save adds PPO's part to a checkpoint.
func (s source) Save(cp *loop.Checkpoint) error {
	t := s.Trainer
	st := ppoState{Round: t.round, Episode: t.episode, OptimizerSteps: cp.OptimizerSteps, Window: loop.ExactWindow(t.window)}
	extra, err := json.Marshal(st)
	if err != nil {
		return err
	}
	cs := cp.State
	cs.NumInputTokensSeen = t.tokensSeen
	t.cursor.Save(cs)
	cs.Extra = map[string]json.RawMessage{"ppo": extra}
	return nil
}

// Resume restores the run's position (the driver restores the policy, the value model and the
// AdamW state).
func (s source) Resume(_ string, cs *checkpoint.State) (int, error) {
	t := s.Trainer
	var st ppoState
	if err := json.Unmarshal(cs.Extra["ppo"], &st); err != nil {
		return 0, fmt.Errorf("not a PPO checkpoint (trainer_state.json extra.ppo): %w", err)
	}
	if cs.Data.Offset < 0 || cs.Data.Offset > len(t.s.Prompts) {
		return 0, fmt.Errorf("prompt position %d is outside the %d prompts (is this the same dataset?)", cs.Data.Offset, len(t.s.Prompts))
	}
	t.round, t.episode, t.tokensSeen = st.Round, st.Episode, cs.NumInputTokensSeen
	t.cursor.Resume(cs)
	t.window = loop.FromExactWindow(st.Window)
	return st.OptimizerSteps, nil
}
