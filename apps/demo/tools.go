package demo

// `posttrain demo --tools`: a model that learns to use a calculator.

import (
	"bytes"
	stdctx "context"
	_ "embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/tools"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/grpo"
)

// ToolsChatTemplate is the tools demo's chat template: Qwen2.5-Instruct's, its tool calls
// (<tool_call> JSON), tool turns (<tool_response> in a user turn) and everything else as Qwen's,
// but the tools listed by name on the system line (" tools: calculator") where Qwen's renders
// its instructions and every schema, which would make each prompt some 100 tokens longer for a
// model that learns its one tool from its SFT conversations.
//
//go:embed tools_chat_template.jinja
var ToolsChatTemplate string

// ToolsOptions size `posttrain demo --tools`: products of two Digits-digit numbers, which a model
// this small cannot compute in its head, and the built-in calculator tool.
type ToolsOptions struct {
	OutputDir string
	Seed      int
	Shape     ModelShape
	Digits    int
	// SFTProblems are the SFT conversations, ToolShare of them calling the calculator (the call,
	// its result, the product), the others answering the product at once; GRPOProblems the GRPO
	// prompts; HeldOut the evaluation prompts, neither seen in SFT.
	SFTProblems, GRPOProblems, HeldOut int
	ToolShare                          float64
	SFTSteps, SFTBatch                 int
	SFTLearningRate                    float64
	GRPOSteps, GRPOPrompts, NumGen     int
	GRPOLearningRate, Temperature      float64
	Beta                               float64
	MaxCompletionLength                int
	// Seeds is the number of seeds of each GRPO condition (Seed, Seed+1, ...).
	Seeds int
	// ReuseSFT keeps OutputDir/sft when it holds a model.
	ReuseSFT bool
}

// ToolsDefault is the configuration docs/demo.md's tools table comes from.
var ToolsDefault = ToolsOptions{
	OutputDir: filepath.Join("runs", "demo-tools"), Seed: 1,
	Shape:  ModelShape{Hidden: 128, Intermediate: 256, Layers: 2, Heads: 4, KVHeads: 2},
	Digits: 4, SFTProblems: 3000, GRPOProblems: 512, HeldOut: 64, ToolShare: 0.5,
	SFTSteps: 1200, SFTBatch: 32, SFTLearningRate: 3e-3,
	GRPOSteps: 40, GRPOPrompts: 4, NumGen: 8, GRPOLearningRate: 3e-4, Temperature: 1, Beta: 0.04,
	MaxCompletionLength: 64, Seeds: 2,
}

// ToolsConditions are the GRPO conditions of the tools demo, each from the same SFT model: the
// calculator tool with the verifier reward, the same without the tool (no schema in the prompt,
// no call executed), and the tool with the seeded random reward (the verifier logged beside it
// with weight 0) as the control.
var ToolsConditions = []struct{ Name, Dir string }{
	{"GRPO + calculator", "grpo-tools"},
	{"GRPO, no tools", "grpo-no-tools"},
	{"GRPO + calculator, random reward", "grpo-tools-random"},
}

// ToolsEval is an evaluation on the held-out prompts (GRPO's own: NumGen samples each at the
// training temperature, through the tool where the run has it): the verifier's accuracy and the
// tool calls per completion.
type ToolsEval struct {
	Accuracy, CallRate float64
}

// ToolsRun is one GRPO run of the tools demo: its evaluations before the first step and after
// the last, and its first and last logged training call rates.
type ToolsRun struct {
	Condition, Dir string
	Seed           int
	Before, After  ToolsEval
	FirstCallRate  float64
	LastCallRate   float64
	Wall           time.Duration
}

// ToolsReport is the tools demo's result.
type ToolsReport struct {
	SFT, Wall time.Duration
	Runs      []ToolsRun
}

// toolProblem is a×b with Digits-digit factors.
type toolProblem struct{ A, B int }

func (p toolProblem) expr() string    { return strconv.Itoa(p.A) + "*" + strconv.Itoa(p.B) }
func (p toolProblem) product() string { return strconv.Itoa(p.A * p.B) }

