package corridor

import (
	"errors"
	"fmt"
	"strings"

	"github.com/posttrain/posttrain/internal/pyfmt"
	"github.com/posttrain/posttrain/internal/pyrand"
	"github.com/posttrain/posttrain/trainers/engine/rl"
)

// Phase1Config holds `posttrain toy return`'s settings (the course's defaults in DefaultPhase1).
type Phase1Config struct {
	Seed      int64     // seed of estimate_J's random.Random
	Episodes  int       // Monte Carlo episodes per estimate of J
	Gamma     float64   // discount of J
	P         []float64 // P(→) of each policy whose J is estimated
	DemoSeeds int       // random-policy demo episodes, seeds 0..DemoSeeds-1
}

// DefaultPhase1 is the course's phase 1: J for P(→) = 0.5, 0.7, 1.0 over 20000 episodes.
func DefaultPhase1() Phase1Config {
	return Phase1Config{Seed: 0, Episodes: 20000, Gamma: 0.9, P: []float64{0.5, 0.7, 1.0}, DemoSeeds: 3}
}

// Validate checks the settings.
func (c Phase1Config) Validate() error {
	if c.Episodes < 1 {
		return fmt.Errorf("episodes must be >= 1, got %d", c.Episodes)
	}
	if err := checkGamma(c.Gamma); err != nil {
		return err
	}
	if len(c.P) == 0 {
		return errors.New("p needs at least one probability")
	}
	for _, p := range c.P {
		if err := checkProb("p", p); err != nil {
			return err
		}
	}
	if c.DemoSeeds < 0 {
		return fmt.Errorf("demo-seeds must be >= 0, got %d", c.DemoSeeds)
	}
	return nil
}

// Args is the settings as the course's JSON "args" (without "json").
func (c Phase1Config) Args() Object {
	return Object{{"seed", c.Seed}, {"episodes", c.Episodes}, {"gamma", Float(c.Gamma)},
		{"p", floats(c.P)}, {"demo_seeds", c.DemoSeeds}}
}

// Transition is one (s_t, a_t, r_{t+1}, s_{t+1}) of a trajectory.
type Transition struct {
	S, A int
	R    float64
	S2   int
}

// RunEpisode is the course's run_episode(Corridor(), random_policy, seed): the policy picks
// rng.choice([LEFT, RIGHT]) at every step, ignoring the observation.
func RunEpisode(seed int64) (trajectory []Transition, terminated bool) {
	rng, env := pyrand.New(seed), NewCorridor()
	obs := env.Reset()
	for {
		a := rng.Choice(2) // [LEFT, RIGHT][i] == i
		next, r, term, trunc := env.Step(a)
		trajectory = append(trajectory, Transition{obs, a, r, next})
		obs = next
		if term || trunc {
			return trajectory, term
		}
	}
}

// StepAPIDemo is the course's step_api_demo: the gymnasium-style API on scripted moves.
func StepAPIDemo() error {
	env := NewCorridor()
	if obs := env.Reset(); obs != 2 {
		return fmt.Errorf("reset() = %d, want 2", obs)
	}
	type out struct {
		obs         int
		r           float64
		term, trunc bool
	}
	for _, want := range []out{{3, 0, false, false}, {4, 1, true, false}} {
		var got out
		got.obs, got.r, got.term, got.trunc = env.Step(Right)
		if got != want {
			return fmt.Errorf("step(RIGHT) = %+v, want %+v", got, want)
		}
	}
	env.Reset() // ←→ ten times: the 20th step hits the time limit (truncated)
	var got out
	for i := range 20 {
		a := Right
		if i%2 == 0 {
			a = Left
		}
		got.obs, got.r, got.term, got.trunc = env.Step(a)
	}
	if want := (out{2, 0, false, true}); got != want {
		return fmt.Errorf("after 20 steps = %+v, want %+v", got, want)
	}
	return nil
}

// rewardsOf plays actions from the start and returns [R_1, …, R_T]; the episode must terminate.
func rewardsOf(actions []int) ([]float64, error) {
	env := NewCorridor()
	env.Reset()
	var rewards []float64
	terminated := false
	for _, a := range actions {
		_, r, term, _ := env.Step(a)
		rewards = append(rewards, r)
		terminated = term
	}
	if !terminated {
		return nil, fmt.Errorf("scripted trajectory %v must end in a terminal cell", actions)
	}
	return rewards, nil
}

// EstimateJ is 식 (1.3): J(π) = E[G_0] ≈ (1/N) Σ_i G_0^(i), Monte Carlo over N episodes of the
// policy that moves → with probability pRight (one rng.random() per step).
func EstimateJ(pRight float64, episodes int, gamma float64, seed int64) float64 {
	rng, env, total := pyrand.New(seed), NewCorridor(), 0.0
	for range episodes {
		env.Reset()
		var rewards []float64
		for done := false; !done; {
			a := Left
			if rng.Random() < pRight {
				a = Right
			}
			_, r, term, trunc := env.Step(a)
			rewards = append(rewards, r)
			done = term || trunc
		}
		total += rl.DiscountedReturn(rewards, gamma)
	}
	return total / float64(episodes)
}

// DemoEpisode is one random-policy episode of the phase 1 demo.
type DemoEpisode struct {
	Seed       int64
	Trajectory []Transition
	Terminated bool
}

// line is "seed=0: 2→ 3→ 4 | 보상 [0.0, 1.0] | 종료".
func (d DemoEpisode) line() string {
	moves := make([]string, len(d.Trajectory))
	rewards := make([]float64, len(d.Trajectory))
	for i, tr := range d.Trajectory {
		moves[i] = fmt.Sprintf("%d%s", tr.S, Arrow[tr.A])
		rewards[i] = tr.R
	}
	end := "시간 초과"
	if d.Terminated {
		end = "종료"
	}
	last := d.Trajectory[len(d.Trajectory)-1].S2
	return fmt.Sprintf("seed=%d: %s %d | 보상 %s | %s", d.Seed, strings.Join(moves, " "), last,
		pyfmt.List(rewards), end)
}
