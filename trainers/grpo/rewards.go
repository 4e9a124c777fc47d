package grpo

import (
	"fmt"
	"hash/fnv"
	"math"
	"sync/atomic"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/rl"
)

// Reward is one named verifier reward function with its weight (TRL reward_funcs, reward_weights).
type Reward struct {
	Name   string
	Func   data.RewardFunc
	Weight float64
}

// LookupRewards resolves reward function names from data's registry; weights nil means all 1.
func LookupRewards(names []string, weights []float64) ([]Reward, error) {
	if len(weights) > 0 && len(weights) != len(names) {
		return nil, fmt.Errorf("grpo: %d reward weights for %d reward functions", len(weights), len(names))
	}
	out := make([]Reward, len(names))
	for i, name := range names {
		f, err := data.LookupReward(name)
		if err != nil {
			return nil, fmt.Errorf("grpo: %w", err)
		}
		w := 1.0
		if len(weights) > 0 {
			w = weights[i]
		}
		out[i] = Reward{Name: name, Func: f, Weight: w}
	}
	return out, nil
}

// scoreRewards runs every reward function over the rollout's completion texts, the prompts' texts
// and the dataset columns, and sums them as TRL does (grpo_trainer.py L1018-1050):
//
//	r_i = nansum_k w_k · r_ik
//
// so a function returning NaN ("does not apply", TRL's None) for a sample adds nothing to it.
func scoreRewards(r *Rollout, rewards []Reward) error {
	n := r.Len()
	prompts := make([]string, n)
	rowsCols := make([]data.Row, n)
	for i, p := range r.Prompts {
		prompts[i] = p.Text
		rowsCols[i].Columns = p.Columns
	}
	columns := data.Columns(rowsCols)
	r.Rewards = make([]float64, n)
	r.FuncRewards = map[string][]float64{}
	for _, rw := range rewards {
		vals, err := rw.Func(prompts, r.Texts, columns)
		if err != nil {
			return fmt.Errorf("reward %s: %w", rw.Name, err)
		}
		if len(vals) != n {
			return fmt.Errorf("reward %s: returned %d rewards for %d completions", rw.Name, len(vals), n)
		}
		r.FuncRewards[rw.Name] = vals
		for i, v := range vals {
			if !math.IsNaN(v) {
				r.Rewards[i] += rw.Weight * v
			}
		}
	}
	return nil
}

// advantages fills the rollout's advantages: TRL's group-relative ones (rl.TRLAdvantages, with
// scale_rewards group|batch|none) or RLOO's leave-one-out baseline.
func advantages(r *Rollout, numGenerations int, scale rl.ScaleRewards, mode string) error {
	adv, std, err := rl.TRLAdvantages(r.Rewards, numGenerations, scale)
	if err != nil {
		return err
	}
	if mode == "rloo" {
		for start := 0; start < len(adv); start += numGenerations {
			copy(adv[start:], rl.GroupAdvantagesRLOO(r.Rewards[start:start+numGenerations]))
		}
	}
	r.Advantages, r.GroupStd = adv, std
	return nil
}

// rewardMetrics are TRL's reward metrics (grpo_trainer.py L1520-1567): reward (mean total),
// reward_std (mean of the std each advantage was scaled by), frac_reward_zero_std, and
// rewards/<name>/mean|std (NaN-aware: samples a function did not score are left out).
func rewardMetrics(r *Rollout, rewards []Reward) map[string]float64 {
	m := map[string]float64{"reward": mean(r.Rewards), "reward_std": mean(r.GroupStd)}
	zero := 0
	for _, s := range r.GroupStd {
		if math.Abs(s) <= 1e-8 {
			zero++
		}
	}
	m["frac_reward_zero_std"] = float64(zero) / float64(len(r.GroupStd))
	for _, rw := range rewards {
		var xs []float64
		for _, v := range r.FuncRewards[rw.Name] {
			if !math.IsNaN(v) {
				xs = append(xs, v)
			}
		}
		mu, sd := math.NaN(), math.NaN()
		if len(xs) > 0 {
			mu, sd = mean(xs), rl.SampleStd(xs)
		}
		m["rewards/"+rw.Name+"/mean"], m["rewards/"+rw.Name+"/std"] = mu, sd
	}
	return m
}

// randomSeed seeds the "random" reward; SetRandomRewardSeed changes it.
var randomSeed atomic.Uint64

// SetRandomRewardSeed seeds the "random" reward function (the trainer sets it to the run's seed).
func SetRandomRewardSeed(seed uint64) {
	randomSeed.Store(seed)
	randomCalls.Store(0)
}

// randomCalls makes repeated calls on the same texts draw afresh.
var randomCalls atomic.Uint64

func init() {
	data.RegisterReward("random", RewardRandom)
}

// RewardRandom is the reward function "random": 1 or 0 with probability ½ each, independent of
// the completion's content — the control of a GRPO experiment (a random reward must not teach the
// task; Shao et al. 2025, arXiv:2507.10532). Draws are a hash of the seed, the call number, the
// row and the texts, so a run is reproducible for a given seed and call sequence.
func RewardRandom(prompts, completions []string, _ map[string][]any) ([]float64, error) {
	call := randomCalls.Add(1)
	seed := randomSeed.Load()
	out := make([]float64, len(completions))
	for i, c := range completions {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d\x00%d\x00%d\x00", seed, call, i)
		if i < len(prompts) {
			h.Write([]byte(prompts[i]))
		}
		h.Write([]byte{0})
		h.Write([]byte(c))
		out[i] = float64(splitMix(h.Sum64()) >> 63)
	}
	return out, nil
}

func splitMix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
