package main

// `posttrain demo`: tokenizer → random Qwen2 → SFT → GRPO with the verifier reward, and a
// random-reward GRPO control, on the multiplication task; CPU-sized, nothing downloaded.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/apps/demo"
)

func init() {
	freshFlags["demo"] = demoFlags // the RLHF demo asks whether --reward and --grpo-seeds were given
	addCommand(&cli.Command{
		Name:  "demo",
		Usage: "learn multiplication on a CPU in minutes: BPE tokenizer → small Qwen2 → SFT → GRPO (verifier) vs GRPO (random reward)",
		Description: "Writes everything under --output-dir: tokenizer/, base/ (random init), sft/, grpo/ and grpo-random/\n" +
			"(with --model, a pretrained instruct model, only grpo/ and grpo-random/, both from that model)\n" +
			"(HF checkpoints with metrics.jsonl; `posttrain plot DIR/grpo DIR/grpo-random -o curves.png` overlays\n" +
			"the two runs' curves). Prints greedy accuracy, strict (exactly the product) and correct (its first\n" +
			"integer), on the GRPO and the held-out problems after each stage, ± the binomial standard error.\n" +
			"--rlhf: from the same SFT model, a reward model on multiplication preference pairs of the GRPO\n" +
			"problems (rlhf/reward-model; its ranking of held-out pairs is printed), then GRPO with the learned\n" +
			"reward (rlhf/grpo-reward-model) and the random-reward control (rlhf/grpo-random).\n" +
			"--tools: products of two 4-digit numbers; a tokenizer and model under a Qwen2.5 chat template that\n" +
			"lists the tools by name, SFT on conversations half of which call the built-in calculator, then GRPO\n" +
			"with the calculator, without it and with a random reward (grpo-tools-seedN, grpo-no-tools-seedN,\n" +
			"grpo-tools-random-seedN under --output-dir, default runs/demo-tools), each evaluated on held-out\n" +
			"problems before its first step and after its last.",
		Flags: demoFlags(),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
			}
			o := demo.Default
			o.OutputDir, o.Seed, o.HeldOut = cmd.String("output-dir"), int(cmd.Int("seed")), int(cmd.Int("held-out"))
			o.SFTSteps, o.GRPOSteps, o.GRPOSeeds = int(cmd.Int("sft-steps")), int(cmd.Int("grpo-steps")), int(cmd.Int("grpo-seeds"))
			o.GRPOLearningRate, o.SFTLearningRate, o.SFTBatch = cmd.Float("grpo-learning-rate"), cmd.Float("sft-learning-rate"), int(cmd.Int("sft-batch"))
			o.Shape.Hidden, o.Shape.Layers = int(cmd.Int("hidden-size")), int(cmd.Int("layers"))
			o.MaxFactor, o.Shape.Intermediate = int(cmd.Int("max-factor")), int(cmd.Int("intermediate-size"))
			o.Temperature, o.Beta, o.ReuseSFT = cmd.Float("temperature"), cmd.Float("beta"), cmd.Bool("reuse-sft")
			o.NumGenerations, o.GRPOPrompts = int(cmd.Int("num-generations")), int(cmd.Int("grpo-prompts"))
			o.SFTFormat, o.Reward = cmd.String("sft-format"), cmd.String("reward")
			o.MaxCompletionLength, o.Prompt = int(cmd.Int("max-completion-length")), cmd.String("prompt")
			if cmd.IsSet("prompt") {
				if cmd.Bool("rlhf") {
					return usageError{fmt.Errorf("%s: --prompt is for the GRPO demo: the RLHF demo's reward model is trained on the course's question (drop --rlhf)", cmd.FullName())}
				}
				if err := demo.CheckTemplate(o.Prompt); err != nil {
					return usageError{fmt.Errorf("%s: --prompt: %w", cmd.FullName(), err)}
				}
			}
			if cmd.IsSet("model") {
				if cmd.Bool("rlhf") {
					return usageError{fmt.Errorf("%s: --model is for the GRPO demo: the RLHF demo trains its own model (drop --rlhf)", cmd.FullName())}
				}
				for _, f := range []string{"sft-steps", "sft-learning-rate", "sft-batch", "sft-format", "reuse-sft", "hidden-size", "layers", "intermediate-size"} {
					if cmd.IsSet(f) {
						return usageError{fmt.Errorf("%s: --%s shapes the demo's own model: with --model there is no tokenizer, init or SFT stage", cmd.FullName(), f)}
					}
				}
				dir, err := resolveModel(ctx, cmd.String("model"))
				if err != nil {
					return fmt.Errorf("%s: --model: %w", cmd.FullName(), err)
				}
				o.Model = dir
			}
			if cmd.Bool("tools") {
				if cmd.Bool("rlhf") || cmd.IsSet("model") || cmd.IsSet("prompt") {
					return usageError{fmt.Errorf("%s: --tools trains the demo's own model on its own prompts: drop --rlhf, --model and --prompt", cmd.FullName())}
				}
				if err := demoTools(ctx, cmd); err != nil {
					return fmt.Errorf("%s: %w", cmd.FullName(), err)
				}
				return nil
			}
			if cmd.Bool("rlhf") {
				if err := demoRLHF(ctx, cmd, o); err != nil {
					return err
				}
				return nil
			}
			for _, f := range []string{"tool-share", "digits"} {
				if cmd.IsSet(f) {
					return usageError{fmt.Errorf("%s: --%s is a flag of the tools demo: add --tools", cmd.FullName(), f)}
				}
			}
			for _, f := range []string{"rm-steps", "rm-batch", "rm-learning-rate", "rm-train-wrongs", "reuse-rm", "rl-stages", "ppo-updates", "ppo-prompts", "ppo-epochs", "ppo-learning-rate", "ppo-kl-coef"} {
				if cmd.IsSet(f) {
					return usageError{fmt.Errorf("%s: --%s is a flag of the RLHF demo: add --rlhf", cmd.FullName(), f)}
				}
			}
			if err := runDemo(ctx, o, cmd); err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			return nil
		},
	})
}

