package main

// `posttrain grpo`: Group Relative Policy Optimization with verifier rewards on a checkpoint of any decoder family (decoder.FamilyNames),
// with TRL v0.24's GRPOConfig options in kebab-case (trainers/engine/config).

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/grpo"
)

func init() {
	freshFlags["grpo"] = func() []cli.Flag { return config.Flags(config.DefaultGRPO()) }
	addCommand(&cli.Command{
		Name:  "grpo",
		Usage: "GRPO with verifier rewards: --model M --dataset FILE|mult --reward NAME[,NAME...] --output-dir DIR",
		Description: "Samples num_generations completions per prompt with the KV cache, scores them with the named\n" +
			"reward functions (posttrain data rewards lists them; \"random\" is a control), and updates the\n" +
			"policy with the clipped GRPO loss (TRL v0.24 semantics). --dataset mult generates the course's\n" +
			"multiplication prompts. --reward-model DIR (repeatable) adds a reward model (posttrain reward's output)\n" +
			"scoring prompt+completion through its own chat template, logged as rewards/<dir name>/mean; --reward-weights\n" +
			"lists the reward models' weights first. Writes metrics.jsonl, completions.jsonl and the final model to --output-dir.\n" +
			"With --eval-dataset and --eval-strategy steps|epoch (or --eval-on-start) it also evaluates: the eval\n" +
			"prompts × num_generations are sampled and rewarded with the current weights, eval_* lines go to\n" +
			"metrics.jsonl and the completions to eval_completions.jsonl (docs/grpo.md, Evaluation).",
		Flags:  config.Flags(config.DefaultGRPO()),
		Action: configAction(config.DefaultGRPO, runGRPO),
	})
}

func runGRPO(ctx context.Context, cmd *cli.Command, cfg *config.GRPO) error {
	_, funcWeights := grpo.SplitRewardWeights(cfg)
	if _, err := grpo.LookupRewards(cfg.RewardFuncs, funcWeights, uint64(cfg.Seed)); err != nil {
		return usageError{err}
	}
	s, err := openTrainSession(ctx, cmd, cfg)
	if err != nil {
		return err
	}
	defer s.close()
	ctx = s.ctx
	var rms []string
	for _, rm := range cfg.RewardModels {
		d, err := resolveModel(ctx, rm)
		if err != nil {
			return fmt.Errorf("reward model: %w", err)
		}
		rms = append(rms, d)
	}
	sum, err := grpo.Run(ctx, cfg, s.dir, grpo.RunOptions{Backend: s.b, Logger: s.logger, Progress: s.progress, RewardModelDirs: rms})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.Root().Writer, "grpo: %d steps in %s; reward %.4g; model and metrics.jsonl in %s\n",
		sum.Steps, sum.Elapsed.Round(1e7), sum.Last.Metrics["reward"], cfg.OutputDir)
	return err
}
