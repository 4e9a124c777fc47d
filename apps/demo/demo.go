// Package demo is `posttrain demo`: GRPO with a verifier reward really learning, on a laptop CPU,
// in minutes, with nothing downloaded. It
//
//  1. trains a small byte-level BPE tokenizer on multiplication conversations (data/bpetrain) and
//     writes a randomly initialised Qwen2-architecture model with it, in HuggingFace layout;
//  2. SFTs it (trainers/sft through the shared loop) on every problem a×b, a and b in [2, MaxFactor],
//     by default with mixed answer formats (most answers "72.", some the bare "72");
//  3. runs GRPO (trainers/grpo) from the SFT model on the prompts of the GRPO problems with a
//     verifier reward (by default mult_strict: the answer is exactly the product), and, as a
//     control from the same start, GRPO with the seeded "random" reward;
//
// and reports greedy accuracy after each stage, strict (exactly the product) and correct (its first
// integer, the course's verifier), on the GRPO problems and on the held-out problems GRPO never
// sees, each with its binomial standard error, and, when several GRPO seeds are run, the spread
// over seeds (run-to-run noise). A model this small memorises products, so what GRPO learns on
// some problems carries over to the held-out ones only when it is a habit shared by all problems:
// the answer format.
//
// Each stage's run replaces the one a previous demo of the same model left in its directory
// (overwrite_output_dir); a directory holding the demo of another model is refused (DirMark).
//
// RunRLHF is `posttrain demo --rlhf` (rlhf.go): from the same SFT model, a reward model
// (trainers/reward) on multiplication preference pairs of the GRPO problems, its ranking of
// held-out pairs, then RL stages from the SFT model with the learned reward (GRPO, and PPO through
// trainers/ppo) against the random-reward control, scored as above.
//
// It is the demo's orchestrator, so unlike the trainer packages, which import no other trainer, it
// imports trainers/sft, trainers/grpo, trainers/reward and trainers/ppo (and apps/answer to score each stage).
package demo

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"github.com/posttrain/posttrain/trainers/grpo"
	"github.com/posttrain/posttrain/trainers/sft"
)

// Options size the demo; Default is the tuned configuration.
type Options struct {
	OutputDir string
	Seed      int
	MaxFactor int // problems a×b with a, b in [2, MaxFactor] (the course: 19)
	HeldOut   int // held-out problems
	Shape     ModelShape

	SFTSteps, SFTBatch int
	SFTLearningRate    float64

	GRPOSteps, GRPOPrompts, NumGenerations int // GRPOPrompts distinct prompts per step
	GRPOLearningRate, Temperature          float64
	// Beta is GRPO's KL coefficient to the SFT model. Measured with the bare format, mult_correct
	// and 120 SFT steps: with 0.1 the held-out problems keep their SFT accuracy and the
	// random-reward control does not collapse; with 0 GRPO still gains on its problems but
	// held-out accuracy falls (12.5% → 6.7%) and the control's drifts to 0.
	Beta float64
	// ReuseSFT skips the tokenizer, init and SFT stages when OutputDir/sft holds a model
	// (tuning GRPO on a fixed SFT start).
	ReuseSFT bool
	// GRPOSeeds > 1 repeats the verifier-reward GRPO run with seeds Seed+1, Seed+2, ... to measure
	// the run-to-run spread.
	GRPOSeeds int
	// SFTFormat is the SFT answers' format (FormatBare or FormatMixed) and Reward GRPO's verifier
	// reward (mult_correct or mult_strict).
	SFTFormat, Reward string
	// Model, when set, is a pretrained checkpoint directory (an instruct model with its chat
	// template): the tokenizer, init and SFT stages are skipped, the model is evaluated as it is,
	// and both GRPO runs start from it.
	Model string
	// MaxCompletionLength is GRPO's max_completion_length (tokens sampled per completion); the
	// greedy evaluation generates max(6, MaxCompletionLength) tokens.
	MaxCompletionLength int
	// Prompt, when set, replaces the course's question: a template with {a} and {b} (say "What is
	// {a}×{b}? Reply with the number only." for a model that does not read Korean).
	Prompt string
}

// prompter is the conversation maker of o's GRPO rows and evaluation.
func (o Options) prompter() Prompter { return Prompter{Pretrained: o.Model != "", Template: o.Prompt} }

// evalTokens is the greedy evaluation's most new tokens: the demo's own 6, or GRPO's completion
// length when longer.
func (o Options) evalTokens() int { return max(6, o.MaxCompletionLength) }