// atLeast is a flag validator: the value must be ≥ n (checked as the flag is parsed, so a bad
// size is one line before any stage runs).
func atLeast(n int) func(int) error {
	return func(v int) error {
		if v < n {
			return fmt.Errorf("must be ≥ %d, got %d", n, v)
		}
		return nil
	}
}

// demoFlags are the flags of both demos (a fresh set for each run: freshFlags).
func demoFlags() []cli.Flag {
	d, r := demo.Default, demo.DefaultRLHF
	return []cli.Flag{
		&cli.StringFlag{Name: "output-dir", Value: d.OutputDir, Usage: "directory for the runs"},
		&cli.IntFlag{Name: "seed", Value: d.Seed, Usage: "seed of the split, the initialisation, SFT and GRPO"},
		&cli.IntFlag{Name: "max-factor", Value: d.MaxFactor, Usage: "problems a×b with a, b in [2, N]"},
		&cli.IntFlag{Name: "intermediate-size", Validator: atLeast(1), Value: d.Shape.Intermediate, Usage: "MLP width"},
		&cli.IntFlag{Name: "held-out", Value: d.HeldOut, Usage: "problems GRPO never samples, for evaluation"},
		&cli.StringFlag{Name: "sft-format", Value: d.SFTFormat, Usage: "SFT answers: bare (\"72\") or mixed (7 in 10 \"72.\", 3 bare)"},
		&cli.StringFlag{Name: "reward", Value: d.Reward, Usage: "GRPO verifier reward: mult_strict (exactly the product), mult_correct (its first integer) or mult_last (its last integer)"},
		&cli.StringFlag{Name: "prompt", Usage: "the question as a template with {a} and {b} (default the course's \"{a}×{b}는 얼마인가요? 숫자 하나로만 답하세요.\"), e.g. \"What is {a}×{b}? Reply with the number only.\" for a pretrained model that does not read Korean"},
		&cli.IntFlag{Name: "sft-steps", Value: d.SFTSteps, Usage: "SFT optimizer steps"},
		&cli.FloatFlag{Name: "sft-learning-rate", Value: d.SFTLearningRate, Usage: "SFT learning rate"},
		&cli.IntFlag{Name: "sft-batch", Validator: atLeast(1), Value: d.SFTBatch, Usage: "SFT batch size"},
		&cli.IntFlag{Name: "grpo-steps", Value: d.GRPOSteps, Usage: "GRPO optimizer steps"},
		&cli.FloatFlag{Name: "grpo-learning-rate", Value: d.GRPOLearningRate, Usage: "GRPO learning rate"},
		&cli.FloatFlag{Name: "temperature", Value: d.Temperature, Usage: "GRPO sampling temperature"},
		&cli.FloatFlag{Name: "beta", Value: d.Beta, Usage: "GRPO KL coefficient"},
		&cli.IntFlag{Name: "num-generations", Validator: atLeast(2), Value: d.NumGenerations, Usage: "GRPO completions per prompt"},
		&cli.IntFlag{Name: "grpo-prompts", Validator: atLeast(1), Value: d.GRPOPrompts, Usage: "GRPO prompts per step"},
		&cli.BoolFlag{Name: "reuse-sft", Usage: "keep OUTPUT_DIR/sft if it exists (tune GRPO from a fixed SFT model)"},
		&cli.StringFlag{Name: "model", Usage: "a pretrained instruct model (directory, FILE.gguf or ollama:NAME[:TAG]) to evaluate as it is and train with GRPO, instead of the demo's own tokenizer, model and SFT"},
		&cli.IntFlag{Name: "max-completion-length", Validator: atLeast(1), Value: d.MaxCompletionLength, Usage: "GRPO tokens sampled per completion"},
		&cli.IntFlag{Name: "grpo-seeds", Value: d.GRPOSeeds, Usage: "verifier GRPO runs with consecutive seeds, to measure run-to-run noise"},
		&cli.IntFlag{Name: "hidden-size", Validator: atLeast(1), Value: d.Shape.Hidden, Usage: "model width"},
		&cli.IntFlag{Name: "layers", Validator: atLeast(1), Value: d.Shape.Layers, Usage: "decoder layers"},
		&cli.BoolFlag{Name: "tools", Usage: "the tools demo instead: products of 4-digit numbers, SFT on conversations that sometimes call the built-in calculator, then GRPO with the calculator, without it, and with a random reward, two seeds each (default --output-dir runs/demo-tools; docs/demo.md)"},
		&cli.FloatFlag{Name: "tool-share", Value: demo.ToolsDefault.ToolShare, Usage: "--tools: share of the SFT conversations that call the calculator (the others answer at once)"},
		&cli.IntFlag{Name: "digits", Validator: atLeast(2), Value: demo.ToolsDefault.Digits, Usage: "--tools: digits of each factor"},
		&cli.BoolFlag{Name: "rlhf", Usage: "the RLHF demo instead: SFT → reward model on preference pairs → GRPO and PPO with the learned reward vs GRPO (random reward), under OUTPUT_DIR/rlhf"},
		&cli.IntFlag{Name: "rm-steps", Value: r.RMSteps, Usage: "--rlhf: reward model optimizer steps (0: num_train_epochs, 3, over its pairs, as max_steps 0 means)"},
		&cli.IntFlag{Name: "rm-batch", Validator: atLeast(1), Value: r.RMBatch, Usage: "--rlhf: reward model pairs per step"},
		&cli.FloatFlag{Name: "rm-learning-rate", Value: r.RMLearningRate, Usage: "--rlhf: reward model learning rate"},
		&cli.IntFlag{Name: "rm-train-wrongs", Value: r.RMTrainWrongs, Usage: "--rlhf: wrong answers per GRPO problem the reward model trains on (of 6; the others are held out)"},
		&cli.BoolFlag{Name: "reuse-rm", Usage: "--rlhf: keep OUTPUT_DIR/rlhf/reward-model if it exists (its ranking is measured again)"},
		&cli.StringSliceFlag{Name: "rl-stages", Usage: "--rlhf: run only these RL stages, in this order (grpo-reward-model, ppo-reward-model, grpo-random; default all)"},
		&cli.IntFlag{Name: "ppo-updates", Value: r.PPOUpdates, Usage: "--rlhf: PPO rollout batches (updates; 0: TRL's total_episodes = num_train_epochs, 3, × the GRPO problems)"},
		&cli.IntFlag{Name: "ppo-prompts", Validator: atLeast(1), Value: r.PPOPrompts, Usage: "--rlhf: PPO prompts per rollout batch"},
		&cli.IntFlag{Name: "ppo-epochs", Validator: atLeast(1), Value: r.PPOEpochs, Usage: "--rlhf: PPO optimizer steps (epochs) per rollout batch"},
		&cli.FloatFlag{Name: "ppo-learning-rate", Value: r.PPOLearningRate, Usage: "--rlhf: PPO learning rate (policy and value model)"},
		&cli.FloatFlag{Name: "ppo-kl-coef", Value: r.PPOKLCoef, Usage: "--rlhf: PPO's KL penalty coefficient"},
		backendFlag(),
	}
}

