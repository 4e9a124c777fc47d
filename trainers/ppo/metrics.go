package ppo

import (
	"time"

	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/rl"
)

// updateStats are TRL's per-micro-batch statistics of an update, in tensors of shape
// (num_ppo_epochs, num_mini_batches, gradient_accumulation_steps) that start at zero: with
// num_mini_batches > 1 a mini-batch fills only gradient_accumulation_steps / num_mini_batches of
// its entries and TRL's means include the zeros left (reproduced here, so the logged values are
// TRL's).
type updateStats struct {
	n    int
	sums map[string][]float64 // metric → entries (row-major over the stats shape)
	ga   int
	mbs  int
}

// statNames maps the loss graph's metrics to TRL's logged names.
var statNames = map[string]string{
	"policy/approxkl": "policy/approxkl_avg", "policy/clipfrac": "policy/clipfrac_avg", "loss/policy": "loss/policy_avg",
	"loss/value": "loss/value_avg", "val/clipfrac": "val/clipfrac_avg", "policy/entropy": "policy/entropy_avg",
	"val/ratio": "val/ratio",
}

func newUpdateStats(epochs, miniBatches, ga int) *updateStats {
	s := &updateStats{n: epochs * miniBatches * ga, sums: map[string][]float64{}, ga: ga, mbs: miniBatches}
	for k := range statNames {
		s.sums[k] = make([]float64, s.n)
	}
	return s
}

func (s *updateStats) add(epoch, mb, k int, ms map[string]float64) {
	i := (epoch*s.mbs+mb)*s.ga + k
	for name := range statNames {
		s.sums[name][i] = ms[name]
	}
}

func meanOf(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// varOf is torch's Tensor.var(): the unbiased variance (NaN for one entry, as torch's).
func varOf(xs []float64) float64 {
	m, s := meanOf(xs), 0.0
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	return s / float64(len(xs)-1)
}

// updateMetrics are TRL's logged metrics of the update just made (ppo_trainer.py, after the PPO
// epochs): the rollout's objective/* from the host-side tables, the micro-batch statistics'
// means, lr (the update's) and episode.
func (t *Trainer) updateMetrics(u loop.Update) map[string]float64 {
	r := t.rollout
	n := float64(r.Len())
	var kl, ent, nsr, scores float64
	eos := 0
	for i := range r.Len() {
		for j := range r.Width {
			kl += r.KL[i][j] / n
			ent += -r.LogProbs[i][j] / n // TRL: (−logprobs).sum(1).mean(), INVALID_LOGPROB included
			nsr += r.NonScore[i][j] / n
			if int(r.Responses[i][j]) == t.eos {
				eos++
			}
		}
		scores += r.Scores[i] / n
	}
	ms := map[string]float64{
		"objective/kl": kl, "objective/entropy": ent, "objective/non_score_reward": nsr,
		"objective/rlhf_reward": nsr + scores, "objective/scores": scores,
		"val/num_eos_tokens": float64(eos), "lr": u.LR, "episode": float64(t.episode),
		"eps": float64(int(float64(t.episode) / time.Since(t.began).Seconds())),
	}
	for name, logged := range statNames {
		ms[logged] = meanOf(t.stats.sums[name])
	}
	// The sampler's log-probs against the rollout's forward pass on the same tokens, before the
	// update (posttrain's addition; TRL's PPO samples with the policy's own generate and logs none).
	ms[rl.SamplingDiffMean], ms[rl.SamplingDiffMax], ms[rl.SamplingOutside] = rl.SamplingGap(r.SampledLogp, r.LogProbs,
		func(i, j int) bool { return r.LogProbs[i][j] != InvalidLogProb })
	ms["val/ratio_var"] = varOf(t.stats.sums["val/ratio"])
	return ms
}
