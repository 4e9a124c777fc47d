package tinylm

import (
	"fmt"
	"math"

	"github.com/posttrain/posttrain/internal/pyrand"
	"github.com/posttrain/posttrain/trainers/engine/rl"
)

// Agg is how a group's token terms are averaged into one loss (the course's cfg['agg']).
type Agg string

// The aggregations of phases 11-12.
const (
	AggSeqMean   Agg = "seq_mean"   // mean over each response's tokens, then over the group (GRPO)
	AggTokenMean Agg = "token_mean" // mean over all the group's tokens (DAPO)
	AggConst     Agg = "const"      // token sum / (G · MaxNewTokens) (Dr. GRPO)
)

// RatioLevel is where the importance ratio lives (the course's cfg['ratio']).
type RatioLevel string

// The ratio levels of phases 11-12.
const (
	RatioToken    RatioLevel = "token"    // π/π_old per token (GRPO)
	RatioSequence RatioLevel = "sequence" // exp(mean token log-ratio), shared by the response (GSPO)
)

// GRPOVariant is the course's GRPO cfg dict: what differs between GRPO, RLOO, Dr. GRPO, DAPO and
// GSPO. It marshals with the course's keys.
type GRPOVariant struct {
	Adv     rl.AdvMode `json:"adv"`
	Agg     Agg        `json:"agg"`
	EpsLow  float64    `json:"eps_low"`
	EpsHigh float64    `json:"eps_high"`
	Ratio   RatioLevel `json:"ratio"`
	Beta    float64    `json:"beta"`    // k3 KL penalty coefficient
	Dynamic bool       `json:"dynamic"` // DAPO: drop groups whose rewards are all equal
}

// DefaultVariant is the course's DEFAULT (GRPO).
var DefaultVariant = GRPOVariant{Adv: rl.AdvStd, Agg: AggSeqMean, EpsLow: 0.2, EpsHigh: 0.2,
	Ratio: RatioToken, Beta: 0.04, Dynamic: false}

// Validate rejects unknown modes and negative ε or β.
func (v GRPOVariant) Validate() error {
	switch {
	case v.Adv != rl.AdvStd && v.Adv != rl.AdvMean && v.Adv != rl.AdvRLOO:
		return fmt.Errorf("grpo: unknown adv %q (want std, mean or rloo)", v.Adv)
	case v.Agg != AggSeqMean && v.Agg != AggTokenMean && v.Agg != AggConst:
		return fmt.Errorf("grpo: unknown agg %q (want seq_mean, token_mean or const)", v.Agg)
	case v.Ratio != RatioToken && v.Ratio != RatioSequence:
		return fmt.Errorf("grpo: unknown ratio %q (want token or sequence)", v.Ratio)
	case v.EpsLow < 0 || v.EpsHigh < 0 || v.Beta < 0:
		return fmt.Errorf("grpo: eps_low, eps_high and beta must be >= 0")
	}
	return nil
}

// NamedVariant is one entry of the course's VARIANTS.
type NamedVariant struct {
	Name string
	Cfg  GRPOVariant
}

// Variants is the course's VARIANTS in dict order.
var Variants = []NamedVariant{
	{"GRPO", DefaultVariant},
	{"RLOO", with(func(v *GRPOVariant) { v.Adv, v.Beta = rl.AdvRLOO, 0 })},
	{"Dr. GRPO", with(func(v *GRPOVariant) { v.Adv, v.Agg, v.Beta = rl.AdvMean, AggConst, 0 })},
	{"DAPO", with(func(v *GRPOVariant) { v.Agg, v.EpsHigh, v.Dynamic, v.Beta = AggTokenMean, 0.28, true, 0 })},
	{"GSPO", with(func(v *GRPOVariant) { v.Ratio, v.Beta = RatioSequence, 0 })},
}

// with is dict(DEFAULT, **changes).
func with(change func(*GRPOVariant)) GRPOVariant {
	v := DefaultVariant
	change(&v)
	return v
}

