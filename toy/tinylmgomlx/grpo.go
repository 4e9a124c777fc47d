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

// ppoInputs are the step inputs of the clipped-ratio losses (TrainGRPO, RLHFPPO): the responses,
// π_old's per-token log-probs and the advantages.
type ppoInputs[T any] struct {
	Responses[T]
	Old, Advantages T
}

// stepLoss is the loss a Policy's step compiles (Policy.NewStep).
type stepLoss = func(score Scorer, in named.Inputs) (*Node, map[string]*Node)

// variantLoss maps the course's GRPO cfg onto trainers/grpo's named functions: ratio token →
// TokenRatio, sequence → SequenceRatio (GSPO); agg seq_mean → GRPOMean, token_mean → BNPOMean
// (DAPO on one batch), const → DrGRPOMean(MaxNewTokens). Its inputs are ppoInputs.
func variantLoss(v tinylm.GRPOVariant) (stepLoss, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	ratio := grpo.TokenRatio
	if v.Ratio == tinylm.RatioSequence {
		ratio = grpo.SequenceRatio
	}
	var agg grpo.Aggregation
	switch v.Agg {
	case tinylm.AggSeqMean:
		agg = grpo.GRPOMean
	case tinylm.AggTokenMean:
		agg = grpo.BNPOMean
	default:
		agg = grpo.DrGRPOMean(tinylm.MaxNewTokens)
	}
	params := grpo.Params{EpsLow: v.EpsLow, EpsHigh: v.EpsHigh, Beta: v.Beta}
	return func(score Scorer, nodes named.Inputs) (*Node, map[string]*Node) {
		in := named.Bind[ppoInputs[*Node]](nodes)
		r := score(in.Responses)
		loss, m := grpo.Loss(grpo.Inputs{LogProbs: r.LogProbs, OldLogProbs: in.Old, RefLogProbs: r.RefLogProbs,
			Mask: r.Mask, Advantages: in.Advantages}, params, ratio, agg)
		return loss, map[string]*Node{"clip_ratio/region_mean": m.ClipRatioRegion, "kl": m.KL}
	}, nil
}

// group is one prompt's G responses, encoded, with π_old's log-probs and the advantages.
type group struct {
	batch Batch
	old   [][]float64 // padded [G,T]
	adv   []float64
}

// sampleGroups draws G responses per prompt on the host, rewards them with the verifier, drops
// all-equal groups under DAPO's dynamic sampling (after sampling), and computes the advantages
// (rl.GroupAdvantages, 식 (11.1)) and π_old's log-probs in the graph.
func (p *Policy) sampleGroups(rng *pyrand.Rand, cfg tinylm.GRPOConfig, tr *tracer) ([]group, error) {
	var groups []group
	for _, x := range tinylm.Prompts {
		prompts, ys := make([]string, cfg.G), make([][]int, cfg.G)
		rs := make([]float64, cfg.G)
		for i := range ys {
			prompts[i], ys[i] = x, p.LM.Sample(x, rng)
			tr.record(x, ys[i])
			rs[i] = tinylm.Verify(x, ys[i])
		}
		if cfg.Variant.Dynamic && allEqual(rs) {
			continue
		}
		adv, err := rl.GroupAdvantages(rs, cfg.Variant.Adv)
		if err != nil {
			return nil, err
		}
		b := p.Encode(prompts, ys)
		old, _, err := p.LogProbs(b)
		if err != nil {
			return nil, err
		}
		for i := range old {
			old[i] = padded(old[i])
		}
		groups = append(groups, group{batch: b, old: old, adv: adv})
	}
	return groups, nil
}

func allEqual(xs []float64) bool {
	for _, x := range xs[1:] {
		if x != xs[0] {
			return false
		}
	}
	return true
}

// TrainGRPO is the course's train_grpo through trainers/grpo + step: every iteration samples the
// groups, then takes Epochs passes over them, one plain step of lr/|prompts| per group.
func TrainGRPO(b backends.Backend, cfg tinylm.GRPOConfig) (*Policy, []tinylm.Sample, error) {
	p, err := newPolicy(b, cfg)
	if err != nil {
		return nil, nil, err
	}
	loss, err := variantLoss(cfg.Variant)
	if err != nil {
		return nil, nil, err
	}
	s, err := p.NewStep(cfg.LR/float64(len(tinylm.Prompts)), loss)
	if err != nil {
		return nil, nil, err
	}
	rng, tr := pyrand.New(cfg.Seed), &tracer{}
	for it := range cfg.Iterations {
		groups, err := p.sampleGroups(rng, cfg, tr)
		if err != nil {
			return nil, nil, err
		}
		for epoch := range cfg.Epochs {
			for _, g := range groups {
				if _, err := s.Run(named.Of[any](ppoInputs[any]{Responses: g.batch.Inputs(), Old: g.old, Advantages: g.adv})); err != nil {
					return nil, nil, fmt.Errorf("grpo iteration %d epoch %d: %w", it, epoch, err)
				}
			}
		}
		if err := p.Sync(); err != nil {
			return nil, nil, err
		}
	}
	return p, tr.head, nil
}

// RunGRPO trains with cfg and scores the result with the oracle's code (phase 11).
func RunGRPO(b backends.Backend, cfg tinylm.GRPOConfig) (tinylm.Phase11Result, error) {
	p, head, err := TrainGRPO(b, cfg)
	if err != nil {
		return tinylm.Phase11Result{}, err
	}
	return tinylm.NewGRPOResult(cfg.Variant, p.LM, p.Ref, head), nil
}

// RunVariants trains every variant of tinylm.Variants with cfg's loop sizes (phase 12).
func RunVariants(b backends.Backend, cfg tinylm.GRPOConfig) (tinylm.Phase12Result, error) {
	res := tinylm.Phase12Result{Iterations: cfg.Iterations}
	for _, v := range tinylm.Variants {
		c := cfg
		c.Variant = v.Cfg
		p, head, err := TrainGRPO(b, c)
		if err != nil {
			return res, fmt.Errorf("%s: %w", v.Name, err)
		}
		res.Variants = append(res.Variants, tinylm.NewVariantResult(v.Name, v.Cfg, p.LM, p.Ref, head))
	}
	return res, nil
}
