package main

// `posttrain grpo`: Group Relative Policy Optimization with verifier rewards on a checkpoint of any decoder family (decoder.FamilyNames),
// with TRL v0.24's GRPOConfig options in kebab-case (trainers/grpo/config.go).

import (
	"fmt"

	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/grpo"
)

func init() {
	addCommand(trainCommand("grpo", "GRPO with verifier rewards: --model M --dataset FILE|mult --reward-funcs NAME|FILE.py:FUNC ... --output-dir DIR",
		"Samples num_generations completions per prompt with the KV cache, scores them with the named\n"+
			"reward functions (posttrain data rewards lists the built-in ones; \"random\" is a control; FILE.py:FUNC\n"+
			"or module.func is a Python function written for TRL's GRPOTrainer, called in a worker process;\n"+
			"--reward-url URL a reward server; docs/grpo.md, \"Your own reward functions\"), and updates the\n"+
			"policy with the clipped GRPO loss (TRL v0.24 semantics). --dataset mult generates the course's\n"+
			"multiplication prompts. --reward-model DIR (repeatable) adds a reward model (posttrain reward's output)\n"+
			"scoring prompt+completion through its own chat template, logged as rewards/<dir name>/mean; --reward-weights\n"+
			"lists the reward models' weights first. Writes metrics.jsonl, completions.jsonl and the final model to --output-dir.\n"+
			"With --eval-dataset and --eval-strategy steps|epoch (or --eval-on-start) it also evaluates: the eval\n"+
			"prompts × num_generations are sampled and rewarded with the current weights, eval_* lines go to\n"+
			"metrics.jsonl and the completions to eval_completions.jsonl (docs/grpo.md, Evaluation).",
		func(c config.Config) error {
			cfg := c.(*grpo.Config)
			_, funcWeights, _ := grpo.SplitRewardWeights(cfg)
			_, err := grpo.LookupRewards(cfg.RewardFuncs, funcWeights, uint64(cfg.Seed))
			return err
		},
		func(c config.Config, sum *loop.Result) string {
			return fmt.Sprintf("grpo: %d steps in %s; reward %.4g; model and metrics.jsonl in %s",
				sum.Steps, sum.Elapsed.Round(1e7), sum.Last.Metrics["reward"], c.Common().OutputDir)
		}))
}
