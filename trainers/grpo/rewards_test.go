package grpo

import (
	"math"
	"testing"

	"github.com/posttrain/posttrain/trainers/rl"
)

func fixed(name string, w float64, vals ...float64) Reward {
	return Reward{Name: name, Weight: w, Func: func(_, _ []string, _ map[string][]any) ([]float64, error) {
		return vals, nil
	}}
}

// Rewards are summed over functions with their weights, NaN ("does not apply") counting as
// nothing (TRL's nansum); the per-function metrics leave NaN samples out.
func TestScoreRewards_WeightedNaNSum(t *testing.T) {
	nan := math.NaN()
	r := &Rollout{Prompts: make([]*Prompt, 4), Texts: make([]string, 4), Completions: make([][]int32, 4)}
	for i := range r.Prompts {
		r.Prompts[i] = &Prompt{}
	}
	rewards := []Reward{fixed("a", 1, 1, 0, nan, 1), fixed("b", 0.5, nan, 2, nan, 2)}
	if err := scoreRewards(r, rewards); err != nil {
		t.Fatal(err)
	}
	want := []float64{1, 1, 0, 2}
	for i, w := range want {
		if r.Rewards[i] != w {
			t.Errorf("reward[%d] = %v, want %v", i, r.Rewards[i], w)
		}
	}
	if err := advantages(r, 2, rl.ScaleGroup, "grpo"); err != nil {
		t.Fatal(err)
	}
	m := rewardMetrics(r, rewards)
	if got := m["rewards/a/mean"]; math.Abs(got-2.0/3) > 1e-12 {
		t.Errorf("rewards/a/mean = %v, want 2/3 (NaN left out)", got)
	}
	if got := m["rewards/b/mean"]; got != 2 {
		t.Errorf("rewards/b/mean = %v, want 2", got)
	}
	if got := m["frac_reward_zero_std"]; got != 0.5 {
		t.Errorf("frac_reward_zero_std = %v, want 0.5 (the first group ties)", got)
	}
	if bad := []Reward{fixed("short", 1, 1)}; scoreRewards(r, bad) == nil {
		t.Error("a reward function returning the wrong count must be an error")
	}
}

// --advantage rloo replaces the group mean by the leave-one-out baseline (식 (12.1)), unscaled.
func TestAdvantages_RLOO(t *testing.T) {
	r := &Rollout{Rewards: []float64{1, 0, 0, 1, 1, 1}}
	if err := advantages(r, 3, rl.ScaleGroup, "rloo"); err != nil {
		t.Fatal(err)
	}
	want := []float64{1, -0.5, -0.5, 0, 0, 0}
	for i, w := range want {
		if math.Abs(r.Advantages[i]-w) > 1e-15 {
			t.Errorf("advantage[%d] = %v, want %v", i, r.Advantages[i], w)
		}
	}
}

// The random control reward is 0/1, about half ones, and reproducible for a seed.
func TestRewardRandom_Seeded(t *testing.T) {
	comps := make([]string, 1000)
	SetRandomRewardSeed(3)
	a, _ := RewardRandom(nil, comps, nil)
	SetRandomRewardSeed(3)
	b, _ := RewardRandom(nil, comps, nil)
	ones := 0.0
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("same seed, different rewards")
		}
		ones += a[i]
	}
	if ones < 430 || ones > 570 {
		t.Errorf("%v ones in 1000 draws, want about 500", ones)
	}
}
