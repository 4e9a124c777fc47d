package corridor

import (
	"errors"
	"fmt"
	"math"

	"github.com/posttrain/posttrain/internal/pyfmt"
	"github.com/posttrain/posttrain/internal/pyrand"
	"github.com/posttrain/posttrain/trainers/engine/rl"
)

// ReinforceUpdate is 식 (5.3)/(5.4): θ_s ← θ_s + α·(G_t − b(s_t))·∇log π(a_t|s_t) for every step
// of one episode; all gradients use the θ from before the update. baseline nil means b = 0.
// It returns G_t (식 (1.2)).
func ReinforceUpdate(th *Logits, ep Episode, alpha, gamma float64, baseline *StateValues) []float64 {
	g := rl.ReturnsBackward(ep.Rewards, gamma)
	type upd struct {
		s    int
		adv  float64
		grad [2]float64
	}
	steps := make([]upd, len(ep.States))
	for t, s := range ep.States {
		b := 0.0
		if baseline != nil {
			b = baseline[s]
		}
		steps[t] = upd{s, g[t] - b, GradLogSoftmax(th[s], ep.Actions[t])}
	}
	for _, u := range steps {
		for i := range th[u.s] {
			th[u.s][i] += alpha * u.adv * u.grad[i]
		}
	}
	return g
}

// TrainReinforce is the course's train_reinforce: one ReinforceUpdate per sampled episode.
func TrainReinforce(episodes int, alpha float64, seed int64) Logits {
	rng := pyrand.New(seed)
	var th Logits
	for range episodes {
		ReinforceUpdate(&th, Rollout(&th, rng), alpha, 0.9, nil)
	}
	return th
}

// GradientSamples collects, under the uniform policy (θ = 0 throughout), one value
// (G_t − b(s))·∂log π(a_t|s)/∂θ_s[→] per visit of state.
func GradientSamples(baseline *StateValues, state, episodes int, seed int64) []float64 {
	rng := pyrand.New(seed)
	var th Logits
	var out []float64
	for range episodes {
		ep := Rollout(&th, rng)
		g := rl.ReturnsBackward(ep.Rewards, 0.9)
		for t, s := range ep.States {
			if s == state {
				b := 0.0
				if baseline != nil {
					b = baseline[s]
				}
				out = append(out, (g[t]-b)*GradLogSoftmax(th[s], ep.Actions[t])[Right])
			}
		}
	}
	return out
}

// MeanStd is the mean and the population standard deviation, summed left to right.
func MeanStd(xs []float64) (mean, std float64) {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	mean = sum / float64(len(xs))
	sq := 0.0
	for _, x := range xs {
		sq += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sq / float64(len(xs)))
}

// Phase5Check is phase 5's hand_check: θ after one REINFORCE update (α = 1) on scripted episodes.
type Phase5Check struct {
	GradZero       [2]float64 // GradLogSoftmax([0, 0], →)
	Success        Logits     // after →→
	SuccessG       []float64
	Failure        Logits // after ←←
	Detour         Logits // after ←→→→
	DetourBaseline Logits // after ←→→→ with b = V^π of the uniform policy
}

// Phase5HandCheck computes phase 5's hand_check.
func Phase5HandCheck() Phase5Check {
	h := Phase5Check{GradZero: GradLogSoftmax([2]float64{0, 0}, Right)}
	h.SuccessG = ReinforceUpdate(&h.Success, scripted([]int{Right, Right}), 1.0, 0.9, nil)
	ReinforceUpdate(&h.Failure, scripted([]int{Left, Left}), 1.0, 0.9, nil)
	detour := scripted([]int{Left, Right, Right, Right})
	ReinforceUpdate(&h.Detour, detour, 1.0, 0.9, nil)
	v := ExactValues(0.5, 0.9) // {1: −0.5, 2: 0, 3: 0.5}
	ReinforceUpdate(&h.DetourBaseline, detour, 1.0, 0.9, &v)
	return h
}