// VariantByName returns the named entry of Variants.
func VariantByName(name string) (GRPOVariant, bool) {
	for _, v := range Variants {
		if v.Name == name {
			return v.Cfg, true
		}
	}
	return GRPOVariant{}, false
}

// GRPOConfig is train_grpo's arguments: a variant plus the loop sizes.
type GRPOConfig struct {
	Variant    GRPOVariant
	Iterations int     // 60 (phase 11), 30 (phase 12)
	G          int     // responses per prompt, 8
	Epochs     int     // updates per batch of groups, 2
	LR         float64 // 1.0, divided by the number of prompts per group update
	Seed       int64
}

// DefaultGRPO returns phase 11's defaults.
func DefaultGRPO() GRPOConfig {
	return GRPOConfig{Variant: DefaultVariant, Iterations: 60, G: 8, Epochs: 2, LR: 1.0, Seed: 0}
}

// Validate checks the variant and the loop sizes (G ≥ 2 for the group baseline).
func (c GRPOConfig) Validate() error {
	if c.Iterations <= 0 || c.Epochs <= 0 || c.LR <= 0 {
		return fmt.Errorf("grpo: %w", errPositive)
	}
	if c.G < 2 {
		return fmt.Errorf("grpo: G = %d, want >= 2", c.G)
	}
	return c.Variant.Validate()
}

// GroupSample is one response of a group with its log π_old per token and its advantage.
type GroupSample struct {
	Prompt   string
	Tokens   []int
	OldLogps []float64
	Adv      float64
}

// AggWeight is the loss weight of one token of a response of length n in a group of g responses
// holding totalTokens tokens: 1/(g·n) (seq_mean), 1/totalTokens (token_mean) or
// 1/(g·MaxNewTokens) (const).
func AggWeight(agg Agg, g, n, totalTokens int) float64 {
	switch agg {
	case AggSeqMean:
		return 1 / float64(g*n)
	case AggTokenMean:
		return 1 / float64(totalTokens)
	}
	return 1 / float64(g*MaxNewTokens)
}

// ClipCoef is the clipped surrogate's derivative coefficient with asymmetric bounds
// [1−epsLow, 1+epsHigh] (식 (7.2), DAPO's clip-higher): 0 once the ratio has moved past the bound
// in the advantage's direction, ratio·A otherwise.
func ClipCoef(ratio, adv, epsLow, epsHigh float64) float64 {
	lo, hi := 1-epsLow, 1+epsHigh
	if (adv > 0 && ratio > hi) || (adv < 0 && ratio < lo) {
		return 0.0
	}
	return float64(ratio * adv)
}

// K3Coef is the derivative coefficient of the k3 KL penalty −β·(π_ref/π − log(π_ref/π) − 1)
// with respect to log π: −β·(1 − π_ref/π).
func K3Coef(beta, logp, refLogp float64) float64 {
	return float64(-beta * (1 - math.Exp(refLogp-logp)))
}

// SequenceRatio is GSPO's response-level ratio s = exp(Σ_t (log π_t − log π_old,t) / |y|).
func SequenceRatio(logps, old []float64) float64 {
	s := 0.0
	for t := range logps {
		s += logps[t] - old[t]
	}
	return math.Exp(s / float64(len(logps)))
}

