package gymrl

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/pyrand"
	"github.com/posttrain/posttrain/toy/gym"
	"github.com/posttrain/posttrain/trainers/engine/rl"
	"github.com/posttrain/posttrain/trainers/engine/step"
)

// PPOConfig is extras/ppo_cartpole.py's main(iterations, seed) and its constants.
type PPOConfig struct {
	Env           string
	Seed          int64
	Iterations    int
	LearningRate  float64
	NumSteps      int // T: rollout steps per iteration
	Gamma         float64
	GAELambda     float64
	ClipCoef      float64 // ε of the clipped ratio (식 7.2)
	UpdateEpochs  int
	MinibatchSize int
	NormAdv       bool // normalise the advantages within each minibatch
	VFCoef        float64
	EntCoef       float64
	MaxGradNorm   float64
	Hidden        []int // hidden widths of the actor's and the critic's tanh MLPs
	PrintEvery    int   // a progress line when iteration % PrintEvery == 0
}

// DefaultPPO is the extras' settings: actor and critic 64-64 tanh MLPs, Adam 2.5e-4 on both,
// T 1,024, γ 0.99, λ 0.95, ε 0.2, 4 epochs of minibatches of 256, advantage normalisation, value
// coefficient 0.5, entropy 0.01, gradient clip 0.5, 60 iterations, seed 0, a line every 10.
func DefaultPPO() PPOConfig {
	return PPOConfig{Env: "CartPole-v1", Seed: 0, Iterations: 60, LearningRate: 2.5e-4, NumSteps: 1024, Gamma: 0.99,
		GAELambda: 0.95, ClipCoef: 0.2, UpdateEpochs: 4, MinibatchSize: 256, NormAdv: true, VFCoef: 0.5,
		EntCoef: 0.01, MaxGradNorm: 0.5, Hidden: []int{64, 64}, PrintEvery: 10}
}

// Validate names the first bad setting by its flag.
func (c PPOConfig) Validate() error {
	first, check := checkCommon(c.Env, c.Seed, c.LearningRate)
	check(c.Iterations < 1, "iterations %d must be >= 1", c.Iterations)
	check(c.NumSteps < 1, "num-steps %d must be >= 1", c.NumSteps)
	check(!(c.Gamma >= 0 && c.Gamma <= 1), "gamma %v must be in [0, 1]", c.Gamma)
	check(!(c.GAELambda >= 0 && c.GAELambda <= 1), "gae-lambda %v must be in [0, 1]", c.GAELambda)
	check(!(c.ClipCoef >= 0 && c.ClipCoef < 1), "clip-coef %v must be in [0, 1)", c.ClipCoef)
	check(c.UpdateEpochs < 1, "update-epochs %d must be >= 1", c.UpdateEpochs)
	check(c.MinibatchSize < 2 || c.MinibatchSize > c.NumSteps, "minibatch-size %d must be in [2, num-steps %d]", c.MinibatchSize, c.NumSteps)
	check(!(c.VFCoef >= 0) || !(c.EntCoef >= 0), "vf-coef %v and ent-coef %v must be >= 0", c.VFCoef, c.EntCoef)
	check(!(c.MaxGradNorm >= 0), "max-grad-norm %v must be >= 0 (0: no clipping)", c.MaxGradNorm)
	check(c.PrintEvery < 1, "print-every %d must be >= 1", c.PrintEvery)
	check(len(c.Hidden) == 0, "hidden: at least one layer width")
	for _, h := range c.Hidden {
		check(h < 1, "hidden: width %d must be >= 1", h)
	}
	return *first
}

// ppoBatch is one minibatch (graph inputs by name): observations, actions, π_old's log-probs,
// (normalised) advantages and the critic's targets.
type ppoBatch[T any] struct{ Obs, Act, OldLogp, Adv, Ret T }

