package ppo

import (
	"errors"
	"fmt"
	"slices"

	"github.com/posttrain/posttrain/trainers/engine/rollout"
)

// evaluator is PPO's evaluation on eval_dataset: TRL's generate_completions (the table it prints
// every num_total_batches / num_sample_generations updates): every eval prompt's response sampled
// at temperature 0.01 + 1e-7 (near-greedy), truncated at the stop token and scored by the reward
// model. posttrain runs it on the driver's eval cadence and logs the mean score and the responses'
// EOS count as eval_objective/scores and eval_val/num_eos_tokens.
type evaluator struct {
	prompts []*Prompt
}

// evalTemperature is generate_completions' sampling temperature (before TRL's + 1e-7).
const evalTemperature = 0.01

func (t *Trainer) newEvaluator(prompts []*Prompt) (*evaluator, error) {
	if len(prompts) == 0 {
		return nil, errors.New("ppo: the configuration evaluates but eval_dataset has no prompts")
	}
	return &evaluator{prompts: prompts}, nil
}

func (e *evaluator) close() {}

// Evaluates implements loop.Evaluator.
func (s source) Evaluates() bool { return s.eval != nil }

// Evaluate implements loop.Evaluator: the current policy's responses to the eval prompts (seeded
// by the run's seed and the update, so a resumed run evaluates as a straight one), scored.
func (s source) Evaluate() (map[string]float64, error) {
	t := s.Trainer
	var scores []float64
	eos := 0
	err := rollout.Chunks(len(t.eval.prompts), t.cfg.PerDeviceEvalBatchSize, func(lo, hi int) error {
		r, err := t.newRollout(t.eval.prompts[lo:hi], evalTemperature, t.rolloutSeed(t.round)^0x6576616c+uint64(lo))
		if err != nil {
			return fmt.Errorf("ppo: evaluate after update %d: %w", t.round, err)
		}
		sc, err := t.rewardScores(r)
		if err != nil {
			return err
		}
		scores = append(scores, sc...)
		for _, p := range r.Post {
			if slices.Contains(p[:r.Width], int32(t.eos)) {
				eos++
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return map[string]float64{"eval_objective/scores": meanOf(scores), "eval_val/num_eos_tokens": float64(eos)}, nil
}
