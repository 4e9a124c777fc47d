package corridor

import (
	"fmt"

	"github.com/posttrain/posttrain/internal/pyfmt"
	"github.com/posttrain/posttrain/trainers/engine/rl"
)

// ReturnCheck is one row of phase 1's hand_check: a scripted trajectory, its rewards and G_0.
type ReturnCheck struct {
	Name       string
	Actions    []int
	HandG0     float64 // the course's hand-computed G_0
	Rewards    []float64
	G0         float64 // 식 (1.1)
	G0Backward float64 // 식 (1.2)'s G_0, the same value
	Backward   []float64
}

// Trajectories is the course's TRAJECTORIES: name → (actions, hand-computed G_0).
var Trajectories = []ReturnCheck{
	{Name: "→→", Actions: []int{Right, Right}, HandG0: 0.9},                  // 0 + 0.9·1
	{Name: "←→→→", Actions: []int{Left, Right, Right, Right}, HandG0: 0.729}, // 0.9³·1
	{Name: "←←", Actions: []int{Left, Left}, HandG0: -0.9},                   // 0 + 0.9·(−1)
}

// Phase1HandCheck computes phase 1's hand_check rows (γ = 0.9).
func Phase1HandCheck() ([]ReturnCheck, error) {
	rows := make([]ReturnCheck, len(Trajectories))
	for i, tr := range Trajectories {
		rewards, err := rewardsOf(tr.Actions)
		if err != nil {
			return nil, err
		}
		tr.Rewards = rewards
		tr.G0 = rl.DiscountedReturn(rewards, 0.9)
		tr.Backward = rl.ReturnsBackward(rewards, 0.9)
		tr.G0Backward = tr.Backward[0]
		rows[i] = tr
	}
	return rows, nil
}

// GammaEffect is phase 1's gamma_effect: G_0 of the shortest (→→) and the detour (←→→→) path.
type GammaEffect struct{ Gamma, Short, Detour float64 }

// Phase1GammaEffect computes gamma_effect for γ = 1.0, 0.9, 0.5.
func Phase1GammaEffect() ([]GammaEffect, error) {
	short, err := rewardsOf([]int{Right, Right})
	if err != nil {
		return nil, err
	}
	detour, err := rewardsOf([]int{Left, Right, Right, Right})
	if err != nil {
		return nil, err
	}
	var out []GammaEffect
	for _, g := range []float64{1.0, 0.9, 0.5} {
		out = append(out, GammaEffect{g, rl.DiscountedReturn(short, g), rl.DiscountedReturn(detour, g)})
	}
	return out, nil
}

// Phase1Result is everything phase 1 prints and reports.
type Phase1Result struct {
	Config    Phase1Config
	Demos     []DemoEpisode
	HandCheck []ReturnCheck
	Gamma     []GammaEffect
	J         []float64 // J[i] for Config.P[i]
}

// RunPhase1 runs phase 1: the step() API check, random-policy demos, hand checks, γ's effect and
// the Monte Carlo estimate of J for each P(→).
func RunPhase1(c Phase1Config) (*Phase1Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := StepAPIDemo(); err != nil {
		return nil, fmt.Errorf("step() API check: %w", err)
	}
	r := &Phase1Result{Config: c}
	for seed := range int64(c.DemoSeeds) {
		tr, term := RunEpisode(seed)
		r.Demos = append(r.Demos, DemoEpisode{seed, tr, term})
	}
	var err error
	if r.HandCheck, err = Phase1HandCheck(); err != nil {
		return nil, err
	}
	if r.Gamma, err = Phase1GammaEffect(); err != nil {
		return nil, err
	}
	for _, p := range c.P {
		r.J = append(r.J, EstimateJ(p, c.Episodes, c.Gamma, c.Seed))
	}
	return r, nil
}

// Lines is what phase 1 prints.
func (r *Phase1Result) Lines() []string {
	lines := []string{"step() API 점검 통과"}
	for _, d := range r.Demos {
		lines = append(lines, d.line())
	}
	for _, h := range r.HandCheck {
		lines = append(lines, fmt.Sprintf("%s 보상 %s → G_0 = %s (손계산 %s)", padRight(h.Name, 5),
			pyfmt.List(h.Rewards), pyfmt.Fixed(h.G0, 3, false), pyfmt.Repr(h.HandG0)))
	}
	lines = append(lines, "←→→→ 의 G_0..G_3 = "+pyfmt.RoundList(r.HandCheck[1].Backward, 3))
	for _, g := range r.Gamma {
		lines = append(lines, fmt.Sprintf("γ=%s: 최단 %s  우회 %s  차이 %s", pyfmt.Repr(g.Gamma),
			pyfmt.Fixed(g.Short, 3, false), pyfmt.Fixed(g.Detour, 3, false), pyfmt.Fixed(g.Short-g.Detour, 3, false)))
	}
	for i, p := range r.Config.P {
		lines = append(lines, fmt.Sprintf("P(→)=%s: J ≈ %s", pyfmt.Repr(p), pyfmt.Fixed(r.J[i], 4, true)))
	}
	return lines
}

// Results is phase 1's JSON results: demo_episodes and J keyed by repr(p).
func (r *Phase1Result) Results() Object {
	demos := make([]Object, len(r.Demos))
	for i, d := range r.Demos {
		tr := make([][]any, len(d.Trajectory))
		for j, t := range d.Trajectory {
			tr[j] = []any{t.S, t.A, Float(t.R), t.S2}
		}
		demos[i] = Object{{"seed", d.Seed}, {"trajectory", tr}, {"terminated", d.Terminated}}
	}
	j := Object{}
	for i, p := range r.Config.P {
		j = append(j, Field{pyfmt.Repr(p), Float(r.J[i])})
	}
	return Object{{"demo_episodes", demos}, {"J", j}}
}
