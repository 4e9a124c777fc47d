package ppo

import (
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
)

// ppoState is trainer_state.json's extra for PPO (rollout.State: the round, which seeds the
// sampler and the PPO epochs' permutations, and the logging window) with the episode count; the
// driver saves the policy, value_model/ and the AdamW state of both. A checkpoint is written
// between updates, and the next update generates afresh.
type ppoState struct {
	rollout.State
	Episode int `json:"episode"`
}

// Save adds PPO's part to a checkpoint.
func (s source) Save(cp *loop.Checkpoint) error {
	t := s.Trainer
	st := ppoState{State: rollout.State{Round: t.round, OptimizerSteps: cp.OptimizerSteps, Window: loop.ExactWindow(t.window)}, Episode: t.episode}
	return rollout.Save(cp.State, "ppo", st, t.cursor, t.tokensSeen)
}

// Resume restores the run's position (the driver restores the policy, the value model and the
// AdamW state).
func (s source) Resume(_ string, cs *checkpoint.State) (int, error) {
	t := s.Trainer
	var st ppoState
	tokens, err := rollout.Resume(cs, "ppo", &st, t.cursor)
	if err != nil {
		return 0, err
	}
	t.round, t.episode, t.tokensSeen = st.Round, st.Episode, tokens
	t.window = loop.FromExactWindow(st.Window)
	return st.OptimizerSteps, nil
}