// Default is the configuration docs/demo.md's numbers come from.
var Default = Options{
	OutputDir: filepath.Join("runs", "demo"), Seed: 1, MaxFactor: 12, HeldOut: 50,
	Shape:    ModelShape{Hidden: 128, Intermediate: 256, Layers: 2, Heads: 4, KVHeads: 2},
	SFTSteps: 300, SFTBatch: 32, SFTLearningRate: 3e-3,
	GRPOSteps: 60, GRPOPrompts: 4, NumGenerations: 16, GRPOLearningRate: 3e-4, Temperature: 1, Beta: 0.1,
	GRPOSeeds: 1, SFTFormat: FormatMixed, Reward: "mult_strict", MaxCompletionLength: 4,
}

// Stage is one row of the summary.
type Stage struct {
	Name           string
	Dir            string
	HeldOut, Train Scores
	Reward         float64       // last logged mean reward (GRPO stages)
	Wall           time.Duration // the stage's training since t0; 0 for a stage that trained nothing (pretrained)
	// Several GRPO seeds: mean and sample std over the seeds of the accuracy (under the reward's
	// verifier) on the GRPO problems and on the held-out ones (the run-to-run noise).
	Seeds                                 int
	TrainMean, TrainStd, HeldMean, HeldSD float64
}

// Report is the demo's result.
type Report struct {
	Stages []Stage
	Wall   time.Duration
}

// Env is where the demo runs.
type Env struct {
	Backend  backends.Backend
	Logger   *slog.Logger
	Progress io.Writer // progress bars of the training stages; nil: none
}

// Run runs every stage and returns the report.
func Run(ctx stdctx.Context, o Options, env Env) (*Report, error) {
	start := time.Now()
	if env.Logger == nil {
		env.Logger = slog.Default()
	}
	if err := checkVerifier(o.Reward); err != nil {
		return nil, err
	}
	if o.Prompt != "" {
		if err := CheckTemplate(o.Prompt); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
	}
	if _, err := SFTDataset(nil, o.SFTFormat, Prompter{}); err != nil {
		return nil, err
	}
	split, err := NewSplit(o.MaxFactor, o.HeldOut, uint64(o.Seed))
	if err != nil {
		return nil, err
	}
	if err := claimDir(o.OutputDir, o.Model); err != nil {
		return nil, err
	}
	if err := writePrompts(o.OutputDir, split, o.prompter()); err != nil {
		return nil, err
	}
	r := &stages{o: o, env: env, split: split, rep: &Report{}}
	rep := r.rep
	var sftDir string
	if o.Model != "" {
		sftDir = o.Model
		if _, err := r.eval("pretrained", o.Model, time.Time{}); err != nil {
			return nil, err
		}
	} else if sftDir, err = r.sft(ctx); err != nil {
		return nil, err
	}
	if o.GRPOSteps == 0 {
		rep.Wall = time.Since(start)
		return rep, nil
	}
	var trains, helds []Accuracy
	for k := range max(1, o.GRPOSeeds) {
		t0 := time.Now()
		name, dir := "GRPO "+o.Reward, filepath.Join(o.OutputDir, "grpo")
		if k > 0 {
			name, dir = name+" seed "+strconv.Itoa(o.Seed+k), dir+"-seed"+strconv.Itoa(o.Seed+k)
		}
		reward, err := runGRPO(ctx, o, env, sftDir, dir, o.Reward, o.Seed+k, split)
		if err != nil {
			return nil, err
		}
		st, err := r.eval(name, dir, t0)
		if err != nil {
			return nil, err
		}
		st.Reward = reward
		trains, helds = append(trains, st.Train.Of(o.Reward)), append(helds, st.HeldOut.Of(o.Reward))
	}
	t0 := time.Now()
	dir := filepath.Join(o.OutputDir, "grpo-random")
	reward, err := runGRPO(ctx, o, env, sftDir, dir, "random", o.Seed, split)
	if err != nil {
		return nil, err
	}
	st, err := r.eval("GRPO random (control)", dir, t0)
	if err != nil {
		return nil, err
	}
	st.Reward = reward
	if len(trains) > 1 {
		st := &rep.Stages[len(rep.Stages)-1-len(trains)] // the first GRPO stage
		st.Seeds = len(trains)
		st.TrainMean, st.TrainStd = seedStats(trains)
		st.HeldMean, st.HeldSD = seedStats(helds)
	}
	rep.Wall = time.Since(start)
	return rep, nil
}

// stages runs the demo's stages and collects their rows of the report.
type stages struct {
	o     Options
	env   Env
	split Split
	rep   *Report
}

