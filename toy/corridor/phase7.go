package corridor

import (
	"fmt"
	"math"

	"github.com/posttrain/posttrain/internal/pyfmt"
	"github.com/posttrain/posttrain/internal/pyrand"
	"github.com/posttrain/posttrain/trainers/engine/rl"
)

// EpochDemo is the course's epoch_demo: a fixed batch from cell 2, [(→, A=+1), (←, A=−1)],
// collected under π_old = [0.5, 0.5], is trained on again every epoch (lr 0.2). With the clip
// (식 (7.2)) the update stops once ρ leaves [1−ε, 1+ε]; without it (coefficient ρ·A) it keeps
// going. It returns P(→|2) before and after each epoch.
func EpochDemo(epochs int, lr, eps float64, clip bool) []float64 {
	type item struct {
		a   int
		adv float64
	}
	batch := []item{{Right, +1.0}, {Left, -1.0}}
	old := Softmax([2]float64{0, 0})
	var th [2]float64
	history := []float64{0.5}
	for range epochs {
		pi, grad := Softmax(th), [2]float64{}
		for _, b := range batch {
			ratio := pi[b.a] / old[b.a] // 식 (7.1)
			coef := ratio * b.adv
			if clip {
				_, coef = rl.PPOClipTerm(ratio, b.adv, eps)
			}
			g := GradLogSoftmax(th, b.a)
			for i := range grad {
				grad[i] += coef * g[i] / float64(len(batch))
			}
		}
		for i := range th {
			th[i] += lr * grad[i] // gradient ascent
		}
		history = append(history, Softmax(th)[Right])
	}
	return history
}

// Phase7Config holds `posttrain toy ppo`'s settings.
type Phase7Config struct {
	Seed       int64
	Iterations int
	Episodes   int // episodes collected per iteration
	Epochs     int // passes over each batch
	LR         float64
	CriticLR   float64
	Eps        float64 // clip ε
	Gamma      float64
	Lam        float64 // GAE λ
}

// DefaultPhase7 is the course's train_ppo() defaults.
func DefaultPhase7() Phase7Config {
	return Phase7Config{Seed: 0, Iterations: 60, Episodes: 8, Epochs: 4, LR: 0.5, CriticLR: 0.1, Eps: 0.2,
		Gamma: 0.9, Lam: 0.95}
}

// Validate checks the settings.
func (c Phase7Config) Validate() error {
	return firstError(checkAtLeast("iterations", c.Iterations, 0), checkAtLeast("episodes", c.Episodes, 1),
		checkAtLeast("epochs", c.Epochs, 1), checkNonNegative("lr", c.LR), checkNonNegative("critic-lr", c.CriticLR),
		checkRange("eps", c.Eps, 0, 1), checkGamma(c.Gamma), checkRange("lam", c.Lam, 0, 1))
}

// Args is the settings as the course's JSON "args" (without "json").
func (c Phase7Config) Args() Object {
	return Object{{"seed", c.Seed}, {"iterations", c.Iterations}, {"episodes", c.Episodes},
		{"epochs", c.Epochs}, {"lr", Float(c.LR)}, {"critic_lr", Float(c.CriticLR)}, {"eps", Float(c.Eps)},
		{"gamma", Float(c.Gamma)}, {"lam", Float(c.Lam)}}
}

// TrainPPO is the course's train_ppo: per iteration, collect a batch under π_old, reuse it for
// Epochs passes of the clipped objective (식 (7.1)-(7.2), gradient coefficient from
// rl.PPOClipTerm), then move the critic toward the GAE returns. It also returns, per iteration,
// the fraction of (sample, epoch) pairs whose gradient the clip removed (A ≠ 0).
func TrainPPO(c Phase7Config) (Logits, StateValues, []float64) {
	rng := pyrand.New(c.Seed)
	var th Logits
	var v StateValues
	var clipFrac []float64
	for range c.Iterations {
		batch := collect(&th, &v, rng, c.Episodes, c.Gamma, c.Lam) // rollout with π_old
		n := float64(len(batch))
		clipped := 0
		for range c.Epochs {
			var grads Logits
			for _, b := range batch {
				ratio := math.Exp(math.Log(Softmax(th[b.S])[b.A]) - b.LogP)
				_, coef := rl.PPOClipTerm(ratio, b.Adv, c.Eps)
				if coef == 0.0 && b.Adv != 0.0 {
					clipped++
				}
				g := GradLogSoftmax(th[b.S], b.A)
				for i := range g {
					grads[b.S][i] += coef * g[i] / n
				}
			}
			for _, s := range NonTerminal {
				for i := range th[s] {
					th[s][i] += c.LR * grads[s][i]
				}
			}
		}
		for _, b := range batch { // critic: V → GAE return, after all epochs
			v[b.S] += c.CriticLR * (b.Ret - v[b.S])
		}
		clipFrac = append(clipFrac, float64(clipped)/float64(c.Epochs*len(batch)))
	}
	return th, v, clipFrac
}

// Phase7Result is everything phase 7 prints and reports.
type Phase7Result struct {
	Config               Phase7Config
	DemoClip, DemoNoClip []float64 // EpochDemo(20, 0.2, 0.2, clip / no clip): the hand check
	Theta                Logits
	PRight               StateValues
	V                    StateValues
	ClipFraction         []float64
}

// RunPhase7 runs phase 7: the epoch demo with and without the clip, then PPO.
func RunPhase7(c Phase7Config) (*Phase7Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	r := &Phase7Result{Config: c, DemoClip: EpochDemo(20, 0.2, 0.2, true), DemoNoClip: EpochDemo(20, 0.2, 0.2, false)}
	r.Theta, r.V, r.ClipFraction = TrainPPO(c)
	r.PRight = pRights(&r.Theta)
	return r, nil
}

// Lines is what phase 7 prints.
func (r *Phase7Result) Lines() []string {
	demo := func(h []float64) string {
		return pyfmt.RoundList(h[:min(6, len(h))], 3) + " … " + pyfmt.RoundRepr(h[len(h)-1], 3)
	}
	f := r.ClipFraction
	return []string{
		"epoch별 P(→|2), clip 있음: " + demo(r.DemoClip),
		"epoch별 P(→|2), clip 없음: " + demo(r.DemoNoClip),
		fmt.Sprintf("PPO %d회 반복 뒤 P(→|s) = %s | critic V = %s", r.Config.Iterations,
			roundedStates(&r.PRight, 3), roundedStates(&r.V, 3)),
		"clip된 샘플 비율 (처음 3회, 마지막 3회): " + pyfmt.RoundList(f[:min(3, len(f))], 2) + " " +
			pyfmt.RoundList(f[max(0, len(f)-3):], 2),
	}
}

// Results is phase 7's JSON results.
func (r *Phase7Result) Results() Object {
	return Object{{"theta", thetaObject(&r.Theta)}, {"p_right", stateObject(&r.PRight)}, {"V", stateObject(&r.V)},
		{"clip_fraction", floats(r.ClipFraction)}, {"epoch_demo_clip", floats(r.DemoClip)},
		{"epoch_demo_noclip", floats(r.DemoNoClip)}}
}
