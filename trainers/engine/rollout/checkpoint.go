package rollout

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/trainers/engine/loop"
)

// State is what GRPO and PPO keep in trainer_state.json beyond HF's keys and the driver's files,
// as the extra of their method: rollouts are not saved (as in TRL, grpo_trainer.py L1001-1009),
// so a resumed run generates afresh from the saved generation round (which seeds the sampler) and
// prompt position. A method's state embeds it beside its own fields.
type State struct {
	Round          int `json:"round"`
	OptimizerSteps int `json:"optimizer_steps"`
	// Window is the unlogged metrics of the logging window (absent at a logging step, where it
	// is empty), so that a resumed run logs the lines of a straight one.
	Window map[string]loop.ExactFloats `json:"window,omitempty"`
}

// Save writes a checkpoint's rollout part: st (a State or a struct embedding one) as
// trainer_state.json's extra[method], the prompt cursor's position and the tokens seen.
func Save(cs *checkpoint.State, method string, st any, c *Cursor, tokensSeen int64) error {
	extra, err := json.Marshal(st)
	if err != nil {
		return err
	}
	cs.NumInputTokensSeen = tokensSeen
	c.Save(cs)
	cs.Extra = map[string]json.RawMessage{method: extra}
	return nil
}

// Resume reads what Save wrote into st and moves the cursor to the saved position, which must lie
// within the run's prompts; it returns the tokens seen.
func Resume(cs *checkpoint.State, method string, st any, c *Cursor) (tokensSeen int64, err error) {
	if err := json.Unmarshal(cs.Extra[method], st); err != nil {
		return 0, fmt.Errorf("not a %s checkpoint (trainer_state.json extra.%s): %w", strings.ToUpper(method), method, err)
	}
	if cs.Data.Offset < 0 || cs.Data.Offset > c.n {
		return 0, fmt.Errorf("prompt position %d is outside the %d prompts (is this the same dataset?)", cs.Data.Offset, c.n)
	}
	c.Resume(cs)
	return cs.NumInputTokensSeen, nil
}
