package demo

// `posttrain demo --rlhf`: the demo's SFT model, then a reward model learned from multiplication
// preference pairs, then RL from the SFT model with the learned reward (no verifier) against the
// random-reward control.

import (
	stdctx "context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"github.com/posttrain/posttrain/trainers/ppo"
	"github.com/posttrain/posttrain/trainers/reward"
)

// RLHFOptions size `posttrain demo --rlhf`: the demo's Options (split, tokenizer, model, SFT and
// GRPO; Reward and GRPOSeeds are not used) and the reward model's stage.
type RLHFOptions struct {
	Options
	// RMTrainWrongs is how many of each GRPO problem's distinct wrong answers (PreferencePairs)
	// the reward model trains on; the others are its held-out pairs of seen problems.
	RMTrainWrongs    int
	RMSteps, RMBatch int
	RMLearningRate   float64
	// ReuseRewardModel keeps OutputDir/rlhf/reward-model when it holds a model (its ranking is
	// measured again), as ReuseSFT keeps the SFT model.
	ReuseRewardModel bool
	// Only, when not empty, names the RL stages to run (their Dir: grpo-reward-model,
	// ppo-reward-model, grpo-random); the others are skipped.
	Only []string

	// PPO's stage (trainers/ppo, TRL's PPOTrainer semantics): PPOUpdates rollout batches of
	// PPOPrompts prompts, each trained PPOEpochs optimizer steps (one mini-batch) on the clipped
	// policy and value losses, responses of at most 4 tokens stopped at EOS, sampled at the
	// demo's Temperature, the KL penalty PPOKLCoef; the value model starts from the reward model.
	PPOUpdates, PPOPrompts, PPOEpochs int
	PPOLearningRate, PPOKLCoef        float64
}

// DefaultRLHF is the configuration docs/demo.md's RLHF numbers come from.
var DefaultRLHF = RLHFOptions{Options: Default, RMTrainWrongs: 4, RMSteps: 100, RMBatch: 16, RMLearningRate: 1e-3,
	PPOUpdates: 30, PPOPrompts: 32, PPOEpochs: 4, PPOLearningRate: 1e-4, PPOKLCoef: 0.1}

// RLHFDir is the RLHF demo's directory under OutputDir: the reward model and the RL runs (the
// tokenizer, base and SFT model are the demo's, in OutputDir).
const RLHFDir = "rlhf"

// RewardModelReport is the reward model's stage: its checkpoint and its ranking accuracy (chosen
// above rejected) on its training pairs, on held-out pairs of the GRPO problems (wrong answers it
// never saw) and on the pairs of the held-out problems (never in its training).
type RewardModelReport struct {
	Dir                         string
	Train, HeldOutPairs, Unseen Accuracy
	Wall                        time.Duration
}

// RLHFReport is the RLHF demo's result: Stages are the demo's init (when not reused) and SFT
// rows, RL one row per RL stage, in order.
type RLHFReport struct {
	Report
	RewardModel RewardModelReport
	RL          []Stage
}

// RLStage is one RL run from the SFT model with the learned reward (or a control): Train trains
// from the checkpoint in sftDir, with the reward model in rmDir, into outDir, and returns the last
// logged mean reward. Its row in the report is the checkpoint in outDir = OutputDir/rlhf/Dir.
type RLStage struct {
	Name, Dir string
	Train     func(ctx stdctx.Context, sftDir, rmDir, outDir string) (float64, error)
}

// RLStages are the RLHF demo's RL runs, each from the SFT model: GRPO with the reward model as its
// only reward, PPO with the reward model (and a value model started from it), and the demo's
// control, GRPO with the seeded random reward.
func RLStages(o RLHFOptions, env Env, split Split) []RLStage {
	return []RLStage{
		{Name: "GRPO reward model", Dir: "grpo-reward-model", Train: func(ctx stdctx.Context, sftDir, rmDir, outDir string) (float64, error) {
			return runGRPOWith(ctx, o.Options, env, sftDir, outDir, nil, []string{rmDir}, "reward model "+rmDir, o.Seed, split)
		}},
		{Name: "PPO reward model", Dir: "ppo-reward-model", Train: func(ctx stdctx.Context, sftDir, rmDir, outDir string) (float64, error) {
			return runPPO(ctx, o, env, sftDir, rmDir, outDir, split)
		}},
		{Name: "GRPO random (control)", Dir: "grpo-random", Train: func(ctx stdctx.Context, sftDir, _, outDir string) (float64, error) {
			return runGRPO(ctx, o.Options, env, sftDir, outDir, "random", o.Seed, split)
		}},
	}
}

