package rl

import (
	"fmt"
	"math"
)

// AdvEps is the course's (and TRL's) ε in A = (r − mean) / (std + ε).
const AdvEps = 1e-4

// AdvMode names the course's group_advantages modes (phases 11-12).
type AdvMode string

// The course's advantage modes.
const (
	AdvStd  AdvMode = "std"  // GRPO, 식 (11.1)
	AdvMean AdvMode = "mean" // Dr. GRPO: no division by the std
	AdvRLOO AdvMode = "rloo" // RLOO, 식 (12.1)
)

// GroupAdvantages is the course's group_advantages(rewards, mode): the G rewards of one prompt's
// responses compared with each other. It returns an error for an unknown mode, or for rloo with
// fewer than 2 rewards.
func GroupAdvantages(rewards []float64, mode AdvMode) ([]float64, error) {
	switch mode {
	case AdvStd:
		return GroupAdvantagesStd(rewards, AdvEps), nil
	case AdvMean:
		return GroupAdvantagesMean(rewards), nil
	case AdvRLOO:
		if len(rewards) < 2 {
			return nil, fmt.Errorf("rloo advantages need at least 2 rewards, got %d", len(rewards))
		}
		return GroupAdvantagesRLOO(rewards), nil
	}
	return nil, fmt.Errorf("unknown advantage mode %q (want std, mean or rloo)", mode)
}

// GroupAdvantagesStd is 식 (11.1), GRPO's advantage within one group:
//
//	A_i = (r_i − mean(r)) / (std(r) + eps),   std = sqrt(Σ_j (r_j − mean)² / G)
//
// with the population std (divide by G), as the course; TRL divides by G−1 (TRLAdvantages).
// Equal rewards give A = 0: the group carries no signal.
func GroupAdvantagesStd(rewards []float64, eps float64) []float64 {
	g := float64(len(rewards))
	mean := leftSum(rewards) / g
	ss := 0.0
	for _, r := range rewards {
		d := r - mean
		ss += d * d
	}
	std := math.Sqrt(ss / g) // CPython's (…) ** 0.5: pow is correctly rounded, as is Sqrt
	out := make([]float64, len(rewards))
	for i, r := range rewards {
		out[i] = (r - mean) / (std + eps)
	}
	return out
}

// GroupAdvantagesMean is Dr. GRPO's advantage: A_i = r_i − mean(r), without the division by the
// std that up-weights groups whose rewards barely differ.
func GroupAdvantagesMean(rewards []float64) []float64 {
	mean := leftSum(rewards) / float64(len(rewards))
	out := make([]float64, len(rewards))
	for i, r := range rewards {
		out[i] = r - mean
	}
	return out
}

// GroupAdvantagesRLOO is 식 (12.1), the leave-one-out baseline of RLOO:
//
//	A_i = r_i − (Σ_j r_j − r_i) / (G − 1)
//
// so a response is never compared with itself. G must be at least 2.
func GroupAdvantagesRLOO(rewards []float64) []float64 {
	g := float64(len(rewards))
	total := leftSum(rewards)
	out := make([]float64, len(rewards))
	for i, r := range rewards {
		out[i] = r - (total-r)/(g-1)
	}
	return out
}

// ScaleRewards is TRL's GRPOConfig.scale_rewards.
type ScaleRewards string

// TRL v0.24's scale_rewards values.
const (
	ScaleGroup ScaleRewards = "group" // divide by the group's std (default)
	ScaleBatch ScaleRewards = "batch" // divide by the std of the whole batch
	ScaleNone  ScaleRewards = "none"  // do not divide (Dr. GRPO)
)

// TRLAdvantages is TRL v0.24's GRPO advantage (grpo_trainer.py, _generate_and_score_completions).
// rewards holds consecutive groups of numGenerations responses (one prompt each):
//
//	A_i = r_i − mean_group(r)                 then, unless scale = none,
//	A_i = A_i / (std + 1e-4)
//
// where std is the *sample* std (divide by n−1, torch.std) of the group (group, none) or of the
// whole batch (batch). It differs from the course's GroupAdvantagesStd only in n−1. It also
// returns std per response (the group's std for none), what TRL logs as reward_std and
// frac_reward_zero_std.
func TRLAdvantages(rewards []float64, numGenerations int, scale ScaleRewards) (adv, std []float64, err error) {
	n := len(rewards)
	if numGenerations < 2 || n == 0 || n%numGenerations != 0 {
		return nil, nil, fmt.Errorf("trl advantages: %d rewards are not groups of num_generations=%d (>= 2)",
			n, numGenerations)
	}
	if scale != ScaleGroup && scale != ScaleBatch && scale != ScaleNone {
		return nil, nil, fmt.Errorf("trl advantages: invalid scale_rewards %q (want group, batch or none)", scale)
	}
	adv = make([]float64, n)
	std = make([]float64, n)
	batchStd := SampleStd(rewards)
	for start := 0; start < n; start += numGenerations {
		group := rewards[start : start+numGenerations]
		mean := leftSum(group) / float64(numGenerations)
		s := SampleStd(group)
		if scale == ScaleBatch {
			s = batchStd
		}
		for i, r := range group {
			adv[start+i] = r - mean
			std[start+i] = s
			if scale != ScaleNone {
				adv[start+i] /= s + AdvEps
			}
		}
	}
	return adv, std, nil
}

// SampleStd is torch.std's default: sqrt(Σ (x − mean)² / (n − 1)); 0 for fewer than 2 values
// (TRL's guard for a single generation).
func SampleStd(xs []float64) float64 {
	n := len(xs)
	if n < 2 {
		return 0
	}
	mean := leftSum(xs) / float64(n)
	ss := 0.0
	for _, x := range xs {
		d := x - mean
		ss += d * d
	}
	return math.Sqrt(ss / float64(n-1))
}

// leftSum adds left to right, as CPython 3.11's sum() does.
func leftSum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}
