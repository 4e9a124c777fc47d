package corridor

import "github.com/posttrain/posttrain/internal/pyfmt"

// Phase3Config holds `posttrain toy qlearning`'s settings.
type Phase3Config struct {
	Seed     int64
	Episodes int
	Alpha    float64
	Gamma    float64 // also the γ of the Q* it is compared with
	Epsilon  float64
}

// DefaultPhase3 is the course's phase 3: 300 episodes, α = 0.5, γ = 0.9, ε = 0.2.
func DefaultPhase3() Phase3Config {
	return Phase3Config{Seed: 0, Episodes: 300, Alpha: 0.5, Gamma: 0.9, Epsilon: 0.2}
}

// Validate checks the settings.
func (c Phase3Config) Validate() error {
	return firstError(checkAtLeast("episodes", c.Episodes, 0), checkNonNegative("alpha", c.Alpha),
		checkGamma(c.Gamma), checkProb("epsilon", c.Epsilon))
}

// Args is the settings as the course's JSON "args" (without "json").
func (c Phase3Config) Args() Object {
	return Object{{"seed", c.Seed}, {"episodes", c.Episodes}, {"alpha", Float(c.Alpha)},
		{"gamma", Float(c.Gamma)}, {"epsilon", Float(c.Epsilon)}}
}

// Phase3Result is everything phase 3 prints and reports.
type Phase3Result struct {
	Config    Phase3Config
	HandCheck Phase3Check
	Q         QTable // learned by Q-learning
	QStar     QTable // OptimalQ(γ, 100)
	Greedy    []int  // greedy action of each NonTerminal state
}

// RunPhase3 runs phase 3: the scripted hand check, then tabular Q-learning against Q*.
func RunPhase3(c Phase3Config) (*Phase3Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	r := &Phase3Result{Config: c, HandCheck: Phase3HandCheck(),
		Q: TrainQLearning(c.Episodes, c.Alpha, c.Gamma, c.Epsilon, c.Seed), QStar: OptimalQ(c.Gamma, 100)}
	for _, s := range NonTerminal {
		r.Greedy = append(r.Greedy, greedyAction(r.Q[s]))
	}
	return r, nil
}

func (r *Phase3Result) greedyArrows() []string {
	out := make([]string, len(r.Greedy))
	for i, a := range r.Greedy {
		out[i] = Arrow[a]
	}
	return out
}

// Lines is what phase 3 prints.
func (r *Phase3Result) Lines() []string {
	c := r.HandCheck.C
	lines := []string{"손계산 A→B→C 뒤 Q = " + stateDict(func(s int) string { return pyfmt.List(c[s][:]) })}
	for _, s := range NonTerminal {
		lines = append(lines, qTableLine(s, r.Q[s], r.QStar[s]))
	}
	return append(lines, "greedy 정책: "+pyfmt.StrList(r.greedyArrows()))
}

// Results is phase 3's JSON results: the whole Q table, Q* keyed "s,a", the greedy arrows.
func (r *Phase3Result) Results() Object {
	q := make([][]Float, NumStates)
	for s := range q {
		q[s] = floats(r.Q[s][:])
	}
	return Object{{"Q", q}, {"Qstar", qStarObject(&r.QStar)}, {"greedy", r.greedyArrows()}}
}