// ppoLoss is the extras' loss (식 7.1–7.3):
//
//	ρ = exp(log π(a|s) − log π_old(a|s))
//	pg = −mean(min(ρ·A, clip(ρ, 1−ε, 1+ε)·A))         (rl.ClippedSurrogate)
//	v = 0.5·mean((V(s) − R)²)
//	loss = pg + vf·v − ent·mean(H(π(·|s)))
func ppoLoss(actor, critic *mlp, c PPOConfig, nAct int) step.LossFn {
	return func(ctx *context.Context, in named.Inputs) (*Node, map[string]*Node) {
		b := named.Bind[ppoBatch[*Node]](in)
		logps := LogSoftmax(actor.apply(b.Obs), -1)                         // [B, nAct]
		logp := ReduceSum(Mul(logps, OneHot(b.Act, nAct, float32Dtype)), 1) // [B]
		ratio := InsertAxes(Exp(Sub(logp, b.OldLogp)), -1)                  // [B, 1]
		pg := ReduceAllMean(rl.ClippedSurrogate(ratio, b.Adv, c.ClipCoef, c.ClipCoef))
		v := Reshape(critic.apply(b.Obs), -1) // [B]
		vLoss := MulScalar(ReduceAllMean(Square(Sub(v, b.Ret))), 0.5)
		entropy := ReduceAllMean(Neg(ReduceSum(Mul(Exp(logps), logps), 1)))
		loss := Sub(Add(pg, MulScalar(vLoss, c.VFCoef)), MulScalar(entropy, c.EntCoef))
		return loss, map[string]*Node{"pg_loss": pg, "v_loss": vLoss, "entropy": entropy}
	}
}

// ppoRollout is one iteration's buffer (the extras' buf).
type ppoRollout struct {
	obs      [][]float32
	act      []int32
	logp     []float32
	rew, val []float64
	// terminated is the extras' buf['done'], float(terminated): a truncation (the 500-step time
	// limit) is not recorded, so GAE runs on across it into the next episode (gaeSegments).
	terminated []bool
	nextValue  float64
}

// RunPPO is extras/ppo_cartpole.py's main: T-step rollouts of π_old, GAE, then epochs of
// minibatch updates of the clipped objective. torch.manual_seed(seed)'s stream (initialisation,
// action sampling, minibatch permutations) is random.Random(seed) here.
func RunPPO(b backends.Backend, c PPOConfig) (Result, error) {
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	env, _ := gym.Make(c.Env)
	nAct := env.ActionSpace.N
	rng := pyrand.New(c.Seed)
	ctx := context.New()
	actor := newMLP(ctx, "/actor", append(append([]int{env.ObsDim}, c.Hidden...), nAct), tanh, rng, true)
	critic := newMLP(ctx, "/critic", append(append([]int{env.ObsDim}, c.Hidden...), 1), tanh, rng, true)
	upd, err := step.New(b, ctx, step.Config{Optimizer: step.AdamW, LearningRate: c.LearningRate, MaxGradNorm: c.MaxGradNorm},
		ppoLoss(actor, critic, c, nAct))
	if err != nil {
		return Result{}, err
	}
	policy, err := step.NewContextEval(b, ctx, func(ctx *context.Context, in named.Inputs) map[string]*Node {
		x := in.Get("Obs")
		return map[string]*Node{"logp": LogSoftmax(actor.apply(x), -1), "value": Reshape(critic.apply(x), -1)}
	})
	if err != nil {
		return Result{}, err
	}
	var res Result
	var returns []float64
	epReturn := 0.0
	obs := env.ResetSeed(uint64(c.Seed))
	for it := range c.Iterations {
		ro := ppoRollout{}
		for range c.NumSteps { // ① rollout with π_old
			logps, v, err := evalPolicy(policy, obs)
			if err != nil {
				return Result{}, err
			}
			a := sampleCategorical(logps, rng.Random())
			next, r, term, trunc := env.Step(a)
			ro.obs, ro.act, ro.logp = append(ro.obs, obs), append(ro.act, int32(a)), append(ro.logp, logps[a])
			ro.rew, ro.val, ro.terminated = append(ro.rew, r), append(ro.val, v), append(ro.terminated, term)
			obs = next
			epReturn += r
			if term || trunc {
				returns = append(returns, epReturn)
				res.Episodes = append(res.Episodes, Episode{At: it, Return: epReturn})
				epReturn, obs = 0, env.Reset()
			}
		}
		if _, ro.nextValue, err = evalPolicy(policy, obs); err != nil {
			return Result{}, err
		}
		adv, ret := gaeSegments(ro, c.Gamma, c.GAELambda) // ②
		for range c.UpdateEpochs {                        // ③
			perm := rng.Sample(c.NumSteps, c.NumSteps)
			for lo := 0; lo < c.NumSteps; lo += c.MinibatchSize {
				idx := perm[lo:min(lo+c.MinibatchSize, c.NumSteps)]
				if _, err := upd.Run(ro.minibatch(idx, adv, ret, c.NormAdv)); err != nil {
					return Result{}, err
				}
			}
		}
		if it%c.PrintEvery == 0 && len(returns) > 0 {
			res.report(fmt.Sprintf("iter %3d", it), it, returns)
		}
	}
	res.Final = finalLast10(returns)
	return res, nil
}

