package corridor

import (
	"fmt"

	"github.com/posttrain/posttrain/internal/pyfmt"
)

// Phase2Check is what phase 2's hand_check computes (γ = 0.9, α = 0.1 for MC and TD).
type Phase2Check struct {
	Sweeps3  []StateValues // EvaluatePolicy(0.7, 0.9, 3): 그림 2.2
	Sweep200 StateValues   // EvaluatePolicy(0.7, 0.9, 200)[-1]
	Exact07  StateValues   // ExactValues(0.7)
	Exact05  StateValues   // ExactValues(0.5)
	Q        [NumStates][2]float64
	MC       StateValues // MC after ←→→→
	TD1      StateValues // TD after ←→→→
	Deltas1  []float64
	TD2      StateValues // TD after ←→→→ then →→
	Deltas2  []float64
}

// Phase2HandCheck computes phase 2's hand_check.
func Phase2HandCheck() Phase2Check {
	h := Phase2Check{Sweeps3: EvaluatePolicy(0.7, 0.9, 3), Exact07: ExactValues(0.7, 0.9),
		Exact05: ExactValues(0.5, 0.9)}
	all := EvaluatePolicy(0.7, 0.9, 200)
	h.Sweep200 = all[len(all)-1]
	for _, s := range NonTerminal { // 표 2.1
		for _, a := range []int{Left, Right} {
			h.Q[s][a] = QFromV(&h.Exact07, s, a, 0.9)
		}
	}
	states, _, rewards, steps := runActions([]int{Left, Right, Right, Right})
	MCUpdate(&h.MC, states, rewards, 0.1, 0.9)
	h.Deltas1 = tdSteps(&h.TD1, steps)
	h.TD2 = h.TD1
	_, _, _, steps = runActions([]int{Right, Right})
	h.Deltas2 = tdSteps(&h.TD2, steps)
	return h
}

func tdSteps(v *StateValues, steps []step) []float64 {
	deltas := make([]float64, len(steps))
	for i, st := range steps {
		deltas[i] = TDUpdate(v, st.S, st.R, st.S2, st.Terminated, 0.1, 0.9)
	}
	return deltas
}

// Lines is what phase 2's hand_check prints.
func (h Phase2Check) Lines() []string {
	td1 := stateDict(func(s int) string { return pyfmt.Repr(h.TD1[s]) })
	return []string{
		"P(→)=0.7  V = " + roundedStates(&h.Exact07, 4),
		"P(→)=0.5  V = " + roundedStates(&h.Exact05, 4),
		"MC 1회 후 V = " + roundedStates(&h.MC, 4),
		"TD 1회 후 V = " + td1 + " · δ = " + pyfmt.List(h.Deltas1),
		"TD 2회 후 V = " + roundedStates(&h.TD2, 4),
	}
}

// Phase2Result is everything phase 2 prints and reports.
type Phase2Result struct {
	Config    Phase2Config
	HandCheck Phase2Check
	TD        StateValues // TD(0) estimate after Config.Episodes episodes
	Exact     StateValues // ExactValues(Config.P)
	Sweep     StateValues // EvaluatePolicy(Config.P, γ, Config.Sweeps)[-1]
}

// RunPhase2 runs phase 2: Bellman evaluation, MC and TD hand checks, then TD(0) on sampled
// episodes against the exact values.
func RunPhase2(c Phase2Config) (*Phase2Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	sweeps := EvaluatePolicy(c.P, c.Gamma, c.Sweeps)
	return &Phase2Result{
		Config:    c,
		HandCheck: Phase2HandCheck(),
		TD:        TDEvaluate(c.P, c.Episodes, c.Alpha, c.Gamma, c.Seed),
		Exact:     ExactValues(c.P, c.Gamma),
		Sweep:     sweeps[len(sweeps)-1],
	}, nil
}

// Lines is what phase 2 prints.
func (r *Phase2Result) Lines() []string {
	return append(r.HandCheck.Lines(), fmt.Sprintf("TD %d 에피소드 V = %s · 정확한 값 = %s",
		r.Config.Episodes, roundedStates(&r.TD, 3), roundedStates(&r.Exact, 3)))
}

// Results is phase 2's JSON results.
func (r *Phase2Result) Results() Object {
	return Object{{"td_V", stateObject(&r.TD)}, {"exact_V", stateObject(&r.Exact)},
		{"sweep_V", stateObject(&r.Sweep)}}
}
