package grpo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/rl"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
	"github.com/posttrain/posttrain/trainers/engine/step"
)

// Evaluation during training, as TRL v0.24's GRPOTrainer does it (docs/grpo.md, "Evaluation"):
// the eval prompts, each repeated num_generations times (_get_eval_sampler: RepeatSampler with
// mini_repeat_count = num_generations), are cut into per_device_eval_batch_size batches; each
// batch is generated, rewarded and scored on its own (_prepare_inputs in eval mode: no buffering,
// no reuse), with the current weights and no update (prediction_step: compute_loss under
// no_grad). Every metric is appended once per batch and log() averages them with the "eval_"
// prefix; eval_loss is HF's evaluation_loop mean of the batch losses weighted by batch size.

// EvalCompletionsName is the file next to completions.jsonl that receives every completion of
// every evaluation.
const EvalCompletionsName = "eval_completions.jsonl"

// evalSeedStream separates the eval sampler's random streams from the training rollouts'.
const evalSeedStream = 0x6576616c // "eval"

// evaluator is the GRPO eval pass: its prompts in a fixed order, their batch layout and the
// forward-only loss graph.
type evaluator struct {
	prompts   []*Prompt
	order     []int // fixed shuffled order (TRL's eval RepeatSampler is seeded with args.seed)
	promptLen int   // P of the eval batch layout
	spec      *lossSpec
	loss      *step.ContextEval // inputs MicroBatch and evalNorm; outputs evalLoss and the step metrics
}

// The eval loss graph's input beside MicroBatch (the step normaliser) and its output beside the
// step metrics (whose TRL names never collide with either: they are neither capitalised nor "loss").
const (
	evalNorm = "norm"
	evalLoss = "loss"
)

// newEvaluator prepares the eval prompts (left-truncated to max_prompt_length like the training
// ones) and the forward-only loss: the training loss with gradient_accumulation_steps 1 (each
// eval batch is a whole batch; TRL divides grpo/bnpo/dr_grpo by the stale training value, see
// docs/grpo.md) and on-policy (π_old = the current weights, ratio 1: nothing was updated since
// generation).
func (t *Trainer) newEvaluator(prompts []*Prompt) (*evaluator, error) {
	c := t.cfg
	if len(prompts) == 0 {
		return nil, errors.New("grpo: eval_dataset: no prompts")
	}
	if c.PerDeviceEvalBatchSize < 1 || c.PerDeviceEvalBatchSize%c.NumGenerations != 0 {
		return nil, fmt.Errorf("grpo: per_device_eval_batch_size (%d) must be divisible by num_generations (%d)",
			c.PerDeviceEvalBatchSize, c.NumGenerations)
	}
	e := &evaluator{prompts: prompts, order: loop.Order(len(prompts), c.Seed, 0)}
	for i, p := range prompts {
		if len(p.IDs) == 0 {
			return nil, fmt.Errorf("grpo: eval_dataset: prompt %d has no tokens", i+1)
		}
		if len(p.IDs) > c.MaxPromptLength {
			p.IDs = p.IDs[len(p.IDs)-c.MaxPromptLength:]
		}
		e.promptLen = max(e.promptLen, len(p.IDs))
	}
	e.promptLen = (e.promptLen + 7) / 8 * 8
	spec := *t.spec
	spec.GradAccum, spec.StepsPerGeneration, spec.OffPolicy = 1, 1, false
	e.spec = &spec
	var err error
	e.loss, err = step.NewContextEval(t.s.Backend, t.s.Model.Ctx, func(ctx *context.Context, in named.Inputs) map[string]*graph.Node {
		loss, ms := e.spec.lossGraph(ctx, in.Without(evalNorm), in.Get(evalNorm))
		ms[evalLoss] = loss
		return ms
	})
	if err != nil {
		return nil, fmt.Errorf("grpo: eval loss: %w", err)
	}
	return e, nil
}