// demoEnv is where a demo runs: the --backend's backend (the caller finalizes it), warnings
// logged and progress bars drawn on stderr.
func demoEnv(cmd *cli.Command) (demo.Env, error) {
	b, err := newBackend(cmd.Root().ErrWriter, cmd.String("backend"))
	if err != nil {
		return demo.Env{}, err
	}
	errw := cmd.Root().ErrWriter
	return demo.Env{Backend: b, Logger: slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: slog.LevelWarn})), Progress: errw}, nil
}

func runDemo(ctx context.Context, o demo.Options, cmd *cli.Command) error {
	env, err := demoEnv(cmd)
	if err != nil {
		return err
	}
	defer env.Backend.Finalize()
	rep, err := demo.Run(ctx, o, env)
	if err != nil {
		return err
	}
	return printDemo(cmd.Root().Writer, o, rep)
}

// printDemo writes the summary table.
func printDemo(w io.Writer, o demo.Options, rep *demo.Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "stage\tGRPO problems strict\tcorrect\tlast\theld-out strict\tcorrect\tlast\treward\twall\n")
	for _, s := range rep.Stages {
		reward, wall := "-", s.Wall.Round(time.Second).String()
		if strings.HasPrefix(s.Name, "GRPO") {
			reward = fmt.Sprintf("%.3f", s.Reward)
		}
		if s.Wall == 0 { // nothing trained: the pretrained row
			wall = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Train.Strict, s.Train.Correct, s.Train.Last,
			s.HeldOut.Strict, s.HeldOut.Correct, s.HeldOut.Last, reward, wall)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range rep.Stages {
		if s.Seeds > 1 {
			fmt.Fprintf(w, "%s over %d seeds (%s verifier): GRPO problems %.1f%% ± %.1f, held-out %.1f%% ± %.1f (mean ± std over seeds)\n",
				s.Name, s.Seeds, o.Reward, 100*s.TrainMean, 100*s.TrainStd, 100*s.HeldMean, 100*s.HeldSD)
		}
	}
	fmt.Fprintf(w, "accuracy: greedy answers; strict: exactly the product (mult_strict), correct: its first integer (mult_correct), last: its last integer (mult_last); ± binomial standard error; reward: mean over the last logging window\n")
	_, err := fmt.Fprintf(w, "total %s; curves: posttrain plot %s %s -o %s\n", rep.Wall.Round(time.Second),
		filepath.Join(o.OutputDir, "grpo"), filepath.Join(o.OutputDir, "grpo-random"), filepath.Join(o.OutputDir, "curves.png"))
	return err
}

