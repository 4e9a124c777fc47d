package corridor

import (
	"math"
	"strconv"

	"github.com/posttrain/posttrain/internal/pyrand"
)

// Logits is the tabular softmax policy's θ: [θ_←, θ_→] per cell; all zeros is π = [0.5, 0.5].
type Logits [NumStates][2]float64

// Softmax is the course's softmax: e = exp(x − max), each divided by sum(e).
func Softmax(logits [2]float64) [2]float64 {
	m := pyMax(logits[0], logits[1])
	e := [2]float64{math.Exp(logits[0] - m), math.Exp(logits[1] - m)}
	sum := 0.0 + e[0] + e[1]
	return [2]float64{e[0] / sum, e[1] / sum}
}

// GradLogSoftmax is 식 (5.2): ∂ log π(a|s) / ∂θ_s = onehot(a) − π(·|s).
func GradLogSoftmax(logits [2]float64, a int) [2]float64 {
	pi := Softmax(logits)
	var g [2]float64
	for i, p := range pi {
		oh := 0.0
		if i == a {
			oh = 1.0
		}
		g[i] = oh - p
	}
	return g
}

// PRight is π(→|s) = softmax(θ_s)[→].
func (th *Logits) PRight(s int) float64 { return Softmax(th[s])[Right] }

// Episode is one rollout: states[t] = S_t, actions[t] = A_t, rewards[t] = R_{t+1}.
type Episode struct {
	States, Actions []int
	Rewards         []float64
	Terminated      bool
	Last            int       // S_T, the cell after the last step
	LogPs           []float64 // log π(A_t|S_t) when the policy acted (PPO's π_old)
}

// sampleEpisode plays θ's policy from the start in env, one rng.random() per step
// (→ if u < π(→|s)), and records log π(a|s) of each action.
func sampleEpisode(env *Corridor, th *Logits, rng *pyrand.Rand) Episode {
	var ep Episode
	s := env.Reset()
	for {
		pi := Softmax(th[s])
		a := Left
		if rng.Random() < pi[Right] {
			a = Right
		}
		s2, r, term, trunc := env.Step(a)
		ep.States = append(ep.States, s)
		ep.Actions = append(ep.Actions, a)
		ep.Rewards = append(ep.Rewards, r)
		ep.LogPs = append(ep.LogPs, math.Log(pi[a]))
		if term || trunc {
			ep.Terminated, ep.Last = term, s2
			return ep
		}
		s = s2
	}
}

// Rollout is the course's rollout(theta, rng) on a fresh corridor.
func Rollout(th *Logits, rng *pyrand.Rand) Episode { return sampleEpisode(NewCorridor(), th, rng) }

// scripted is the course's run_scripted(actions).
func scripted(actions []int) Episode {
	states, acts, rewards, _ := runActions(actions)
	return Episode{States: states, Actions: acts, Rewards: rewards}
}

// thetaObject is {"1": [θ_←, θ_→], …}.
func thetaObject(th *Logits) Object {
	var o Object
	for _, s := range NonTerminal {
		o = append(o, Field{strconv.Itoa(s), floats(th[s][:])})
	}
	return o
}

// pRights is π(→|s) of each cell (only NonTerminal entries set).
func pRights(th *Logits) StateValues {
	var p StateValues
	for _, s := range NonTerminal {
		p[s] = th.PRight(s)
	}
	return p
}

// sigmoid is 1/(1 + e^−x).
func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
