package rollout

import (
	"strings"
	"testing"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/trainers/engine/loop"
)

// A method's state (State embedded beside its own fields), the cursor and the tokens seen go
// through a checkpoint and back; a checkpoint of another method, or whose prompt position lies
// outside this run's prompts, is refused.
func TestSaveResume(t *testing.T) {
	type methodState struct {
		State
		Episode int `json:"episode"`
	}
	c := NewCursor(10, 7)
	c.Next(4, false)
	saved := methodState{State: State{Round: 3, OptimizerSteps: 12, Window: map[string]loop.ExactFloats{"loss": {0.5, 0.25}}}, Episode: 48}
	cs := &checkpoint.State{}
	if err := Save(cs, "ppo", saved, c, 1234); err != nil {
		t.Fatal(err)
	}
	var got methodState
	back := NewCursor(10, 7)
	tokens, err := Resume(cs, "ppo", &got, back)
	if err != nil {
		t.Fatal(err)
	}
	if tokens != 1234 || got.Round != 3 || got.OptimizerSteps != 12 || got.Episode != 48 || got.Window["loss"][1] != 0.25 ||
		back.Epoch != c.Epoch || back.Offset != 4 {
		t.Fatalf("resumed %+v, cursor %+v, tokens %d", got, back, tokens)
	}
	if _, err := Resume(cs, "grpo", &got, back); err == nil || !strings.Contains(err.Error(), "not a GRPO checkpoint (trainer_state.json extra.grpo)") {
		t.Errorf("another method's checkpoint: %v", err)
	}
	if _, err := Resume(cs, "ppo", &got, NewCursor(3, 7)); err == nil || !strings.Contains(err.Error(), "prompt position 4 is outside the 3 prompts") {
		t.Errorf("a position outside the prompts: %v", err)
	}
}
