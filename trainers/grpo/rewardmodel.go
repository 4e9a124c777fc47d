package grpo

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// SplitRewardWeights returns the weights of the run's reward models and of its reward functions
// (nil: all 1): reward_weights lists the models first, as TRL's grpo.py puts
// reward_model_name_or_path before reward_funcs.
func SplitRewardWeights(cfg *Config) (models, funcs, urls []float64) {
	w := cfg.RewardWeights
	if len(w) == 0 {
		return nil, nil, nil
	}
	n := min(len(cfg.RewardModels), len(w))
	f := min(n+len(cfg.RewardFuncs), len(w))
	if len(cfg.RewardURLs) == 0 {
		f = len(w)
	}
	return w[:n], w[n:f], w[f:]
}

// RewardModelName is the name a reward model's rewards are logged under (rewards/<name>/mean): its
// directory's last element, as TRL names it (config._name_or_path.split("/")[-1]).
func RewardModelName(dir string) string { return filepath.Base(filepath.Clean(dir)) }

// LoadRewardModels loads each reward model checkpoint (dirs: local directories) as a reward of
// the run with its weight (nil: 1), scoring batch rows per forward pass (trainable.LoadScorer).
func LoadRewardModels(backend backends.Backend, dirs []string, weights []float64, bf16 bool, batch int) ([]Reward, error) {
	var out []Reward
	for i, dir := range dirs {
		s, err := trainable.LoadScorer(backend, dir, bf16, batch)
		if err != nil {
			return nil, fmt.Errorf("grpo: %w", err)
		}
		w := 1.0
		if len(weights) > 0 {
			w = weights[i]
		}
		out = append(out, Reward{Name: RewardModelName(dir), Weight: w, Scorer: s})
	}
	return out, nil
}

// checkRewardNames refuses two rewards of one name: their rewards/<name>/* metrics and
// completions.jsonl entries would be one.
func checkRewardNames(rewards []Reward) error {
	var seen []string
	for _, r := range rewards {
		if slices.Contains(seen, r.Name) {
			return fmt.Errorf("grpo: two rewards are named %q (a reward model is named after its directory): their metrics would mix; rename one directory", r.Name)
		}
		seen = append(seen, r.Name)
	}
	return nil
}

// scoreWithModel scores each completion of the rollout with a reward model as TRL's
// _calculate_rewards does: prompt and completion encoded with the reward model's own text side
// (encode.RewardInputIDs: its chat template for conversational prompts), right-padded, batched,
// the score head's output at the last non-padding token.
func scoreWithModel(s *trainable.Scorer, r *Scored) ([]float64, error) {
	rows := make([][]int32, r.Len())
	for i, p := range r.Prompts {
		var err error
		if rows[i], err = s.Model.Text.RewardInputIDs(p.Source, r.Texts[i]); err != nil {
			return nil, fmt.Errorf("completion %d: %w", i+1, err)
		}
	}
	return s.Score(rows)
}
