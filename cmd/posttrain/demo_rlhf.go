package main

// `posttrain demo --rlhf`: the demo's SFT model → a reward model on multiplication preference
// pairs → GRPO and PPO with the learned reward, against the random-reward GRPO control.

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/apps/demo"
)

// demoRLHF runs `posttrain demo --rlhf` with the demo's options o (the flags of both demos) and
// the reward model's flags.
func demoRLHF(ctx context.Context, cmd *cli.Command, o demo.Options) error {
	for _, f := range []string{"reward", "grpo-seeds"} {
		if cmd.IsSet(f) {
			return usageError{fmt.Errorf("%s: --%s is not a flag of the RLHF demo (--rlhf): its GRPO runs use the learned reward and the random control, one seed", cmd.FullName(), f)}
		}
	}
	r := demo.DefaultRLHF
	r.Options = o
	r.RMSteps, r.RMBatch, r.RMLearningRate = int(cmd.Int("rm-steps")), int(cmd.Int("rm-batch")), cmd.Float("rm-learning-rate")
	r.RMTrainWrongs = int(cmd.Int("rm-train-wrongs"))
	r.ReuseRewardModel, r.Only = cmd.Bool("reuse-rm"), cmd.StringSlice("rl-stages")
	r.PPOUpdates, r.PPOPrompts, r.PPOEpochs = int(cmd.Int("ppo-updates")), int(cmd.Int("ppo-prompts")), int(cmd.Int("ppo-epochs"))
	r.PPOLearningRate, r.PPOKLCoef = cmd.Float("ppo-learning-rate"), cmd.Float("ppo-kl-coef")
	env, err := demoEnv(cmd)
	if err != nil {
		return fmt.Errorf("%s: %w", cmd.FullName(), err)
	}
	defer env.Backend.Finalize()
	rep, err := demo.RunRLHF(ctx, r, env, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", cmd.FullName(), err)
	}
	return printRLHF(cmd.Root().Writer, r, rep)
}

// printRLHF writes the reward model's ranking and the stages' table.
func printRLHF(w io.Writer, o demo.RLHFOptions, rep *demo.RLHFReport) error {
	rm := rep.RewardModel
	fmt.Fprintf(w, "reward model (%s, %s): chosen ranked above rejected on its training pairs %s, held-out pairs of the GRPO problems %s, pairs of the held-out problems %s\n",
		rm.Dir, rm.Wall.Round(time.Second), rm.Train, rm.HeldOutPairs, rm.Unseen)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "stage\tGRPO problems strict\tcorrect\theld-out strict\tcorrect\treward\twall\n")
	for i, s := range append(append([]demo.Stage(nil), rep.Stages...), rep.RL...) {
		reward := "-"
		if i >= len(rep.Stages) {
			reward = fmt.Sprintf("%.3f", s.Reward)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Train.Strict, s.Train.Correct, s.HeldOut.Strict, s.HeldOut.Correct,
			reward, s.Wall.Round(time.Second))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "accuracy: greedy answers; strict: exactly the product (mult_strict), correct: its first integer (mult_correct); ± binomial standard error; reward: mean over the last logging window (the reward model's score, or the random reward)\n")
	_, err := fmt.Fprintf(w, "total %s; curves: posttrain plot %s %s -o %s\n", rep.Wall.Round(time.Second),
		filepath.Join(o.OutputDir, demo.RLHFDir, "grpo-reward-model"), filepath.Join(o.OutputDir, demo.RLHFDir, "grpo-random"),
		filepath.Join(o.OutputDir, demo.RLHFDir, "curves.png"))
	return err
}
