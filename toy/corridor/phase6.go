package corridor

import (
	"fmt"

	"github.com/posttrain/posttrain/internal/pyfmt"
	"github.com/posttrain/posttrain/internal/pyrand"
	"github.com/posttrain/posttrain/trainers/engine/rl"
)

// Phase6Config holds `posttrain toy a2c`'s settings.
type Phase6Config struct {
	Seed             int64
	Iterations       int
	EpisodesPerBatch int
	ActorLR          float64
	CriticLR         float64
	Gamma            float64
	Lam              float64 // GAE λ
}

// DefaultPhase6 is the course's train_a2c() defaults.
func DefaultPhase6() Phase6Config {
	return Phase6Config{Seed: 0, Iterations: 300, EpisodesPerBatch: 8, ActorLR: 1.0, CriticLR: 0.05,
		Gamma: 0.9, Lam: 0.95}
}

// Validate checks the settings.
func (c Phase6Config) Validate() error {
	return firstError(checkAtLeast("iterations", c.Iterations, 0),
		checkAtLeast("episodes-per-batch", c.EpisodesPerBatch, 1), checkNonNegative("actor-lr", c.ActorLR),
		checkNonNegative("critic-lr", c.CriticLR), checkGamma(c.Gamma), checkRange("lam", c.Lam, 0, 1))
}

// Args is the settings as the course's JSON "args" (without "json").
func (c Phase6Config) Args() Object {
	return Object{{"seed", c.Seed}, {"iterations", c.Iterations}, {"episodes_per_batch", c.EpisodesPerBatch},
		{"actor_lr", Float(c.ActorLR)}, {"critic_lr", Float(c.CriticLR)}, {"gamma", Float(c.Gamma)},
		{"lam", Float(c.Lam)}}
}

// sample is one (s, a, log π_old(a|s), A, return) of a batch.
type sample struct {
	S, A     int
	LogP     float64
	Adv, Ret float64
}

// collect samples episodes with θ's policy on one corridor and scores each with GAE
// (식 (6.1)-(6.2)) under the critic V: the value after a truncated episode is V(S_T).
func collect(th *Logits, v *StateValues, rng *pyrand.Rand, episodes int, gamma, lam float64) []sample {
	env := NewCorridor()
	var batch []sample
	for range episodes {
		ep := sampleEpisode(env, th, rng)
		last := 0.0
		if !ep.Terminated {
			last = v[ep.Last]
		}
		_, adv, rets := rl.GAE(ep.Rewards, valuesOf(v, ep.States), last, ep.Terminated, gamma, lam)
		for t, s := range ep.States {
			batch = append(batch, sample{s, ep.Actions[t], ep.LogPs[t], adv[t], rets[t]})
		}
	}
	return batch
}

// TrainA2C is the course's train_a2c: per iteration, a batch of episodes scored with GAE; the
// actor ascends E[A·∇log π] (θ from before the batch) while the critic moves V(s) toward each GAE
// return, sample by sample.
func TrainA2C(c Phase6Config) (Logits, StateValues) {
	rng := pyrand.New(c.Seed)
	var th Logits
	var v StateValues
	for range c.Iterations {
		batch := collect(&th, &v, rng, c.EpisodesPerBatch, c.Gamma, c.Lam)
		n := float64(len(batch))
		var grads Logits
		for _, b := range batch {
			g := GradLogSoftmax(th[b.S], b.A)
			for i := range g {
				grads[b.S][i] += b.Adv * g[i] / n // actor: E[A ∇log π]
			}
			v[b.S] += c.CriticLR * (b.Ret - v[b.S]) // critic: V(s) → GAE return
		}
		for _, s := range NonTerminal {
			for i := range th[s] {
				th[s][i] += c.ActorLR * grads[s][i]
			}
		}
	}
	return th, v
}

// Phase6Check is phase 6's hand_check: GAE on ←→→→ with V = V^π of the uniform policy, and one
// actor-critic step on its first move.
type Phase6Check struct {
	Deltas, A1, A0, AHalf []float64 // δ_t; A_t for λ = 1, 0, 0.5
	Step                  Logits    // θ after θ_2 += 1·δ_0·∇log π(←|2)
}

// Phase6HandCheck computes phase 6's hand_check.
func Phase6HandCheck() Phase6Check {
	v := ExactValues(0.5, 0.9)
	ep := scripted([]int{Left, Right, Right, Right})
	vals := valuesOf(&v, ep.States)
	var h Phase6Check
	h.Deltas, h.A1, _ = rl.GAE(ep.Rewards, vals, 0.0, true, 0.9, 1.0)
	_, h.A0, _ = rl.GAE(ep.Rewards, vals, 0.0, true, 0.9, 0.0)
	_, h.AHalf, _ = rl.GAE(ep.Rewards, vals, 0.0, true, 0.9, 0.5)
	g := GradLogSoftmax(h.Step[2], Left)
	for i := range g {
		h.Step[2][i] += 1.0 * h.Deltas[0] * g[i]
	}
	return h
}

// Phase6Result is everything phase 6 prints and reports.
type Phase6Result struct {
	Config    Phase6Config
	HandCheck Phase6Check
	Theta     Logits
	PRight    StateValues
	V         StateValues
}

// RunPhase6 runs phase 6: the GAE hand check, then A2C.
func RunPhase6(c Phase6Config) (*Phase6Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	r := &Phase6Result{Config: c, HandCheck: Phase6HandCheck()}
	r.Theta, r.V = TrainA2C(c)
	r.PRight = pRights(&r.Theta)
	return r, nil
}

// Lines is what phase 6 prints.
func (r *Phase6Result) Lines() []string {
	h := r.HandCheck
	return []string{
		"δ = " + pyfmt.List(h.Deltas),
		"A(λ=1) = " + pyfmt.RoundList(h.A1, 4) + " | A(λ=0.5) = " + pyfmt.RoundList(h.AHalf, 4),
		fmt.Sprintf("2에서 ← 를 δ = −0.45 로 평가 → P(→|2) = %s (REINFORCE는 이 걸음의 ←를 강화했다)",
			pyfmt.Fixed(h.Step.PRight(2), 4, false)),
		"A2C 뒤 P(→|s) = " + roundedStates(&r.PRight, 3) + " | critic V = " + roundedStates(&r.V, 3),
	}
}

// Results is phase 6's JSON results.
func (r *Phase6Result) Results() Object {
	return Object{{"theta", thetaObject(&r.Theta)}, {"p_right", stateObject(&r.PRight)}, {"V", stateObject(&r.V)}}
}
