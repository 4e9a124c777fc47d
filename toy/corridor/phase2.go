package corridor

import (
	"github.com/posttrain/posttrain/internal/pyrand"
)

// Policy is π(a|s) = [1−p, p] in every cell (the course's policy(p_right)).
type Policy [2]float64

// NewPolicy is the course's policy(p_right) = {LEFT: 1 − p, RIGHT: p}.
func NewPolicy(pRight float64) Policy { return Policy{Left: 1 - pRight, Right: pRight} }

var model = NewCorridor() // the course's ENV: only its deterministic Transition is used

// QFromV is 식 (2.4): Q(s,a) = R(s,a) + γ·(1 − done)·V(s′) (the corridor is deterministic).
func QFromV(v *StateValues, s, a int, gamma float64) float64 {
	s2, r, done := model.Transition(s, a)
	next := 0.0
	if !done {
		next = v[s2]
	}
	return r + gamma*next
}

// BellmanBackup is 식 (2.3): V(s) = Σ_a π(a|s)·Q(s,a).
func BellmanBackup(v *StateValues, s int, pi Policy, gamma float64) float64 {
	sum := 0.0
	for _, a := range []int{Left, Right} {
		sum += pi[a] * QFromV(v, s, a, gamma)
	}
	return sum
}

// EvaluatePolicy is iterative policy evaluation: each sweep applies 식 (2.3) to every cell at once
// (from the previous V). It returns V after 0, 1, …, sweeps sweeps.
func EvaluatePolicy(pRight, gamma float64, sweeps int) []StateValues {
	pi := NewPolicy(pRight)
	var v StateValues
	history := []StateValues{v}
	for range sweeps {
		var next StateValues
		for _, s := range NonTerminal {
			next[s] = BellmanBackup(&v, s, pi, gamma)
		}
		v = next
		history = append(history, v)
	}
	return history
}

// ExactValues solves 식 (2.3)'s three linear equations by hand. With a = γ(1−p), b = γp:
//
//	V1 = −(1−p) + b·V2,  V3 = p + a·V2,  V2 = a·V1 + b·V3  →  V2 = (−a(1−p) + b·p) / (1 − 2ab)
func ExactValues(p, gamma float64) StateValues {
	a, b := gamma*(1-p), gamma*p
	v2 := (-a*(1-p) + b*p) / (1 - 2*a*b)
	return StateValues{1: -(1 - p) + b*v2, 2: v2, 3: p + a*v2}
}

// MCUpdate is 식 (2.5), Monte Carlo after the episode: V(S_t) ← V(S_t) + α[G_t − V(S_t)], with
// G_t from 식 (1.2), updating from the last step backwards.
func MCUpdate(v *StateValues, states []int, rewards []float64, alpha, gamma float64) {
	g := 0.0
	for t := len(rewards) - 1; t >= 0; t-- {
		g = rewards[t] + gamma*g
		v[states[t]] += alpha * (g - v[states[t]])
	}
}

// TDUpdate is 식 (2.6), TD(0) after every step:
// V(S_t) ← V(S_t) + α[R + γ(1−terminated)V(S_{t+1}) − V(S_t)]. It returns the TD error δ.
// A truncated step still bootstraps from V(S_{t+1}).
func TDUpdate(v *StateValues, s int, r float64, s2 int, terminated bool, alpha, gamma float64) float64 {
	next := 0.0
	if !terminated {
		next = v[s2]
	}
	delta := r + gamma*next - v[s]
	v[s] += alpha * delta
	return delta
}

// TDEvaluate learns V of the policy P(→) = pRight with TD(0) alone, from sampled episodes (one
// rng.random() per step); it never looks at the model.
func TDEvaluate(pRight float64, episodes int, alpha, gamma float64, seed int64) StateValues {
	rng, env := pyrand.New(seed), NewCorridor()
	var v StateValues
	for range episodes {
		s := env.Reset()
		for {
			a := Left
			if rng.Random() < pRight {
				a = Right
			}
			s2, r, term, trunc := env.Step(a)
			TDUpdate(&v, s, r, s2, term, alpha, gamma)
			if term || trunc {
				break
			}
			s = s2
		}
	}
	return v
}

// Phase2Config holds `posttrain toy bellman`'s settings.
type Phase2Config struct {
	Seed     int64
	P        float64 // P(→) of the evaluated policy
	Episodes int     // TD(0) episodes
	Alpha    float64 // TD(0) step size
	Gamma    float64
	Sweeps   int // iterative policy evaluation sweeps
}

// DefaultPhase2 is the course's phase 2 (P(→) = 0.7, 10000 TD episodes with α = 0.01).
func DefaultPhase2() Phase2Config {
	return Phase2Config{Seed: 0, P: 0.7, Episodes: 10000, Alpha: 0.01, Gamma: 0.9, Sweeps: 200}
}

// Validate checks the settings.
func (c Phase2Config) Validate() error {
	return firstError(checkProb("p", c.P), checkAtLeast("episodes", c.Episodes, 0),
		checkNonNegative("alpha", c.Alpha), checkGamma(c.Gamma), checkAtLeast("sweeps", c.Sweeps, 0))
}

// Args is the settings as the course's JSON "args" (without "json").
func (c Phase2Config) Args() Object {
	return Object{{"seed", c.Seed}, {"p", Float(c.P)}, {"episodes", c.Episodes},
		{"alpha", Float(c.Alpha)}, {"gamma", Float(c.Gamma)}, {"sweeps", c.Sweeps}}
}
