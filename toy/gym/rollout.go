package gym

import "fmt"

// StepRecord is one env.step: the action taken and what Gymnasium returns for it.
type StepRecord struct {
	Action      int       `json:"action"`
	Observation []float32 `json:"observation"`
	Reward      float64   `json:"reward"`
	Terminated  bool      `json:"terminated"`
	Truncated   bool      `json:"truncated"`
}

// Trajectory is one episode: env.reset(seed=seed), then steps until terminated or truncated.
type Trajectory struct {
	Env         string       `json:"env"`
	Seed        uint64       `json:"seed"`
	Actions     string       `json:"actions"` // "given", or "sampled" (action_space.seed(seed); sample())
	Observation []float32    `json:"observation"`
	Steps       []StepRecord `json:"steps"`
}

// Rollout runs one episode of gym.make(id) from reset(seed=seed). With actions nil it samples
// them as Gymnasium's action_space.seed(seed) then sample() would; otherwise it takes them in
// order, and it is an error if they run out before the episode ends or go on after it.
func Rollout(id string, seed uint64, actions []int) (Trajectory, error) {
	env, err := Make(id)
	if err != nil {
		return Trajectory{}, err
	}
	tr := Trajectory{Env: id, Seed: seed, Actions: "given", Observation: env.ResetSeed(seed)}
	if actions == nil {
		tr.Actions = "sampled"
		env.ActionSpace.Seed(seed)
	}
	for i := 0; ; i++ {
		var a int
		switch {
		case actions == nil:
			a = env.ActionSpace.Sample()
		case i < len(actions):
			a = actions[i]
			if a < 0 || a >= env.ActionSpace.N {
				return Trajectory{}, fmt.Errorf("action %d (#%d) is not one of %s's actions 0..%d", a, i+1, id, env.ActionSpace.N-1)
			}
		default:
			return tr, fmt.Errorf("the %d actions ran out before the episode ended (add more, or omit them to sample)", len(actions))
		}
		obs, r, term, trunc := env.Step(a)
		tr.Steps = append(tr.Steps, StepRecord{Action: a, Observation: obs, Reward: r, Terminated: term, Truncated: trunc})
		if term || trunc {
			if actions != nil && i+1 < len(actions) {
				return tr, fmt.Errorf("the episode ended after %d steps, %d actions are left over", i+1, len(actions)-i-1)
			}
			return tr, nil
		}
	}
}
