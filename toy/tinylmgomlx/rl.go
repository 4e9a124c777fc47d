package tinylmgomlx

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/pyrand"
	"github.com/posttrain/posttrain/toy/tinylm"
	"github.com/posttrain/posttrain/trainers/engine/rl"
	"github.com/posttrain/posttrain/trainers/grpo"
)

// tracer keeps the first tinylm.TraceLen sampled responses (the goldens' samples_head).
type tracer struct{ head []tinylm.Sample }

func (t *tracer) record(prompt string, tokens []int) {
	if len(t.head) < tinylm.TraceLen {
		t.head = append(t.head, tinylm.Sample{Prompt: prompt, Response: tinylm.Show(tokens)})
	}
}

// sample draws n responses per prompt from the mirror, prompts in order (the oracle's RNG order).
func (p *Policy) sample(rng *pyrand.Rand, n int, tr *tracer) (prompts []string, ys [][]int) {
	for _, x := range tinylm.Prompts {
		for range n {
			y := p.LM.Sample(x, rng)
			tr.record(x, y)
			prompts, ys = append(prompts, x), append(ys, y)
		}
	}
	return prompts, ys
}

// sum adds left to right (CPython 3.11's sum()).
func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// pgInputs are the step inputs of the on-policy loss: the responses and their advantages.
type pgInputs[T any] struct {
	Responses[T]
	Advantages T
}

// onPolicyLoss is the policy-gradient loss at ratio 1: trainers/grpo with old = the detached
// current log-probs, β = 0, per-sequence advantages and the given aggregation. Its inputs are
// pgInputs.
func onPolicyLoss(agg grpo.Aggregation) stepLoss {
	return func(score Scorer, nodes named.Inputs) (*Node, map[string]*Node) {
		in := named.Bind[pgInputs[*Node]](nodes)
		r := score(in.Responses)
		loss, _ := grpo.Loss(grpo.Inputs{LogProbs: r.LogProbs, OldLogProbs: StopGradient(r.LogProbs), Mask: r.Mask,
			Advantages: in.Advantages}, grpo.Params{EpsLow: 0.2, EpsHigh: 0.2}, grpo.TokenRatio, agg)
		return loss, nil
	}
}

// TrainReinforceKL is phase 8's train_reinforce_kl through trainers/grpo + step: each iteration
// samples Group responses per prompt on the host, scores them R − β·log π/π_ref with log-probs
// from the graph, subtracts the prompt's mean score, and takes one plain step of lr on
// −mean_b A_b·log π(y_b|x_b) (식 (8.3)-(8.4), grpo.SequenceSumMean at ratio 1).
func TrainReinforceKL(b backends.Backend, cfg tinylm.ReinforceKLConfig) (*Policy, []tinylm.Sample, error) {
	p, err := newPolicy(b, cfg)
	if err != nil {
		return nil, nil, err
	}
	s, err := p.NewStep(cfg.LR, onPolicyLoss(grpo.SequenceSumMean))
	if err != nil {
		return nil, nil, err
	}
	rng, tr := pyrand.New(cfg.Seed), &tracer{}
	for it := range cfg.Iterations {
		prompts, ys := p.sample(rng, cfg.Group, tr)
		batch := p.Encode(prompts, ys)
		lp, ref, err := p.LogProbs(batch)
		if err != nil {
			return nil, nil, err
		}
		adv := make([]float64, len(ys))
		for g := 0; g < len(ys); g += cfg.Group { // one prompt's group
			scores := make([]float64, cfg.Group)
			for i := range scores {
				logRatio := sum(lp[g+i]) - sum(ref[g+i])
				scores[i] = tinylm.Verify(prompts[g+i], ys[g+i]) - float64(cfg.Beta*logRatio)
			}
			baseline := sum(scores) / float64(len(scores))
			for i := range scores {
				adv[g+i] = scores[i] - baseline
			}
		}
		if _, err := s.Run(named.Of[any](pgInputs[any]{Responses: batch.Inputs(), Advantages: adv})); err != nil {
			return nil, nil, fmt.Errorf("reinforce-kl iteration %d: %w", it, err)
		}
		if err := p.Sync(); err != nil {
			return nil, nil, err
		}
	}
	return p, tr.head, nil
}

// RunReinforceKL trains with cfg and scores the result with the oracle's code.
func RunReinforceKL(b backends.Backend, cfg tinylm.ReinforceKLConfig) (tinylm.ReinforceKLResult, error) {
	p, head, err := TrainReinforceKL(b, cfg)
	if err != nil {
		return tinylm.ReinforceKLResult{}, err
	}
	return tinylm.NewReinforceKLResult(cfg.Beta, p.LM, p.Ref, head), nil
}

