// Package gym holds Gymnasium's classic-control environments CartPole-v1 and Acrobot-v1 in Go,
// identical to Gymnasium 1.4.0's (gymnasium/envs/classic_control/cartpole.py, acrobot.py) as
// gym.make builds them: the dynamics and integrators in float64, float32 observations, the
// 500-step TimeLimit (terminated vs truncated), and Gymnasium's seeding — reset(seed) and
// action_space.seed(s)/sample() draw from numpy's Generator(PCG64(SeedSequence(s))) exactly.
// The course's extras (extras/dqn_cartpole.py, extras/ppo_cartpole.py) train on them.
// scripts/reference/gym_classic_control.py writes the golden trajectories the tests replay.
package gym

import (
	"fmt"
	"strings"
)

// MaxEpisodeSteps is the TimeLimit gym.make puts on CartPole-v1 and Acrobot-v1.
const MaxEpisodeSteps = 500

// IDs are the environment ids Make knows.
var IDs = []string{"CartPole-v1", "Acrobot-v1"}

// dynamics is one unwrapped environment (Gymnasium's CartPoleEnv or AcrobotEnv).
type dynamics interface {
	reset(rng *Generator) []float32
	step(action int) (obs []float32, reward float64, terminated bool)
	state() []float64
}

// Env is gym.make(id): the environment inside TimeLimit(max_episode_steps=500).
type Env struct {
	ID          string
	ObsDim      int
	ActionSpace *Discrete
	dyn         dynamics
	rng         *Generator // the environment's np_random; nil until the first seeded reset
	elapsed     int        // TimeLimit's _elapsed_steps; -1 before the first reset
}

// Make is gym.make(id) for "CartPole-v1" or "Acrobot-v1".
func Make(id string) (*Env, error) {
	e := &Env{ID: id, elapsed: -1}
	switch id {
	case "CartPole-v1":
		e.dyn, e.ObsDim, e.ActionSpace = newCartPole(), 4, &Discrete{N: 2}
	case "Acrobot-v1":
		e.dyn, e.ObsDim, e.ActionSpace = &acrobot{}, 6, &Discrete{N: 3}
	default:
		return nil, fmt.Errorf("unknown environment %q; valid: %s", id, strings.Join(IDs, ", "))
	}
	return e, nil
}

// ResetSeed is env.reset(seed=seed): np_random ← seeding.np_random(seed), then a new initial
// state drawn from it.
func (e *Env) ResetSeed(seed uint64) []float32 {
	e.rng = NewGenerator(seed)
	return e.Reset()
}

// Reset is env.reset() without a seed: the initial state is drawn from the np_random stream of
// the last seeded reset. (Gymnasium seeds from OS entropy when it was never seeded; here that is
// a programming error.)
func (e *Env) Reset() []float32 {
	if e.rng == nil {
		panic("gym: Reset before ResetSeed (an unseeded environment would not be reproducible)")
	}
	e.elapsed = 0
	return e.dyn.reset(e.rng)
}

// Step is env.step(action) through TimeLimit: truncated once 500 steps have elapsed since the
// reset. Stepping past the end is allowed, as in Gymnasium (CartPole then rewards 0).
func (e *Env) Step(action int) (obs []float32, reward float64, terminated, truncated bool) {
	if e.elapsed < 0 {
		panic("gym: Step before Reset")
	}
	if action < 0 || action >= e.ActionSpace.N {
		panic(fmt.Sprintf("gym: %s: action %d is not in Discrete(%d)", e.ID, action, e.ActionSpace.N))
	}
	obs, reward, terminated = e.dyn.step(action)
	e.elapsed++
	return obs, reward, terminated, e.elapsed >= MaxEpisodeSteps
}

// State is the unwrapped environment's internal state (float64, as Gymnasium keeps it; Acrobot's
// right after a reset holds float32 values).
func (e *Env) State() []float64 { return append([]float64(nil), e.dyn.state()...) }

// Discrete is gymnasium.spaces.Discrete(n) with start 0: seed and unmasked sample.
type Discrete struct {
	N   int
	rng *Generator
}

// Seed is action_space.seed(seed).
func (d *Discrete) Seed(seed uint64) { d.rng = NewGenerator(seed) }

// Sample is action_space.sample(): np_random.integers(n).
func (d *Discrete) Sample() int {
	if d.rng == nil {
		panic("gym: Discrete.Sample before Seed")
	}
	return d.rng.Integers(d.N)
}

func toFloat32(xs []float64) []float32 {
	out := make([]float32, len(xs))
	for i, x := range xs {
		out[i] = float32(x)
	}
	return out
}