// endedEpoch reports whether step crossed an integer epoch of epochAt, in integer arithmetic.
func (t *Trainer) endedEpoch(step int) bool {
	per := t.epochRows()
	return step > 0 && step*t.stepBatch/per > (step-1)*t.stepBatch/per
}

// evalSeed is the sampler seed of eval batch b at a step: a function of the run's seed, the step
// and the batch only, so an evaluation draws the same completions whenever it runs (after a
// resume too) and shares no stream with the training rollouts.
func evalSeed(seed, step, b int) uint64 {
	return splitMix(splitMix(uint64(seed)^evalSeedStream<<32) ^ uint64(step)<<20 ^ uint64(b))
}

// Evaluates reports whether the run evaluates (the configuration says so; New then requires the
// eval prompts).
func (s source) Evaluates() bool { return s.eval != nil }

// Evaluate runs the eval pass on the current weights and returns the metrics of its eval line;
// the completions go to eval_completions.jsonl with the line (loggedEval). It changes nothing the
// training reads: no weight, no optimizer state, no sampler stream, no token count, no
// random-reward call number.
func (s source) Evaluate() (map[string]float64, error) {
	t := s.Trainer
	start := time.Now()
	if t.random != nil {
		calls := t.random.Calls
		defer func() { t.random.Calls = calls }()
	}
	e, c := t.eval, t.cfg
	perBatch := c.PerDeviceEvalBatchSize / c.NumGenerations
	window := map[string][]float64{}
	var lossSum float64
	var n, batches int
	var lines []runlog.Completion
	err := rollout.Chunks(len(e.order), perBatch, func(lo, hi int) error {
		var prompts []*Prompt
		for _, i := range e.order[lo:hi] {
			for range c.NumGenerations {
				prompts = append(prompts, e.prompts[i])
			}
		}
		r, loss, ms, err := t.evalBatch(prompts, evalSeed(c.Seed, t.globalStep, batches))
		if err != nil {
			return fmt.Errorf("grpo: evaluate at step %d: %w", t.globalStep, err)
		}
		for k, v := range ms {
			window[k] = append(window[k], v)
		}
		lossSum += loss * float64(r.Len())
		n += r.Len()
		batches++
		lines = append(lines, evalCompletionLines(t.globalStep, r, t.s.Rewards)...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := map[string]float64{"eval_loss": lossSum / float64(n)}
	for k, vs := range window {
		out["eval_"+k] = mean(vs)
	}
	secs := time.Since(start).Seconds() // HF's speed_metrics
	out["eval_runtime"] = math.Round(secs*1e4) / 1e4
	out["eval_samples_per_second"] = math.Round(float64(n)/secs*1e3) / 1e3
	out["eval_steps_per_second"] = math.Round(float64(batches)/secs*1e3) / 1e3
	t.logs.evalLines = lines
	return out, nil
}

// evalBatch generates, rewards and scores one eval batch and returns its rollout, its loss (the
// batch's own mean, as compute_loss returns it) and its metrics under TRL's names.
func (t *Trainer) evalBatch(prompts []*Prompt, seed uint64) (*Scored, float64, map[string]float64, error) {
	c, e := t.cfg, t.eval
	prompts, gens, turns, err := t.generate(prompts, seed)
	if err != nil {
		return nil, 0, nil, err
	}
	r := newScored(prompts, gens, c.MaskTruncatedCompletions, turns)
	if err := scoreRewards(r, t.s.Rewards, t.rewardState()); err != nil {
		return nil, 0, nil, &loop.Fault{Err: fmt.Errorf("evaluation after step %d: %w", t.globalStep, err)}
	}
	if err := advantages(r, c.NumGenerations, rl.ScaleRewards(c.ScaleRewards), c.Advantage); err != nil {
		return nil, 0, nil, err
	}
	if t.refEval != nil {
		if r.RefLogp, err = t.scoreLayout(t.refEval, r, e.promptLen, r.Len()); err != nil {
			return nil, 0, nil, fmt.Errorf("reference log-probs: %w", err)
		}
	}
	pw, cw := r.widths(0, r.Len(), e.promptLen, c.MaxCompletionLength)
	b, err := r.batch(0, r.Len(), pw, cw)
	if err != nil {
		return nil, 0, nil, err
	}
	adv := make([]float32, r.Len())
	for i, a := range r.Advantages {
		adv[i] = float32(a)
	}
	norm := e.spec.stepNorm(r.Len(), r.completionTokens())
	in := MicroBatch[any]{Sequences: b.Sequences, Mask: b.Mask, Advantages: adv,
		OldLogProbs: rows(nil, 0, r.Len(), cw), RefLogProbs: rows(r.RefLogp, 0, r.Len(), cw),
		SampledLogProbs: b.Sampled}
	outs, err := e.loss.Run(named.Of[any](in).With(evalNorm, float32(norm)))
	if err != nil {
		return nil, 0, nil, err
	}
	ms := rewardMetrics(r, t.s.Rewards)
	for k, v := range r.lengthStats() {
		ms[k] = v
	}
	for k, v := range r.toolMetrics() {
		ms[k] = v
	}
	for name, v := range outs {
		if name != evalLoss && (name != "kl" || c.Beta != 0) {
			ms[name] = step.ScalarValue(v)
		}
	}
	return r, step.ScalarValue(outs[evalLoss]), ms, nil
}

// evalCompletionLines are the eval_completions.jsonl lines of an eval batch: every completion.
func evalCompletionLines(step int, r *Scored, rewards []Reward) []runlog.Completion {
	out := make([]runlog.Completion, r.Len())
	for i := range out {
		rw := map[string]float64{}
		for _, f := range rewards {
			rw[f.Name] = r.FuncRewards[f.Name][i]
		}
		out[i] = runlog.Completion{Step: step, Prompt: r.Prompts[i].Text, Completion: r.Texts[i], Rewards: rw, Advantage: r.Advantages[i], Conversation: r.conversation(i)}
	}
	return out
}

// loggedEval writes the completions of the evaluation whose line the driver just wrote to
// eval_completions.jsonl.
func (t *Trainer) loggedEval(rec runlog.Record) error {
	lines := t.logs.evalLines
	t.logs.evalLines = nil
	var buf []byte
	for _, c := range lines {
		b, err := c.MarshalJSON()
		if err != nil {
			return fmt.Errorf("grpo: %s: %w", EvalCompletionsName, err)
		}
		buf = append(append(buf, b...), '\n')
	}
	if _, err := t.logs.evalCompletions.Write(buf); err != nil {
		return fmt.Errorf("grpo: write %s: %w", EvalCompletionsName, err)
	}
	t.log.Info("grpo: eval", "step", rec.Step, "eval_reward", rec.Metrics["eval_reward"], "eval_loss", rec.Metrics["eval_loss"],
		"prompts", len(t.eval.prompts), "completions", len(lines), "runtime_s", rec.Metrics["eval_runtime"])
	return nil
}

// openEvalCompletions opens OUTPUT_DIR/eval_completions.jsonl with completions.jsonl's resume
// rule: a fresh run starts it afresh; a resumed one keeps the lines of steps ≤ resumeStep.
func openEvalCompletions(dir string, resumeStep int) (*os.File, error) {
	path := filepath.Join(dir, EvalCompletionsName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	var kept []byte
	if resumeStep > 0 {
		data, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("resume %s: %w", path, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var head struct {
				Step *int `json:"step"`
			}
			if json.Unmarshal(sc.Bytes(), &head) == nil && head.Step != nil && *head.Step <= resumeStep {
				kept = append(append(kept, sc.Bytes()...), '\n')
			}
		}
	}
	if err := os.WriteFile(path, kept, 0o644); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
}