// Phase5Config holds `posttrain toy reinforce`'s settings.
type Phase5Config struct {
	Seed         int64
	Episodes     int // REINFORCE training episodes
	Alpha        float64
	GradEpisodes int // episodes of the gradient-variance experiment
	State        int // the cell whose θ[→] gradient samples are collected
}

// DefaultPhase5 is the course's phase 5.
func DefaultPhase5() Phase5Config {
	return Phase5Config{Seed: 0, Episodes: 2000, Alpha: 0.1, GradEpisodes: 20000, State: 3}
}

// Validate checks the settings.
func (c Phase5Config) Validate() error {
	if c.State < 1 || c.State > 3 {
		return fmt.Errorf("state must be a non-terminal cell 1, 2 or 3, got %d", c.State)
	}
	return firstError(checkAtLeast("episodes", c.Episodes, 0), checkNonNegative("alpha", c.Alpha),
		checkAtLeast("grad-episodes", c.GradEpisodes, 1))
}

// Args is the settings as the course's JSON "args" (without "json").
func (c Phase5Config) Args() Object {
	return Object{{"seed", c.Seed}, {"episodes", c.Episodes}, {"alpha", Float(c.Alpha)},
		{"grad_episodes", c.GradEpisodes}, {"state", c.State}}
}

// Phase5Result is everything phase 5 prints and reports.
type Phase5Result struct {
	Config                Phase5Config
	HandCheck             Phase5Check
	NoBaseMean, NoBaseStd float64
	BaseMean, BaseStd     float64
	Theta                 Logits
	PRight                StateValues
}

// RunPhase5 runs phase 5: hand checks, the variance of the gradient estimate with and without a
// baseline, and REINFORCE training.
func RunPhase5(c Phase5Config) (*Phase5Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	r := &Phase5Result{Config: c, HandCheck: Phase5HandCheck()}
	plain := GradientSamples(nil, c.State, c.GradEpisodes, c.Seed)
	if len(plain) == 0 {
		return nil, errors.New("state was never visited: raise grad-episodes")
	}
	v := ExactValues(0.5, 0.9)
	r.NoBaseMean, r.NoBaseStd = MeanStd(plain)
	r.BaseMean, r.BaseStd = MeanStd(GradientSamples(&v, c.State, c.GradEpisodes, c.Seed))
	r.Theta = TrainReinforce(c.Episodes, c.Alpha, c.Seed)
	r.PRight = pRights(&r.Theta)
	return r, nil
}

var subscript = []string{"₀", "₁", "₂", "₃", "₄"}

// Lines is what phase 5 prints.
func (r *Phase5Result) Lines() []string {
	h := r.HandCheck
	detour, base := pRights(&h.Detour), pRights(&h.DetourBaseline)
	return []string{
		"←→→→ 한 번 뒤 P(→|s) = " + roundedStates(&detour, 4),
		"baseline 사용  P(→|s) = " + roundedStates(&base, 4),
		fmt.Sprintf("%d번 칸 방문당 θ%s[→] gradient 추정: baseline 없음 평균 %s 표준편차 %s | baseline V^π 평균 %s 표준편차 %s",
			r.Config.State, subscript[r.Config.State], pyfmt.Fixed(r.NoBaseMean, 3, true), pyfmt.Fixed(r.NoBaseStd, 3, false),
			pyfmt.Fixed(r.BaseMean, 3, true), pyfmt.Fixed(r.BaseStd, 3, false)),
		fmt.Sprintf("REINFORCE %d 에피소드 뒤 P(→|s) = %s", r.Config.Episodes, roundedStates(&r.PRight, 3)),
	}
}

// Results is phase 5's JSON results.
func (r *Phase5Result) Results() Object {
	return Object{
		{"grad_no_baseline", Object{{"mean", Float(r.NoBaseMean)}, {"std", Float(r.NoBaseStd)}}},
		{"grad_baseline", Object{{"mean", Float(r.BaseMean)}, {"std", Float(r.BaseStd)}}},
		{"theta", thetaObject(&r.Theta)},
		{"p_right", stateObject(&r.PRight)},
	}
}