// RunRLHF runs the demo's tokenizer, init and SFT stages (or reuses its SFT model), trains the
// reward model on PreferencePairs of the GRPO problems, measures its ranking, runs stages (nil:
// RLStages) from the SFT model, and evaluates each as the demo does.
func RunRLHF(ctx stdctx.Context, o RLHFOptions, env Env, rl []RLStage) (*RLHFReport, error) {
	start := time.Now()
	if env.Logger == nil {
		env.Logger = slog.Default()
	}
	if _, err := SFTDataset(nil, o.SFTFormat, Prompter{}); err != nil {
		return nil, err
	}
	if o.RMTrainWrongs < 1 || o.RMTrainWrongs > 5 {
		return nil, fmt.Errorf("demo: the reward model's wrong answers per problem must be in [1, 5] (a problem has at most 6), got %d", o.RMTrainWrongs)
	}
	split, err := NewSplit(o.MaxFactor, o.HeldOut, uint64(o.Seed))
	if err != nil {
		return nil, err
	}
	if rl == nil {
		rl = RLStages(o, env, split)
	}
	if len(o.Only) > 0 {
		var kept []RLStage
		for _, name := range o.Only {
			i := slices.IndexFunc(rl, func(s RLStage) bool { return s.Dir == name })
			if i < 0 {
				var names []string
				for _, s := range rl {
					names = append(names, s.Dir)
				}
				return nil, fmt.Errorf("demo: no RL stage %q (stages: %s)", name, strings.Join(names, ", "))
			}
			kept = append(kept, rl[i])
		}
		rl = kept
	}
	r := &stages{o: o.Options, env: env, split: split, rep: &Report{}}
	sftDir, err := r.sft(ctx)
	if err != nil {
		return nil, err
	}
	rep := &RLHFReport{}
	t0 := time.Now()
	rmDir := filepath.Join(o.OutputDir, RLHFDir, "reward-model")
	trainRows, heldRows := PreferencePairs(split.Train, o.RMTrainWrongs, uint64(o.Seed))
	unseenRows, _ := PreferencePairs(split.HeldOut, 6, uint64(o.Seed))
	if len(heldRows) == 0 {
		return nil, fmt.Errorf("demo: no held-out pairs of the GRPO problems with %d wrong answers per problem for training", o.RMTrainWrongs)
	}
	if _, err := os.Stat(filepath.Join(rmDir, "config.json")); err != nil || !o.ReuseRewardModel {
		if err := runRewardModel(ctx, o, env, sftDir, rmDir, trainRows); err != nil {
			return nil, err
		}
	}
	rm := RewardModelReport{Dir: rmDir}
	scorer, err := trainable.LoadScorer(env.Backend, rmDir, false, 64)
	if err != nil {
		return nil, err
	}
	for _, set := range []struct {
		acc  *Accuracy
		rows []data.Row
	}{{&rm.Train, trainRows}, {&rm.HeldOutPairs, heldRows}, {&rm.Unseen, unseenRows}} {
		if *set.acc, err = RankPairs(scorer, set.rows); err != nil {
			return nil, err
		}
	}
	rm.Wall = time.Since(t0)
	env.Logger.Info("demo: reward model", "train", rm.Train.String(), "held_out_pairs", rm.HeldOutPairs.String(), "unseen", rm.Unseen.String(), "wall", rm.Wall.Round(time.Second))
	rep.RewardModel = rm
	for _, s := range rl {
		t0 := time.Now()
		dir := filepath.Join(o.OutputDir, RLHFDir, s.Dir)
		reward, err := s.Train(ctx, sftDir, rmDir, dir)
		if err != nil {
			return nil, err
		}
		st, err := r.eval(s.Name, dir, t0)
		if err != nil {
			return nil, err
		}
		st.Reward = reward
	}
	n := len(r.rep.Stages) - len(rl)
	rep.Stages, rep.RL = r.rep.Stages[:n], r.rep.Stages[n:]
	rep.Wall = time.Since(start)
	return rep, nil
}

// PreferencePairs are the multiplication preference pairs (`posttrain data mult --kind dpo`:
// chosen the bare product a·b, rejected a plausible wrong answer a·b + one of mult's
// WrongOffsets) of problems, in the demo's conversational prompt. Each problem's distinct wrong
// answers (6, or 4 when a = b) are shuffled with seed; its pairs with the first train of them go
// to trainRows, the others to heldRows.
func PreferencePairs(problems []mult.Problem, train int, seed uint64) (trainRows, heldRows []data.Row) {
	rng := rand.New(rand.NewPCG(seed, 0x7e3a))
	answer := func(v int) data.Text {
		return data.Text{Messages: []chat.Message{{Role: "assistant", Content: strconv.Itoa(v)}}}
	}
	for _, p := range problems {
		var wrongs []int
		for _, off := range p.WrongOffsets() {
			if w := p.Answer() + off; !slices.Contains(wrongs, w) {
				wrongs = append(wrongs, w)
			}
		}
		rng.Shuffle(len(wrongs), func(i, j int) { wrongs[i], wrongs[j] = wrongs[j], wrongs[i] })
		for k, w := range wrongs {
			row := data.Row{Prompt: data.Text{Messages: Prompter{}.Messages(p)}, Chosen: answer(p.Answer()), Rejected: answer(w)}
			if k < train {
				row.Line = len(trainRows) + 1
				trainRows = append(trainRows, row)
			} else {
				row.Line = len(heldRows) + 1
				heldRows = append(heldRows, row)
			}
		}
	}
	return trainRows, heldRows
}

