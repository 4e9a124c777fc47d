package main

// `posttrain ppo`: PPO with a reward model and a value model (TRL v0.24's PPOTrainer/PPOConfig,
// trainers/ppo), with PPOConfig's options in kebab-case (trainers/ppo/config.go).

import (
	"fmt"

	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
)

func init() {
	addCommand(trainCommand("ppo", "PPO with a reward model: --model SFT --reward-model RM --dataset PROMPTS --output-dir DIR",
		"TRL v0.24's PPOTrainer: each update samples a response (response_length tokens, temperature) for\n"+
			"per_device_train_batch_size × gradient_accumulation_steps prompts, scores it with the reward model\n"+
			"(posttrain reward's output; it must share the policy's tokenizer), folds the per-token KL to the frozen\n"+
			"starting policy into the rewards (kl_coef, kl_estimator), computes GAE advantages (gamma, lam) with a\n"+
			"value model initialised from the reward model (--value-model), and trains policy and value model\n"+
			"together for num_ppo_epochs × num_mini_batches optimizer steps on the clipped policy loss plus vf_coef ×\n"+
			"the clipped value loss. Writes metrics.jsonl (TRL's objective/*, policy/*, loss/*, val/* names), checkpoints\n"+
			"(the value model in checkpoint-N/value_model/) and the final policy (value model in value_model/) to\n"+
			"--output-dir. logging_steps, save_steps and the LR schedule count updates, as TRL's.",
		nil,
		func(c config.Config, sum *loop.Result) string {
			return fmt.Sprintf("ppo: %d updates in %s; objective/scores %.4g, objective/kl %.4g; policy and metrics.jsonl in %s",
				sum.Steps, sum.Elapsed.Round(1e7), sum.Last.Metrics["objective/scores"], sum.Last.Metrics["objective/kl"], c.Common().OutputDir)
		}))
}
