// Package corridor reproduces phases 1-7 of the course ("from a 5-cell corridor to LLM
// post-training") exactly, in float64: the 5-cell corridor environment, returns, Bellman
// evaluation, Monte Carlo and TD, Q-learning, DQN with hand-written backprop, REINFORCE, A2C with
// GAE and PPO. Random numbers come from internal/pyrand in the course's order and sums run left to
// right, so every printed line matches the course byte for byte and every result its golden.
//
// Bit-exactness assumes Go does not fuse x*y + z into one FMA instruction, as on amd64 (the
// default GOAMD64=v1); on arm64 the compiler may fuse, and results can move by an ulp (still
// within the tests' 1e-12 tolerances, and the printed lines are rounded).
//
// States are cell numbers 0..4 (0 = hole, 4 = goal, start 2); actions are Left (0) and Right (1).
// Per-state tables are arrays indexed by the state; only NonTerminal states are ever used.
package corridor

import (
	"fmt"
	"strings"
)

// Actions, as in the course: LEFT, RIGHT = 0, 1.
const (
	Left  = 0
	Right = 1
)

// NumStates is the corridor length; NonTerminal lists the non-terminal states in the course's
// dict iteration order (NONTERMINAL = (1, 2, 3)).
const NumStates = 5

// NonTerminal is the course's NONTERMINAL = (1, 2, 3).
var NonTerminal = []int{1, 2, 3}

// Arrow is the course's ARROW = {LEFT: '←', RIGHT: '→'}.
var Arrow = [2]string{Left: "←", Right: "→"}

// Corridor is the course's 5-cell corridor: start in the middle, +1 at the right end (goal), −1 at
// the left end (hole), both terminal; an episode is truncated after MaxSteps steps. It draws no
// random numbers.
type Corridor struct {
	N, StartPos, MaxSteps int
	Hole, Goal            int
	pos, t                int
}

// NewCorridor returns Corridor(n=5, start=2, max_steps=20).
func NewCorridor() *Corridor {
	return &Corridor{N: NumStates, StartPos: 2, MaxSteps: 20, Hole: 0, Goal: NumStates - 1}
}

// Reset starts a new episode and returns the first observation (the start cell).
func (e *Corridor) Reset() int {
	e.pos, e.t = e.StartPos, 0
	return e.pos
}

// Transition is the environment's model P and R: (s, a) → (s′, r, terminated). It is
// deterministic; Phase 2's Bellman computations use it directly.
func (e *Corridor) Transition(s, a int) (next int, reward float64, done bool) {
	if a != Left && a != Right {
		panic(fmt.Sprintf("corridor: invalid action %d", a))
	}
	next = s - 1
	if a == Right {
		next = s + 1
	}
	switch next {
	case e.Hole:
		reward = -1.0
	case e.Goal:
		reward = 1.0
	}
	return next, reward, next == e.Hole || next == e.Goal
}

// Step applies action a and returns gymnasium's (observation, reward, terminated, truncated).
// truncated is set when the MaxSteps-th step ends in a non-terminal cell.
func (e *Corridor) Step(a int) (obs int, reward float64, terminated, truncated bool) {
	e.pos, reward, terminated = e.Transition(e.pos, a)
	e.t++
	truncated = !terminated && e.t >= e.MaxSteps
	return e.pos, reward, terminated, truncated
}

// Render draws the corridor with '@' on the agent: "H . @ . G".
func (e *Corridor) Render() string {
	cells := make([]string, e.N)
	for i := range cells {
		cells[i] = "."
	}
	cells[e.Hole], cells[e.Goal] = "H", "G"
	cells[e.pos] = "@"
	return strings.Join(cells, " ")
}

// step is one (S_t, A_t, R_{t+1}, S_{t+1}, terminated) transition.
type step struct {
	S, A       int
	R          float64
	S2         int
	Terminated bool
}

// runActions plays a scripted action list from the start (the course's run_actions/run_scripted):
// states[t] = S_t, actions[t] = A_t, rewards[t] = R_{t+1}, steps[t] = the whole transition.
func runActions(actions []int) (states, acts []int, rewards []float64, steps []step) {
	env := NewCorridor()
	s := env.Reset()
	for _, a := range actions {
		s2, r, terminated, _ := env.Step(a)
		states = append(states, s)
		acts = append(acts, a)
		rewards = append(rewards, r)
		steps = append(steps, step{s, a, r, s2, terminated})
		s = s2
	}
	return states, acts, rewards, steps
}

// StateValues holds one number per cell (V(s)); only NonTerminal entries are meaningful.
type StateValues [NumStates]float64

// valuesOf is the course's values_of: [V[s] for s in states].
func valuesOf(v *StateValues, states []int) []float64 {
	out := make([]float64, len(states))
	for i, s := range states {
		out[i] = v[s]
	}
	return out
}
