package main

// `posttrain ppo`: PPO with a reward model and a value model (TRL v0.24's PPOTrainer/PPOConfig,
// trainers/ppo), with PPOConfig's options in kebab-case (trainers/engine/config).

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/ppo"
)

func init() {
	freshFlags["ppo"] = func() []cli.Flag { return config.Flags(config.DefaultPPO()) }
	addCommand(&cli.Command{
		Name:  "ppo",
		Usage: "PPO with a reward model: --model SFT --reward-model RM --dataset PROMPTS --output-dir DIR",
		Description: "TRL v0.24's PPOTrainer: each update samples a response (response_length tokens, temperature) for\n" +
			"per_device_train_batch_size × gradient_accumulation_steps prompts, scores it with the reward model\n" +
			"(posttrain reward's output; it must share the policy's tokenizer), folds the per-token KL to the frozen\n" +
			"starting policy into the rewards (kl_coef, kl_estimator), computes GAE advantages (gamma, lam) with a\n" +
			"value model initialised from the reward model (--value-model), and trains policy and value model\n" +
			"together for num_ppo_epochs × num_mini_batches optimizer steps on the clipped policy loss plus vf_coef ×\n" +
			"the clipped value loss. Writes metrics.jsonl (TRL's objective/*, policy/*, loss/*, val/* names), checkpoints\n" +
			"(the value model in checkpoint-N/value_model/) and the final policy (value model in value_model/) to\n" +
			"--output-dir. logging_steps, save_steps and the LR schedule count updates, as TRL's.",
		Flags:  config.Flags(config.DefaultPPO()),
		Action: configAction(config.DefaultPPO, runPPO),
	})
}

func runPPO(ctx context.Context, cmd *cli.Command, cfg *config.PPO) error {
	s, err := openTrainSession(ctx, cmd, cfg)
	if err != nil {
		return err
	}
	defer s.close()
	ctx = s.ctx
	rm, err := resolveModel(ctx, cfg.RewardModelPath)
	if err != nil {
		return fmt.Errorf("reward model: %w", err)
	}
	vm, err := resolveModel(ctx, cfg.ValueModelPath)
	if err != nil {
		return fmt.Errorf("value model: %w", err)
	}
	sum, err := ppo.Run(ctx, cfg, s.dir, ppo.RunOptions{Backend: s.b, Logger: s.logger, Progress: s.progress,
		RewardModelDir: rm, ValueModelDir: vm})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.Root().Writer, "ppo: %d updates in %s; objective/scores %.4g, objective/kl %.4g; policy and metrics.jsonl in %s\n",
		sum.Steps, sum.Elapsed.Round(1e7), sum.Last.Metrics["objective/scores"], sum.Last.Metrics["objective/kl"], cfg.OutputDir)
	return err
}