// demoTools runs `posttrain demo --tools`: demo.ToolsDefault with the flags given.
func demoTools(ctx context.Context, cmd *cli.Command) error {
	for _, f := range []string{"max-factor", "held-out", "sft-format", "reward", "rm-steps", "rm-batch", "rm-learning-rate", "rm-train-wrongs", "reuse-rm", "rl-stages", "ppo-updates", "ppo-prompts", "ppo-epochs", "ppo-learning-rate", "ppo-kl-coef"} {
		if cmd.IsSet(f) {
			return usageError{fmt.Errorf("--%s is not a flag of the tools demo", f)}
		}
	}
	o := demo.ToolsDefault
	set := func(name string, apply func()) {
		if cmd.IsSet(name) {
			apply()
		}
	}
	set("output-dir", func() { o.OutputDir = cmd.String("output-dir") })
	set("tool-share", func() { o.ToolShare = cmd.Float("tool-share") })
	set("digits", func() { o.Digits = int(cmd.Int("digits")) })
	set("seed", func() { o.Seed = int(cmd.Int("seed")) })
	set("sft-steps", func() { o.SFTSteps = int(cmd.Int("sft-steps")) })
	set("sft-batch", func() { o.SFTBatch = int(cmd.Int("sft-batch")) })
	set("sft-learning-rate", func() { o.SFTLearningRate = cmd.Float("sft-learning-rate") })
	set("grpo-steps", func() { o.GRPOSteps = int(cmd.Int("grpo-steps")) })
	set("grpo-learning-rate", func() { o.GRPOLearningRate = cmd.Float("grpo-learning-rate") })
	set("grpo-prompts", func() { o.GRPOPrompts = int(cmd.Int("grpo-prompts")) })
	set("num-generations", func() { o.NumGen = int(cmd.Int("num-generations")) })
	set("temperature", func() { o.Temperature = cmd.Float("temperature") })
	set("beta", func() { o.Beta = cmd.Float("beta") })
	set("max-completion-length", func() { o.MaxCompletionLength = int(cmd.Int("max-completion-length")) })
	set("grpo-seeds", func() { o.Seeds = int(cmd.Int("grpo-seeds")) })
	set("reuse-sft", func() { o.ReuseSFT = cmd.Bool("reuse-sft") })
	set("hidden-size", func() { o.Shape.Hidden = int(cmd.Int("hidden-size")) })
	set("layers", func() { o.Shape.Layers = int(cmd.Int("layers")) })
	set("intermediate-size", func() { o.Shape.Intermediate = int(cmd.Int("intermediate-size")) })
	env, err := demoEnv(cmd)
	if err != nil {
		return err
	}
	defer env.Backend.Finalize()
	rep, err := demo.RunTools(ctx, o, env)
	if err != nil {
		return err
	}
	return printToolsDemo(cmd.Root().Writer, o, rep)
}