// eval scores the checkpoint in dir on the held-out and the GRPO problems and appends its row;
// its wall is the time since t0 (the zero time: nothing was trained).
func (r *stages) eval(name, dir string, t0 time.Time) (*Stage, error) {
	st := Stage{Name: name, Dir: dir}
	if !t0.IsZero() {
		st.Wall = time.Since(t0)
	}
	var err error
	q, n := r.o.prompter(), r.o.evalTokens()
	if st.HeldOut, err = Evaluate(r.env.Backend, dir, r.split.HeldOut, q, n); err != nil {
		return nil, fmt.Errorf("demo: evaluate %s: %w", name, err)
	}
	if st.Train, err = Evaluate(r.env.Backend, dir, r.split.Train, q, n); err != nil {
		return nil, fmt.Errorf("demo: evaluate %s: %w", name, err)
	}
	r.env.Logger.Info("demo: "+name, "held_out_strict", st.HeldOut.Strict.String(), "held_out_correct", st.HeldOut.Correct.String(),
		"held_out_last", st.HeldOut.Last.String(), "train_strict", st.Train.Strict.String(), "train_correct", st.Train.Correct.String(),
		"train_last", st.Train.Last.String(), "wall", st.Wall.Round(time.Second))
	r.rep.Stages = append(r.rep.Stages, st)
	return &r.rep.Stages[len(r.rep.Stages)-1], nil
}

// sft runs the tokenizer, init and SFT stages into OutputDir (or, with ReuseSFT, keeps
// OutputDir/sft when it holds a model), evaluates them, and returns the SFT model's directory.
func (r *stages) sft(ctx stdctx.Context) (string, error) {
	o := r.o
	t0 := time.Now()
	sftDir := filepath.Join(o.OutputDir, "sft")
	if _, err := os.Stat(filepath.Join(sftDir, "config.json")); err != nil || !o.ReuseSFT {
		base, err := WriteBase(o.OutputDir, o.Shape, uint64(o.Seed))
		if err != nil {
			return "", err
		}
		if _, err := r.eval("init (random weights)", base, t0); err != nil {
			return "", err
		}
		t0 = time.Now()
		if err := runSFT(ctx, o, r.env, base, sftDir, append(append([]mult.Problem(nil), r.split.Train...), r.split.HeldOut...)); err != nil {
			return "", err
		}
	}
	if _, err := r.eval("SFT", sftDir, t0); err != nil {
		return "", err
	}
	return sftDir, nil
}

func seedStats(as []Accuracy) (mean, std float64) {
	for _, a := range as {
		mean += a.P()
	}
	mean /= float64(len(as))
	for _, a := range as {
		std += (a.P() - mean) * (a.P() - mean)
	}
	return mean, math.Sqrt(std / float64(len(as)-1))
}

// runSFT fine-tunes base on the training problems' answers into dir.
func runSFT(ctx stdctx.Context, o Options, env Env, base, dir string, problems []mult.Problem) error {
	ds, err := SFTDataset(problems, o.SFTFormat, o.prompter())
	if err != nil {
		return err
	}
	return trainSFT(ctx, env, base, dir, ds, sftSettings{"demo:sft", o.SFTSteps, o.SFTBatch, o.SFTLearningRate, o.Seed})
}

// sftSettings are the knobs a demo's SFT stage takes from its options, and the name its config
// gives the dataset.
type sftSettings struct {
	dataset      string
	steps, batch int
	lr           float64
	seed         int
}

// trainSFT is a demo's SFT stage: base fine-tuned on ds into dir (TRL's prompt-completion SFT, the
// loss on the completions), constant learning rate after a 5% warmup, no weight decay, rows of at
// most 128 tokens.
func trainSFT(ctx stdctx.Context, env Env, base, dir string, ds *data.Dataset, k sftSettings) error {
	cfg := sft.DefaultConfig()
	cfg.Model, cfg.Dataset, cfg.OutputDir = base, k.dataset, dir
	cfg.MaxSteps, cfg.PerDeviceTrainBatchSize, cfg.LearningRate = k.steps, k.batch, k.lr
	cfg.LRSchedulerType, cfg.WarmupRatio, cfg.WeightDecay = "constant_with_warmup", 0.05, 0
	cfg.LoggingSteps, cfg.SaveSteps, cfg.Seed, cfg.MaxLength = 10, 0, k.seed, 128
	if err := prepare(cfg, "sft"); err != nil {
		return err
	}
	m, err := trainable.LoadModel(base, false)
	if err != nil {
		return err
	}
	tr, err := sft.New(m, ds, cfg)
	if err != nil {
		return fmt.Errorf("demo sft: %w", err)
	}
	if _, err := loop.Run(ctx, m, tr, loop.Options{Config: cfg, Backend: env.Backend, Progress: env.Progress, Logger: env.Logger}); err != nil {
		return fmt.Errorf("demo sft: %w", err)
	}
	return nil
}

