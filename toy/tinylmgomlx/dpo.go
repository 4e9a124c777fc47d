package tinylmgomlx

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/toy/tinylm"
	"github.com/posttrain/posttrain/trainers/dpo"
	"github.com/posttrain/posttrain/trainers/kto"
)

// dpoInputs are TrainDPO's step inputs: the chosen and the rejected responses, pair by pair.
type dpoInputs[T any] struct{ Chosen, Rejected Responses[T] }

// ktoInputs are TrainKTO's step inputs: the responses, their labels and their prompts' reference
// points z.
type ktoInputs[T any] struct {
	Responses[T]
	Desirable, Z T
}

// TrainDPO is phase 10's train_dpo through trainers/dpo: Epochs full-batch plain steps of lr on
// the mean sigmoid DPO loss over prefs (식 (10.3)). It returns the policy with its mirror synced.
func TrainDPO(b backends.Backend, prefs []tinylm.Preference, cfg tinylm.PrefConfig) (*Policy, error) {
	p, err := newPolicy(b, cfg)
	if err != nil {
		return nil, err
	}
	var prompts []string
	var chosen, rejected [][]int
	for _, pr := range prefs {
		yw, err := tinylm.Parse(pr.Chosen)
		if err != nil {
			return nil, err
		}
		yl, err := tinylm.Parse(pr.Rejected)
		if err != nil {
			return nil, err
		}
		prompts, chosen, rejected = append(prompts, pr.Prompt), append(chosen, yw), append(rejected, yl)
		// The oracle's first epoch creates y_w's rows, then y_l's, pair by pair.
		p.LM.TokenLogps(pr.Prompt, yw)
		p.LM.TokenLogps(pr.Prompt, yl)
	}
	s, err := p.NewStep(cfg.LR, func(score Scorer, nodes named.Inputs) (*Node, map[string]*Node) {
		in := named.Bind[dpoInputs[*Node]](nodes)
		c, r := score(in.Chosen), score(in.Rejected)
		pc, pr := dpo.SeqLogProbs(c.LogProbs, c.Mask), dpo.SeqLogProbs(r.LogProbs, r.Mask)
		rc, rr := dpo.SeqLogProbs(c.RefLogProbs, c.Mask), dpo.SeqLogProbs(r.RefLogProbs, r.Mask)
		loss, m := dpo.SigmoidLoss(pc, pr, rc, rr, cfg.Beta, 0)
		return loss, m.Named()
	})
	if err != nil {
		return nil, err
	}
	in := named.Of[any](dpoInputs[any]{Chosen: p.Encode(prompts, chosen).Inputs(), Rejected: p.Encode(prompts, rejected).Inputs()})
	for epoch := range cfg.Epochs {
		if _, err := s.Run(in); err != nil {
			return nil, fmt.Errorf("dpo epoch %d: %w", epoch, err)
		}
	}
	return p, p.Sync()
}

// RunDPO trains DPO on the course's preferences and scores it with the oracle's code.
func RunDPO(b backends.Backend, cfg tinylm.PrefConfig) (tinylm.DPOResult, error) {
	p, err := TrainDPO(b, tinylm.Preferences, cfg)
	if err != nil {
		return tinylm.DPOResult{}, err
	}
	return tinylm.NewDPOResult(cfg.Beta, p.LM, p.Ref), nil
}

// TrainKTO is phase 10's train_kto through trainers/kto: every epoch the reference point
// z = max(0, KL(π‖π_ref)) of each prompt is computed exactly on the host mirror (detached), then
// one plain step of lr on the mean KTO loss over labels (식 (10.4)).
func TrainKTO(b backends.Backend, labels []tinylm.KTOLabel, cfg tinylm.PrefConfig) (*Policy, error) {
	p, err := newPolicy(b, cfg)
	if err != nil {
		return nil, err
	}
	var prompts []string
	var ys [][]int
	var good []bool
	for _, l := range labels {
		y, err := tinylm.Parse(l.Response)
		if err != nil {
			return nil, err
		}
		prompts, ys, good = append(prompts, l.Prompt), append(ys, y), append(good, l.Good)
	}
	batch := p.Encode(prompts, ys)
	kcfg := kto.LossConfig{Beta: cfg.Beta, DesirableWeight: 1, UndesirableWeight: 1}
	s, err := p.NewStep(cfg.LR, func(score Scorer, nodes named.Inputs) (*Node, map[string]*Node) {
		in := named.Bind[ktoInputs[*Node]](nodes)
		r := score(in.Responses)
		pol, ref := kto.SeqLogProbs(r.LogProbs, r.Mask), kto.SeqLogProbs(r.RefLogProbs, r.Mask)
		loss, m := kto.Loss(pol, ref, in.Desirable, in.Z, kcfg)
		return loss, map[string]*Node{"kl": m.KL}
	})
	if err != nil {
		return nil, err
	}
	for epoch := range cfg.Epochs {
		z := map[string]float64{}
		for _, x := range tinylm.Prompts {
			z[x] = math.Max(0.0, tinylm.KL(p.LM, p.Ref, x))
		}
		zs := make([]float64, len(labels))
		for i, l := range labels {
			zs[i] = z[l.Prompt]
		}
		if _, err := s.Run(named.Of[any](ktoInputs[any]{Responses: batch.Inputs(), Desirable: good, Z: zs})); err != nil {
			return nil, fmt.Errorf("kto epoch %d: %w", epoch, err)
		}
		if err := p.Sync(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// RunKTO trains KTO on the course's labels and scores it with the oracle's code.
func RunKTO(b backends.Backend, cfg tinylm.PrefConfig) (tinylm.KTOResult, error) {
	p, err := TrainKTO(b, tinylm.KTOLabels, cfg)
	if err != nil {
		return tinylm.KTOResult{}, err
	}
	return tinylm.NewKTOResult(p.LM, p.Ref), nil
}