// RLHFPPO is phase 9's rlhf_ppo through trainers/grpo + step: per-token rewards
// −β(log π_old − log π_ref) plus r(x,y) on the last token (식 (9.3)) with log-probs from the graph,
// a host table critic and GAE (γ = 1, rl.GAE), then Epochs PPO-clip steps over the batch: the
// per-token advantages in grpo.Loss with TokenRatio and BNPOMean (weight 1/tokens in the batch).
func RLHFPPO(b backends.Backend, rm *tinylm.RewardModel, cfg tinylm.RLHFConfig) (*Policy, []tinylm.Sample, error) {
	p, err := newPolicy(b, cfg)
	if err != nil {
		return nil, nil, err
	}
	s, err := p.NewStep(cfg.LR, func(score Scorer, nodes named.Inputs) (*Node, map[string]*Node) {
		in := named.Bind[ppoInputs[*Node]](nodes)
		r := score(in.Responses)
		loss, m := grpo.Loss(grpo.Inputs{LogProbs: r.LogProbs, OldLogProbs: in.Old, Mask: r.Mask, Advantages: in.Advantages},
			grpo.Params{EpsLow: cfg.Eps, EpsHigh: cfg.Eps}, grpo.TokenRatio, grpo.BNPOMean)
		return loss, map[string]*Node{"clip_ratio/region_mean": m.ClipRatioRegion}
	})
	if err != nil {
		return nil, nil, err
	}
	values := map[tinylm.Key]float64{}
	rng, tr := pyrand.New(cfg.Seed), &tracer{}
	for it := range cfg.Iterations {
		prompts, ys := p.sample(rng, cfg.Group, tr)
		batch := p.Encode(prompts, ys)
		old, ref, err := p.LogProbs(batch)
		if err != nil {
			return nil, nil, err
		}
		oldT, advT := make([][]float64, len(ys)), make([][]float64, len(ys))
		var keys [][]tinylm.Key
		var rets [][]float64
		for i, y := range ys {
			rewards := make([]float64, len(y))
			for t := range y {
				rewards[t] = -cfg.Beta * (old[i][t] - ref[i][t])
			}
			rewards[len(y)-1] += rm.Score(prompts[i], tinylm.Show(y))
			k, vals := make([]tinylm.Key, len(y)), make([]float64, len(y))
			for t := range y {
				k[t] = tinylm.Key{Prompt: prompts[i], Prefix: tinylm.Show(y[:t])}
				vals[t] = values[k[t]]
			}
			_, adv, ret := rl.GAE(rewards, vals, 0, true, 1, cfg.Lam)
			oldT[i], advT[i] = padded(old[i]), padded(adv)
			keys, rets = append(keys, k), append(rets, ret)
		}
		in := named.Of[any](ppoInputs[any]{Responses: batch.Inputs(), Old: oldT, Advantages: advT})
		for epoch := range cfg.Epochs {
			if _, err := s.Run(in); err != nil {
				return nil, nil, fmt.Errorf("rlhf iteration %d epoch %d: %w", it, epoch, err)
			}
		}
		if err := p.Sync(); err != nil {
			return nil, nil, err
		}
		for i := range keys { // critic: V(prefix) moves toward its return
			for t, k := range keys[i] {
				values[k] += float64(cfg.CriticLR * (rets[i][t] - values[k]))
			}
		}
	}
	return p, tr.head, nil
}

// padded pads a per-token slice with zeros to tinylm.MaxNewTokens.
func padded(xs []float64) []float64 {
	out := make([]float64, tinylm.MaxNewTokens)
	copy(out, xs)
	return out
}

// RunRLHF trains the table reward model (toy/tinylm, host) on the course's preferences, runs
// RLHFPPO and scores the result with the oracle's code.
func RunRLHF(b backends.Backend, cfg tinylm.RLHFConfig) (tinylm.Phase9Result, error) {
	rm := tinylm.TrainRewardModel(tinylm.Preferences, cfg.RMEpochs, cfg.RMLR)
	p, head, err := RLHFPPO(b, rm, cfg)
	if err != nil {
		return tinylm.Phase9Result{}, err
	}
	return tinylm.NewRLHFResult(rm, cfg.Beta, p.LM, p.Ref, head), nil
}