// GRPOLossGrads is 식 (11.2) for one group: the logit gradient of the clipped surrogate minus the
// k3 KL penalty, each token weighted by AggWeight. With ratio = sequence (GSPO) every token uses
// the response's SequenceRatio; since ∂s/∂log π_t = s/|y| and seq_mean already weighs 1/(G|y|),
// the coefficient is the same ratio·A.
func GRPOLossGrads(lm, ref *TinyLM, group []GroupSample, cfg GRPOVariant) *Grads {
	g := len(group)
	grads := NewGrads()
	total := 0
	for _, s := range group {
		total += len(s.Tokens)
	}
	for _, s := range group {
		logps := lm.TokenLogps(s.Prompt, s.Tokens)
		refl := ref.TokenLogps(s.Prompt, s.Tokens)
		seqRatio := 0.0
		if cfg.Ratio == RatioSequence {
			seqRatio = SequenceRatio(logps, s.OldLogps)
		}
		for t := range s.Tokens {
			ratio := seqRatio
			if cfg.Ratio != RatioSequence {
				ratio = math.Exp(logps[t] - s.OldLogps[t])
			}
			coef := ClipCoef(ratio, s.Adv, cfg.EpsLow, cfg.EpsHigh)
			coef += K3Coef(cfg.Beta, logps[t], refl[t])
			w := AggWeight(cfg.Agg, g, len(s.Tokens), total)
			k, gt := lm.GradToken(s.Prompt, s.Tokens, t)
			grads.Add(k, gt, coef*w)
		}
	}
	return grads
}

// SampleGroups draws G responses per prompt, rewards them with Verify and turns the rewards
// into advantages within each group (식 (11.1)). With cfg.Variant.Dynamic (DAPO) a group whose
// rewards are all equal is dropped after sampling, its random numbers already consumed.
// onSample, if not nil, sees every sampled response in sampling order (dropped ones included).
func SampleGroups(lm *TinyLM, rng *pyrand.Rand, cfg GRPOConfig, onSample func(prompt string, tokens []int)) [][]GroupSample {
	var groups [][]GroupSample
	for _, x := range Prompts {
		ys := make([][]int, cfg.G)
		rs := make([]float64, cfg.G)
		for i := range ys {
			ys[i] = lm.Sample(x, rng)
			if onSample != nil {
				onSample(x, ys[i])
			}
		}
		for i, y := range ys {
			rs[i] = Verify(x, y)
		}
		if cfg.Variant.Dynamic && allEqual(rs) {
			continue // DAPO dynamic sampling: no signal in this group
		}
		as, err := rl.GroupAdvantages(rs, cfg.Variant.Adv)
		if err != nil {
			panic(err) // Validate rejects unknown modes and G < 2
		}
		group := make([]GroupSample, cfg.G)
		for i, y := range ys {
			group[i] = GroupSample{Prompt: x, Tokens: y, OldLogps: lm.TokenLogps(x, y), Adv: as[i]}
		}
		groups = append(groups, group)
	}
	return groups
}

func allEqual(xs []float64) bool {
	for _, x := range xs[1:] {
		if x != xs[0] {
			return false
		}
	}
	return true
}

// TrainGRPO is the course's train_grpo: every iteration samples the groups, then takes Epochs
// passes over them, one ascent step of lr/|prompts| per group.
func TrainGRPO(cfg GRPOConfig) (lm, ref *TinyLM, head []Sample) {
	rng := pyrand.New(cfg.Seed)
	lm = New()
	ref = lm.Copy()
	var tr tracer
	for range cfg.Iterations {
		groups := SampleGroups(lm, rng, cfg, tr.record)
		for range cfg.Epochs {
			for _, group := range groups {
				lm.Apply(GRPOLossGrads(lm, ref, group, cfg.Variant), cfg.LR/float64(len(Prompts)))
			}
		}
	}
	return lm, ref, tr.head
}

// TokenWeights is the weight each token of response i gets in the loss at ratio 1, by
// aggregation: A_i/(G·L_i) (seq_mean), A_i/ΣL (token_mean), A_i/(G·MaxNewTokens) (const).
func TokenWeights(advantages []float64, lengths []int, agg Agg) []float64 {
	g, total := len(lengths), 0
	for _, l := range lengths {
		total += l
	}
	out := make([]float64, len(advantages))
	for i, a := range advantages {
		switch agg {
		case AggSeqMean:
			out[i] = a / float64(g*lengths[i])
		case AggTokenMean:
			out[i] = a / float64(total)
		default:
			out[i] = a / float64(g*MaxNewTokens)
		}
	}
	return out
}