// runGRPO trains from the SFT (or pretrained) model on the training prompts with one reward function into dir
// and returns the last logged mean reward.
func runGRPO(ctx stdctx.Context, o Options, env Env, from, dir, reward string, seed int, split Split) (float64, error) {
	return runGRPOWith(ctx, o, env, from, dir, []string{reward}, nil, reward, seed, split)
}

// runGRPOWith is runGRPO with reward functions funcs and reward models (checkpoint directories);
// what names the rewards in an error.
func runGRPOWith(ctx stdctx.Context, o Options, env Env, from, dir string, funcs, models []string, what string, seed int, split Split) (float64, error) {
	cfg := grpo.DefaultConfig()
	cfg.Model, cfg.Dataset, cfg.OutputDir, cfg.RewardFuncs, cfg.RewardModels = from, "demo:grpo", dir, funcs, models
	cfg.NumGenerations, cfg.PerDeviceTrainBatchSize = o.NumGenerations, o.GRPOPrompts*o.NumGenerations
	cfg.MaxCompletionLength, cfg.Temperature = o.MaxCompletionLength, o.Temperature
	cfg.Beta = o.Beta
	cfg.MaxSteps, cfg.LearningRate, cfg.LRSchedulerType, cfg.WeightDecay = o.GRPOSteps, o.GRPOLearningRate, "constant", 0
	cfg.LoggingSteps, cfg.SaveSteps, cfg.Seed = 5, 0, seed
	if err := prepare(cfg, "grpo"); err != nil {
		return 0, err
	}
	sum, err := grpo.Run(ctx, cfg, from, grpo.RunOptions{Env: loop.Env{Backend: env.Backend, Logger: env.Logger, Progress: env.Progress}, Rows: PromptRows(split.Train, o.prompter())})
	if err != nil {
		return 0, fmt.Errorf("demo grpo (%s): %w", what, err)
	}
	return sum.Last.Metrics["reward"], nil
}

// prepare readies a stage's configuration: overwrite_output_dir (the demo redoes its stages: a
// rerun replaces the previous one), then Resolve and Validate; an invalid option is an error
// naming the stage.
func prepare(cfg config.Config, stage string) error {
	cfg.Common().OverwriteOutputDir = true
	cfg.Resolve()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("demo %s: %w", stage, err)
	}
	return nil
}

// PromptsDir is the folder under OutputDir where the demo writes its split: grpo.jsonl (the GRPO
// problems) and held-out.jsonl, prompt-only rows with their "answer" column as GRPO reads them
// (`posttrain grpo --dataset`, or TRL's GRPOTrainer on the same problems).
const PromptsDir = "prompts"

func writePrompts(outDir string, split Split, q Prompter) error {
	dir := filepath.Join(outDir, PromptsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	for name, ps := range map[string][]mult.Problem{"grpo.jsonl": split.Train, "held-out.jsonl": split.HeldOut} {
		var b bytes.Buffer
		if err := data.WriteJSONL(&b, data.PromptOnly, PromptRows(ps, q)); err != nil {
			return fmt.Errorf("demo: %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	return nil
}

// DirMark is the file in a demo's output directory that records which model its runs trained:
// {"model": "<--model>"}, or "" for the demo's own SFT model.
const DirMark = ".posttrain-demo.json"

// claimDir refuses an output directory that holds the demo of another model, whose runs this one
// would replace (a pretrained `--model` demo into the directory of the demo's own model, or of
// another pretrained model), and marks it as this model's. A directory without the mark that
// holds stage directories is the demo's own model's (written before the mark existed).
func claimDir(dir, model string) error {
	var mark struct {
		Model *string `json:"model"`
	}
	switch data, err := os.ReadFile(filepath.Join(dir, DirMark)); {
	case err == nil:
		if json.Unmarshal(data, &mark) != nil || mark.Model == nil {
			return fmt.Errorf("demo: %s is not a demo's mark: remove it or give another --output-dir", filepath.Join(dir, DirMark))
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("demo: %w", err)
	default:
		for _, stage := range []string{"sft", "grpo", "grpo-random"} {
			if _, err := os.Stat(filepath.Join(dir, stage)); err == nil {
				own := ""
				mark.Model = &own
				break
			}
		}
	}
	if mark.Model != nil && *mark.Model != model {
		held, this := "the demo's own model", "the demo's own model"
		if *mark.Model != "" {
			held = "--model " + *mark.Model
		}
		if model != "" {
			this = "--model " + model
		}
		return fmt.Errorf("demo: --output-dir %s holds the runs of %s, which a demo of %s would replace: give another --output-dir", dir, held, this)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	data, err := json.Marshal(map[string]string{"model": model})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, DirMark), append(data, '\n'), 0o644)
}
