package data

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// RewardFunc scores a batch of completions as a TRL reward function does
// (grpo_trainer.py: f(prompts, completions, **dataset_columns)): prompts[i] and completions[i]
// are texts (for conversational data, the prompt's rendering and the assistant message's
// content), columns are the dataset's extra columns, one value per completion (see Columns). It
// returns one reward per completion. NaN means "this function does not apply to this sample"
// (TRL's None): the trainer sums rewards over functions with nansum. An error aborts the step
// (e.g. a column the function needs is missing).
type RewardFunc func(prompts, completions []string, columns map[string][]any) ([]float64, error)

// A RewardMaker makes one run's instance of a reward function that keeps state between calls
// (e.g. a random draw's stream), seeded with the run's seed, so that runs never share it.
type RewardMaker func(seed uint64) RewardFunc

var (
	rewardsMu sync.RWMutex
	rewards   = map[string]RewardFunc{}
	makers    = map[string]RewardMaker{}
)

// RegisterReward makes f available under name (logged as rewards/<name>/mean). It panics on a
// duplicate name; call it from init.
func RegisterReward(name string, f RewardFunc) {
	rewardsMu.Lock()
	defer rewardsMu.Unlock()
	if _, dup := rewards[name]; dup || makers[name] != nil {
		panic("data: reward function " + name + " registered twice")
	}
	rewards[name] = f
}

// RegisterRewardMaker makes a reward function with state available under name: each run gets its
// own instance (NewReward). It panics on a duplicate name; call it from init.
func RegisterRewardMaker(name string, m RewardMaker) {
	rewardsMu.Lock()
	defer rewardsMu.Unlock()
	if _, dup := rewards[name]; dup || makers[name] != nil {
		panic("data: reward function " + name + " registered twice")
	}
	makers[name] = m
}

// NewReward returns a run's reward function registered under name: the function itself, or, for a
// reward with state, a fresh instance seeded with seed.
func NewReward(name string, seed uint64) (RewardFunc, error) {
	rewardsMu.RLock()
	m := makers[name]
	rewardsMu.RUnlock()
	if m != nil {
		return m(seed), nil
	}
	return LookupReward(name)
}

// LookupReward returns the stateless reward function registered under name (NewReward also makes
// the ones with state).
func LookupReward(name string) (RewardFunc, error) {
	rewardsMu.RLock()
	f, ok := rewards[name]
	_, maker := makers[name]
	rewardsMu.RUnlock()
	if maker {
		return nil, fmt.Errorf("reward function %q keeps state per run: make one with NewReward", name)
	}
	if !ok {
		return nil, fmt.Errorf("unknown reward function %q (registered: %s)", name, strings.Join(RewardNames(), ", "))
	}
	return f, nil
}

// RewardNames lists the registered reward functions, sorted.
func RewardNames() []string {
	rewardsMu.RLock()
	defer rewardsMu.RUnlock()
	names := make([]string, 0, len(rewards)+len(makers))
	for n := range rewards {
		names = append(names, n)
	}
	for n := range makers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