// toolProblems draws n distinct problems with digits-digit factors.
func toolProblems(n, digits int, seed uint64) ([]toolProblem, error) {
	if digits < 2 || digits > 8 {
		return nil, fmt.Errorf("demo --tools: digits must be in [2, 8], got %d", digits)
	}
	lo, hi := 1, 1
	for range digits - 1 {
		lo *= 10
	}
	hi = lo*10 - 1
	rng := rand.New(rand.NewPCG(seed, 0x7001))
	seen := map[toolProblem]bool{}
	var out []toolProblem
	for len(out) < n {
		p := toolProblem{lo + rng.IntN(hi-lo+1), lo + rng.IntN(hi-lo+1)}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// toolsPrompt is a problem's conversation: the demo's short system prompt and the bare product.
func toolsPrompt(p toolProblem) []chat.Message {
	return []chat.Message{{Role: "system", Content: SystemPrompt}, {Role: "user", Content: p.expr()}}
}

// toolsCompletion is a problem's SFT completion: with the calculator, the call (Qwen's
// tool_calls), the tool's result (the built-in calculator's own) and the product; without, the
// product at once.
func toolsCompletion(p toolProblem, calc tools.Set, call bool) ([]chat.Message, error) {
	answer := chat.Message{Role: "assistant", Content: p.product()}
	if !call {
		return []chat.Message{answer}, nil
	}
	args := map[string]any{"expression": p.expr()}
	result, failed := calc.Run(tools.Call{Name: "calculator", Arguments: args})
	if failed || result != p.product() {
		return nil, fmt.Errorf("demo --tools: the calculator gives %q for %s", result, p.expr())
	}
	tc, err := json.Marshal([]map[string]any{{"type": "function", "function": map[string]any{"name": "calculator", "arguments": args}}})
	if err != nil {
		return nil, err
	}
	return []chat.Message{{Role: "assistant", Extra: []chat.Field{{Key: "tool_calls", Value: tc}}}, encode.ToolMessage("calculator", result), answer}, nil
}

// RunTools is `posttrain demo --tools`: a tokenizer and a random Qwen2 model under ToolsChatTemplate,
// SFT on conversations of which ToolShare call the calculator, then each of ToolsConditions for
// Seeds seeds, each evaluated on the held-out problems before its first step and after its last.
func RunTools(ctx stdctx.Context, o ToolsOptions, env Env) (*ToolsReport, error) {
	start := time.Now()
	if env.Logger == nil {
		env.Logger = slog.Default()
	}
	if !(o.ToolShare > 0 && o.ToolShare < 1) {
		return nil, fmt.Errorf("demo --tools: the share of SFT conversations with a tool call must be in (0, 1), got %g", o.ToolShare)
	}
	all, err := toolProblems(o.SFTProblems+o.GRPOProblems+o.HeldOut, o.Digits, uint64(o.Seed))
	if err != nil {
		return nil, err
	}
	sftPs, grpoPs, held := all[:o.SFTProblems], all[o.SFTProblems:o.SFTProblems+o.GRPOProblems], all[o.SFTProblems+o.GRPOProblems:]
	calc, err := tools.Lookup([]string{"calculator"})
	if err != nil {
		return nil, err
	}
	schemas := calc.Schemas()
	ds := &data.Dataset{Path: "demo-tools-sft", Format: data.PromptCompletion, Conversational: true}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x7002))
	for _, p := range sftPs {
		c, err := toolsCompletion(p, calc, rng.Float64() < o.ToolShare)
		if err != nil {
			return nil, err
		}
		ds.Rows = append(ds.Rows, data.Row{Line: len(ds.Rows) + 1, Prompt: data.Text{Messages: toolsPrompt(p)}, Completion: data.Text{Messages: c}, Tools: schemas})
	}
	if err := claimToolsDir(o.OutputDir); err != nil {
		return nil, err
	}
	promptsDir := filepath.Join(o.OutputDir, PromptsDir)
	if err := os.MkdirAll(promptsDir, 0o755); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	rows := func(ps []toolProblem) []data.Row {
		out := make([]data.Row, len(ps))
		for i, p := range ps {
			out[i] = data.Row{Line: i + 1, Prompt: data.Text{Messages: toolsPrompt(p)}, Columns: map[string]any{"answer": p.product()}}
		}
		return out
	}
	heldPath := filepath.Join(promptsDir, "held-out.jsonl")
	for path, rs := range map[string][]data.Row{filepath.Join(promptsDir, "grpo.jsonl"): rows(grpoPs), heldPath: rows(held)} {
		var b bytes.Buffer
		if err := data.WriteJSONL(&b, data.PromptOnly, rs); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
	}
	rep := &ToolsReport{}
	sftDir := filepath.Join(o.OutputDir, "sft")
	if _, err := os.Stat(filepath.Join(sftDir, "config.json")); err != nil || !o.ReuseSFT {
		t0 := time.Now()
		tpl, err := chat.Parse(ToolsChatTemplate, map[string]string{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})
		if err != nil {
			return nil, fmt.Errorf("demo --tools: the chat template: %w", err)
		}
		var corpus []string
		for _, r := range ds.Rows {
			text, err := tpl.Render(append(append([]chat.Message(nil), r.Prompt.Messages...), r.Completion.Messages...), chat.Options{Tools: schemas})
			if err != nil {
				return nil, fmt.Errorf("demo --tools: %w", err)
			}
			corpus = append(corpus, text)
		}
		base, err := writeBase(o.OutputDir, o.Shape, uint64(o.Seed), corpus, ToolsChatTemplate)
		if err != nil {
			return nil, err
		}
		if err := trainSFT(ctx, env, base, sftDir, ds, sftSettings{"demo:tools-sft", o.SFTSteps, o.SFTBatch, o.SFTLearningRate, o.Seed}); err != nil {
			return nil, err
		}
		rep.SFT = time.Since(t0)
	}
	for k := range max(1, o.Seeds) {
		for _, c := range ToolsConditions {
			seed := o.Seed + k
			dir := filepath.Join(o.OutputDir, c.Dir+"-seed"+strconv.Itoa(seed))
			t0 := time.Now()
			run, err := runToolsGRPO(ctx, o, env, sftDir, dir, c.Dir, seed, rows(grpoPs), heldPath)
			if err != nil {
				return nil, err
			}
			run.Condition, run.Wall = c.Name, time.Since(t0)
			env.Logger.Info("demo --tools: "+c.Name, "seed", seed, "accuracy_before", run.Before.Accuracy, "accuracy_after", run.After.Accuracy,
				"call_rate_before", run.Before.CallRate, "call_rate_after", run.After.CallRate, "wall", run.Wall.Round(time.Second))
			rep.Runs = append(rep.Runs, *run)
		}
	}
	rep.Wall = time.Since(start)
	return rep, nil
}

