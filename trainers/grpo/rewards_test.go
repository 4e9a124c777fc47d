package grpo

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/extreward"
	"github.com/posttrain/posttrain/trainers/engine/rl"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
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
	r := &Scored{Rollout: rollout.Rollout{Prompts: make([]*Prompt, 4), Completions: make([][]int32, 4)}, Texts: make([]string, 4)}
	for i := range r.Prompts {
		r.Prompts[i] = &Prompt{}
	}
	rewards := []Reward{fixed("a", 1, 1, 0, nan, 1), fixed("b", 0.5, nan, 2, nan, 2)}
	if err := scoreRewards(r, rewards, extreward.State{}); err != nil {
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
	if bad := []Reward{fixed("short", 1, 1)}; scoreRewards(r, bad, extreward.State{}) == nil {
		t.Error("a reward function returning the wrong count must be an error")
	}
}

// --advantage rloo replaces the group mean by the leave-one-out baseline (식 (12.1)), unscaled.
func TestAdvantages_RLOO(t *testing.T) {
	r := &Scored{Rewards: []float64{1, 0, 0, 1, 1, 1}}
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
	a, _ := (&RandomReward{Seed: 3}).Score(nil, comps, nil)
	b, _ := (&RandomReward{Seed: 3}).Score(nil, comps, nil)
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

// randomReward is a run's "random" reward as LookupRewards makes it.
func randomReward() Reward {
	r := &RandomReward{}
	return Reward{Name: RandomRewardName, Weight: 1, Func: r.Score, Random: r}
}

// Each run has its own random stream: two runs' rewards do not share a call count (they used to,
// through package-level counters), and a list naming "random" twice shares one stream, as before.
func TestLookupRewards_RandomStreamPerRun(t *testing.T) {
	a, err := LookupRewards([]string{RandomRewardName, RandomRewardName}, nil, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LookupRewards([]string{RandomRewardName}, nil, 7)
	if err != nil {
		t.Fatal(err)
	}
	if a[0].Random == nil || a[0].Random != a[1].Random || a[0].Random == b[0].Random {
		t.Fatalf("streams: %p %p within a run, %p in another", a[0].Random, a[1].Random, b[0].Random)
	}
	comps := make([]string, 64)
	x, _ := a[0].Func(nil, comps, nil)
	y, _ := b[0].Func(nil, comps, nil) // the other run's first call draws as this run's first call did
	if !slices.Equal(x, y) || a[0].Random.Calls != 1 || b[0].Random.Calls != 1 {
		t.Errorf("runs share state: %v vs %v, calls %d and %d", x, y, a[0].Random.Calls, b[0].Random.Calls)
	}
	if f, err := data.NewReward(RandomRewardName, 7); err != nil || f == nil {
		t.Errorf("data.NewReward(random) = %v", err)
	}
	if _, err := data.LookupReward(RandomRewardName); err == nil {
		t.Error("data.LookupReward hands out a reward with state")
	}
}

// regex: and len: rewards log as regex, regex_2, len, …; a bare FILE.py and a bad pattern are
// refused by name.
func TestLookupRewards_PatternNames(t *testing.T) {
	rs, err := LookupRewards([]string{`regex:\d+`, "len:10", `regex:^a`, "think_format_reward"}, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
	}
	if want := []string{"regex", "len", "regex_2", "think_format_reward"}; !slices.Equal(names, want) {
		t.Errorf("names %v, want %v", names, want)
	}
	for bad, want := range map[string]string{"rewards.py": "name the function too, rewards.py:FUNC", "regex:(": "missing closing )"} {
		if _, err := LookupRewards([]string{bad}, nil, 1); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// The Go accuracy_reward is TRL's name for TRL's function; the samples it does not decide
// (equations of two symbols here) are left out of its mean, and their fraction is logged
// as rewards/accuracy_reward/undecided.
func TestScoreRewards_AccuracyRewardUndecided(t *testing.T) {
	rewards, err := LookupRewards([]string{"accuracy_reward"}, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rewards[0].External == nil || rewards[0].Name != "accuracy_reward" {
		t.Fatalf("accuracy_reward is %+v", rewards[0])
	}
	sols := []string{"42", "42", "$x = 5$", "\\frac{1}{3}"}
	texts := []string{"\\boxed{42}", "\\boxed{41}", "\\boxed{y = 5}", "so \\boxed{0.333333}"}
	r := &Scored{Rollout: rollout.Rollout{Completions: make([][]int32, 4)}, Texts: texts}
	for _, s := range sols {
		r.Prompts = append(r.Prompts, &Prompt{Source: data.Text{String: "Q"}, Columns: map[string]any{"solution": s}})
	}
	if err := scoreRewards(r, rewards, extreward.State{}); err != nil {
		t.Fatal(err)
	}
	got := r.FuncRewards["accuracy_reward"]
	if got[0] != 1 || got[1] != 0 || !math.IsNaN(got[2]) || got[3] != 1 {
		t.Errorf("accuracy_reward = %v, want [1 0 NaN 1]", got)
	}
	if err := advantages(r, 2, rl.ScaleGroup, "grpo"); err != nil {
		t.Fatal(err)
	}
	m := rewardMetrics(r, rewards)
	if m["rewards/accuracy_reward/undecided"] != 0.25 || m["rewards/accuracy_reward/mean"] != 2.0/3 {
		t.Errorf("undecided %v, mean %v; want 0.25, 2/3", m["rewards/accuracy_reward/undecided"], m["rewards/accuracy_reward/mean"])
	}
	if _, ok := rewardMetrics(r, []Reward{fixed("a", 1, 1, 0, math.NaN(), 1)})["rewards/a/undecided"]; ok {
		t.Error("a function whose NaN means 'not scored' logs no undecided fraction")
	}
}
