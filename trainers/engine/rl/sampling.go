package rl

import "math"

// The band an importance ratio exp(Δ), Δ = log π_train(y) − log π_sample(y), is expected to stay
// in when the rollout engine and the trainer compute the same distribution: TRL's users measure the
// fraction of tokens outside [0.9, 1.1] (trl#4772: 7.5 % in bf16 with vLLM sampling).
const (
	RatioBandLow  = 0.9
	RatioBandHigh = 1.1
)

// Metric names of the sampling/training gap, logged by GRPO (in the loss graph) and PPO (from the
// rollout): TRL's sampling_logp_difference mean and max of |Δ|, and the fraction of tokens whose
// ratio falls outside [RatioBandLow, RatioBandHigh].
const (
	SamplingDiffMean = "sampling/sampling_logp_difference/mean"
	SamplingDiffMax  = "sampling/sampling_logp_difference/max"
	SamplingOutside  = "sampling/ratio_outside_0.9_1.1"
)

// OutsideBand reports whether a token's log-ratio Δ puts exp(Δ) outside the band.
func OutsideBand(delta float64) bool {
	return delta < math.Log(RatioBandLow) || delta > math.Log(RatioBandHigh)
}

// SamplingGap is the gap between the sampler's per-token log-probs and the trainer's on the same
// tokens, over the tokens where valid(i, j): mean and max of |Δ| and the fraction outside the band
// (all 0 with no valid token).
func SamplingGap(sampled, trained [][]float64, valid func(i, j int) bool) (mean, maxAbs, outside float64) {
	n := 0
	for i := range trained {
		for j := range trained[i] {
			if j >= len(sampled[i]) || !valid(i, j) {
				continue
			}
			d := trained[i][j] - sampled[i][j]
			mean += math.Abs(d)
			maxAbs = max(maxAbs, math.Abs(d))
			if OutsideBand(d) {
				outside++
			}
			n++
		}
	}
	if n == 0 {
		return 0, 0, 0
	}
	return mean / float64(n), maxAbs, outside / float64(n)
}