// runToolsGRPO runs one condition (a ToolsConditions Dir) from the SFT model into dir, evaluating
// on the held-out prompts before the first step and after the last, and reads its report.
func runToolsGRPO(ctx stdctx.Context, o ToolsOptions, env Env, from, dir, condition string, seed int, train []data.Row, heldPath string) (*ToolsRun, error) {
	cfg := grpo.DefaultConfig()
	cfg.Model, cfg.Dataset, cfg.OutputDir = from, "demo:tools-grpo", dir
	cfg.RewardFuncs = []string{"mult_correct"}
	switch condition {
	case "grpo-tools":
		cfg.Tools = []string{"calculator"}
	case "grpo-no-tools":
	case "grpo-tools-random":
		cfg.Tools = []string{"calculator"}
		cfg.RewardFuncs, cfg.RewardWeights = []string{"random", "mult_correct"}, []float64{1, 0}
	default:
		return nil, fmt.Errorf("demo --tools: no condition %q", condition)
	}
	cfg.MaxToolCallingIterations = 2
	cfg.NumGenerations, cfg.PerDeviceTrainBatchSize = o.NumGen, o.GRPOPrompts*o.NumGen
	cfg.MaxCompletionLength, cfg.Temperature, cfg.Beta = o.MaxCompletionLength, o.Temperature, o.Beta
	cfg.MaxSteps, cfg.LearningRate, cfg.LRSchedulerType, cfg.WeightDecay = o.GRPOSteps, o.GRPOLearningRate, "constant", 0
	cfg.LoggingSteps, cfg.SaveSteps, cfg.Seed = 1, 0, seed
	cfg.EvalDataset, cfg.EvalStrategy, cfg.EvalSteps, cfg.EvalOnStart = heldPath, "steps", o.GRPOSteps, true
	cfg.PerDeviceEvalBatchSize = o.GRPOPrompts * o.NumGen
	if err := prepare(cfg, "grpo"); err != nil {
		return nil, err
	}
	if _, err := grpo.Run(ctx, cfg, from, grpo.RunOptions{Env: loop.Env{Backend: env.Backend, Logger: env.Logger, Progress: env.Progress}, Rows: train}); err != nil {
		return nil, fmt.Errorf("demo grpo (%s): %w", condition, err)
	}
	recs, err := runlog.ReadMetrics(dir)
	if err != nil {
		return nil, err
	}
	run := &ToolsRun{Dir: dir, Seed: seed}
	var evals, trains []runlog.Record
	for _, r := range recs {
		if r.IsEval() {
			evals = append(evals, r)
		} else if _, ok := r.Metrics["reward"]; ok {
			trains = append(trains, r)
		}
	}
	if len(evals) < 2 || len(trains) == 0 {
		return nil, fmt.Errorf("demo grpo (%s): %s has %d evaluations and %d training lines", condition, dir, len(evals), len(trains))
	}
	ev := func(r runlog.Record) ToolsEval {
		return ToolsEval{Accuracy: r.Metrics["eval_rewards/mult_correct/mean"], CallRate: r.Metrics["eval_tools/call_frequency"]}
	}
	run.Before, run.After = ev(evals[0]), ev(evals[len(evals)-1])
	run.FirstCallRate, run.LastCallRate = trains[0].Metrics["tools/call_frequency"], trains[len(trains)-1].Metrics["tools/call_frequency"]
	return run, nil
}

// claimToolsDir refuses an output directory that holds another demo's runs (its DirMark names a
// model, not the tools demo) and marks it as the tools demo's.
func claimToolsDir(dir string) error {
	var mark struct {
		Demo string `json:"demo"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, DirMark)); err == nil {
		if json.Unmarshal(b, &mark) != nil || mark.Demo != "tools" {
			return fmt.Errorf("demo --tools: --output-dir %s holds another demo's runs (%s), which this one would replace: give another --output-dir", dir, filepath.Join(dir, DirMark))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, DirMark), []byte(`{"demo": "tools"}`+"\n"), 0o644)
}