// gaeSegments is the extras' GAE loop (식 6.1–6.2) over a rollout that holds several episodes:
//
//	nv = next_v if t == T - 1 else buf['val'][t + 1]
//	nonterminal = 1.0 - buf['done'][t]            # buf['done'] is float(terminated)
//	delta = rew[t] + gamma * nv * nonterminal - val[t]
//	A = delta + gamma * lam * nonterminal * A
//
// computed as rl.GAE over the pieces between terminations: after a terminated step the next value
// is 0 and A restarts; the rollout's last piece bootstraps with V of the next observation. A
// truncation is not an end here, although the extras' comment says "truncated는 이 축약판에서 종료처럼
// 다룬다": their code stores only terminated, so a truncated episode's last step bootstraps with
// the next episode's first value and its advantages carry on from that episode's, and this
// follows the code (CleanRL's next_done = terminated | truncated would end it instead).
func gaeSegments(ro ppoRollout, gamma, lam float64) (adv, ret []float64) {
	start := 0
	for t := range ro.rew {
		last := t == len(ro.rew)-1
		if !ro.terminated[t] && !last {
			continue
		}
		_, a, r := rl.GAE(ro.rew[start:t+1], ro.val[start:t+1], ro.nextValue, ro.terminated[t], gamma, lam)
		adv, ret = append(adv, a...), append(ret, r...)
		start = t + 1
	}
	return adv, ret
}

// minibatch lays out the transitions idx, with the advantages normalised over the minibatch
// ((A − mean)/(std + 1e-8), torch's sample std, rl.SampleStd) when norm is set.
func (ro ppoRollout) minibatch(idx []int, adv, ret []float64, norm bool) named.Feed {
	var obs [][]float32
	var act []int32
	var oldLogp, a, r []float32
	var a64 []float64
	for _, i := range idx {
		obs, act, oldLogp = append(obs, ro.obs[i]), append(act, ro.act[i]), append(oldLogp, ro.logp[i])
		a64, r = append(a64, adv[i]), append(r, float32(ret[i]))
	}
	mean, std := 0.0, 1.0
	if norm {
		for _, x := range a64 {
			mean += x
		}
		mean /= float64(len(a64))
		std = rl.SampleStd(a64) + 1e-8
	}
	for _, x := range a64 {
		a = append(a, float32((x-mean)/std))
	}
	return named.Of[any](ppoBatch[any]{Obs: obsTensor(obs), Act: act, OldLogp: oldLogp, Adv: a, Ret: r})
}

// evalPolicy returns log π(·|obs) (float32, as the update graph computes it) and V(obs).
func evalPolicy(policy *step.ContextEval, obs []float32) ([]float32, float64, error) {
	out, err := policy.Run(named.Feed{Names: []string{"Obs"}, Values: []any{obsTensor([][]float32{obs})}})
	if err != nil {
		return nil, 0, err
	}
	lp := step.Float64s(out["logp"])
	logps := make([]float32, len(lp))
	for i, x := range lp {
		logps[i] = float32(x)
	}
	return logps, step.Float64s(out["value"])[0], nil
}

// sampleCategorical is Categorical(logits).sample() by inversion: the first action whose
// cumulative probability exceeds u ∈ [0, 1) (the last one if rounding leaves u above the sum).
func sampleCategorical(logps []float32, u float64) int {
	cum := 0.0
	for i, lp := range logps {
		cum += math.Exp(float64(lp))
		if u < cum {
			return i
		}
	}
	return len(logps) - 1
}