// runRewardModel trains a reward model from the SFT model (its LM head replaced by a new score
// head, as `posttrain reward` does with a causal LM) on rows into dir.
func runRewardModel(ctx stdctx.Context, o RLHFOptions, env Env, sftDir, dir string, rows []data.Row) error {
	cfg := reward.DefaultConfig()
	cfg.Model, cfg.Dataset, cfg.OutputDir = sftDir, "demo:reward", dir
	cfg.MaxSteps, cfg.PerDeviceTrainBatchSize, cfg.LearningRate = o.RMSteps, o.RMBatch, o.RMLearningRate
	cfg.LRSchedulerType, cfg.WarmupRatio, cfg.WeightDecay = "constant_with_warmup", 0.05, 0
	cfg.LoggingSteps, cfg.SaveSteps, cfg.Seed = 10, 0, o.Seed
	if err := prepare(cfg, "reward model"); err != nil {
		return err
	}
	m, _, err := trainable.LoadClassifier(sftDir, false, 1, uint64(o.Seed))
	if err != nil {
		return err
	}
	d := &data.Dataset{Path: "demo-preferences", Format: data.Preference, Conversational: true, Rows: rows}
	tr, err := reward.New(m, d, cfg)
	if err != nil {
		return fmt.Errorf("demo reward model: %w", err)
	}
	if _, err := loop.Run(ctx, m, tr, loop.Options{Config: cfg, Backend: env.Backend, Progress: env.Progress, Logger: env.Logger}); err != nil {
		return fmt.Errorf("demo reward model: %w", err)
	}
	return nil
}

// runPPO trains the SFT model with PPO (trainers/ppo) against the reward model in rmDir, its value
// model started from the reward model (TRL's ppo.py), on the GRPO problems' prompts into dir, and
// returns the last logged mean score (objective/scores).
func runPPO(ctx stdctx.Context, o RLHFOptions, env Env, sftDir, rmDir, dir string, split Split) (float64, error) {
	cfg := ppo.DefaultConfig()
	cfg.Model, cfg.RewardModelPath, cfg.Dataset, cfg.OutputDir = sftDir, rmDir, "demo:ppo", dir
	cfg.PerDeviceTrainBatchSize, cfg.GradientAccumulationSteps, cfg.NumPPOEpochs = o.PPOPrompts, 1, o.PPOEpochs
	cfg.ResponseLength, cfg.StopToken, cfg.Temperature, cfg.KLCoef = 4, "eos", o.Temperature, o.PPOKLCoef
	cfg.MaxSteps, cfg.LearningRate, cfg.LRSchedulerType, cfg.WeightDecay = o.PPOUpdates, o.PPOLearningRate, "constant", 0
	cfg.LoggingSteps, cfg.SaveSteps, cfg.Seed = 5, 0, o.Seed
	if err := prepare(cfg, "ppo"); err != nil {
		return 0, err
	}
	sum, err := ppo.Run(ctx, cfg, sftDir, ppo.RunOptions{Env: loop.Env{Backend: env.Backend, Logger: env.Logger, Progress: env.Progress}, Rows: PromptRows(split.Train, Prompter{})})
	if err != nil {
		return 0, fmt.Errorf("demo ppo: %w", err)
	}
	return sum.Last.Metrics["objective/scores"], nil
}

// RankPairs scores each preference row's chosen and rejected answer with the reward model s as
// its trainer encoded them (RewardTrainingIDs) and counts the pairs ranked right (chosen strictly
// above rejected), as `posttrain score-reward` does.
func RankPairs(s *trainable.Scorer, rows []data.Row) (Accuracy, error) {
	ids := make([][]int32, 0, 2*len(rows))
	for _, r := range rows {
		for _, a := range []data.Text{r.Chosen, r.Rejected} {
			x, err := s.Model.Text.RewardTrainingIDs(r.Prompt, a)
			if err != nil {
				return Accuracy{}, fmt.Errorf("demo: pair %d: %w", r.Line, err)
			}
			ids = append(ids, x)
		}
	}
	rs, err := s.Score(ids)
	if err != nil {
		return Accuracy{}, err
	}
	acc := Accuracy{N: len(rows)}
	for i := range rows {
		if rs[2*i] > rs[2*i+1] {
			acc.Correct++
		}
	}
	return acc, nil
}
