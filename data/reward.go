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

var (
	rewardsMu sync.RWMutex
	rewards   = map[string]RewardFunc{}
)

// RegisterReward makes f available under name (logged as rewards/<name>/mean). It panics on a
// duplicate name; call it from init.
func RegisterReward(name string, f RewardFunc) {
	rewardsMu.Lock()
	defer rewardsMu.Unlock()
	if _, dup := rewards[name]; dup {
		panic("data: reward function " + name + " registered twice")
	}
	rewards[name] = f
}

// LookupReward returns the reward function registered under name.
func LookupReward(name string) (RewardFunc, error) {
	rewardsMu.RLock()
	f, ok := rewards[name]
	rewardsMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unknown reward function %q (registered: %s)", name, strings.Join(RewardNames(), ", "))
	}
	return f, nil
}

// RewardNames lists the registered reward functions, sorted.
func RewardNames() []string {
	rewardsMu.RLock()
	defer rewardsMu.RUnlock()
	names := make([]string, 0, len(rewards))
	for n := range rewards {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