// printToolsDemo writes the tools demo's table.
func printToolsDemo(w io.Writer, o demo.ToolsOptions, rep *demo.ToolsReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "run	seed	held-out accuracy before	after	calls per completion before	after	training calls first step	last step	wall\n")
	for _, r := range rep.Runs {
		fmt.Fprintf(tw, "%s\t%d\t%.1f%%\t%.1f%%\t%.2f\t%.2f\t%.2f\t%.2f\t%s\n", r.Condition, r.Seed, 100*r.Before.Accuracy, 100*r.After.Accuracy,
			r.Before.CallRate, r.After.CallRate, r.FirstCallRate, r.LastCallRate, r.Wall.Round(time.Second))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "accuracy: mult_correct (the first integer of the last turn is the product) on %d held-out problems × %d samples at temperature %g; calls: tool calls per completion (0 where the run has no tool)\n",
		o.HeldOut, o.NumGen, o.Temperature)
	var dirs []string
	for _, r := range rep.Runs[:min(len(rep.Runs), len(demo.ToolsConditions))] {
		dirs = append(dirs, r.Dir)
	}
	_, err := fmt.Fprintf(w, "SFT %s, total %s; curves: posttrain plot %s -o %s\n", rep.SFT.Round(time.Second), rep.Wall.Round(time.Second),
		strings.Join(dirs, " "), filepath.Join(o.OutputDir, "curves.png"))
	return err
}
