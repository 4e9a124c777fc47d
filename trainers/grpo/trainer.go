package grpo

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/shard"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
	"github.com/posttrain/posttrain/trainers/engine/step"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Setup is what a GRPO run needs besides its configuration: the policy (its weights, which the
// run updates in place through the training driver's AdamW, trainers/engine/loop), the tokenized prompts
// and the reward functions.
type Setup struct {
	Config  *Config // resolved and validated (config.FromCommand or Resolve+Validate)
	Backend backends.Backend
	// Model holds the policy; only Config and Ctx are needed (plus Dir and Tokenizer for saving
	// checkpoints with the tokenizer files).
	Model *trainable.Model
	// Decoder turns completion ids into the text the reward functions see (special tokens skipped).
	Decoder generate.TextDecoder
	// StopIDs are every end-of-sequence id (config.json and generation_config.json, TRL #7039).
	StopIDs []int
	Prompts []*Prompt
	// EvalPrompts are the eval_dataset's prompts, read like Prompts; required when the
	// configuration evaluates (eval_strategy steps|epoch or eval_on_start), unused otherwise.
	EvalPrompts []*Prompt
	Rewards     []Reward
	// Tools, when set, makes the rollouts multi-turn: the completions' tool calls are run and
	// generation continues after their results (tools.go).
	Tools *Tools
	// Environment, when set, resets an instance per rollout before each generation batch, and
	// its methods are the rollout's tools (env.go); Tools must be set too (its Set may be empty).
	Environment *Environment
	// Logger receives events and guard-rail warnings; nil means slog.Default().
	Logger *slog.Logger
	// Progress, when set, shows a progress bar / log lines there.
	Progress io.Writer
	// OnStep, when set, is called after every optimizer step (tests, the demo).
	OnStep func(StepInfo)
	// firstTurns, when set, replaces the generation of the completions' first turns (the
	// multi-turn parity test scripts tool calls with it; the tool turns' continuations are the
	// model's).
	firstTurns generateFn
}

// StepInfo is what one optimizer step reports to Setup.OnStep.
type StepInfo struct {
	Step     int
	Loss     float64
	GradNorm float64
	Metrics  map[string]float64 // the step's graph metrics (TRL names)
	Scored   *Scored            // the generation batch the step trained on
}

// Trainer runs GRPO on a policy of any decoder family. Train hands it to the training driver (trainers/engine/loop) as a
// step source: before an optimizer step it generates and rewards a generation batch when the last
// one is used up (every num_iterations × steps_per_generation / gradient_accumulation_steps steps),
// then feeds the step's rows of that batch as micro-batches; the driver owns the steps, the
// schedule, logging, evaluation and checkpoint cadence, resume and Ctrl-C.
type Trainer struct {
	s         Setup
	cfg       *Config
	log       *slog.Logger
	spec      *lossSpec
	gen       *generate.Generator
	random    *RandomReward     // the run's "random" reward stream, if it uses that reward
	oldEval   *step.ContextEval // off-policy runs: π_old log-probs after generation
	refEval   *step.ContextEval // β ≠ 0: the reference's log-probs (the frozen initial weights unless synced)
	ref       *trainable.Model  // sync_ref_model with β ≠ 0: the reference weights that syncReference mixes
	refCtx    *context.Context  // β ≠ 0: the context refEval reads (the policy's own under PEFT)
	eval      *evaluator        // when the configuration evaluates
	promptLen int               // P of the batch layout

	stepBatch, genBatch, stepsPerGen int
	totalSteps                       int
	cursor                           *rollout.Cursor // the training prompts' seeded order
	round                            int
	tokensSeen                       int64
	globalStep                       int

	// The generation batch being trained on, the optimizer steps made on it, and the step in
	// progress: when its update began and its graph metrics.
	batch       *Scored
	batchSteps  int
	stepStart   time.Time
	stepMetrics map[string]float64
	logs        runLog
}

// New checks the setup and compiles nothing yet (graphs are built on first use).
func New(s Setup) (*Trainer, error) {
	cfg := s.Config
	switch {
	case cfg == nil || s.Backend == nil || s.Model == nil || s.Model.Ctx == nil || s.Model.Config == nil:
		return nil, errors.New("grpo: config, backend and model are required")
	case len(s.Prompts) == 0:
		return nil, errors.New("grpo: no prompts")
	case len(s.Rewards) == 0:
		return nil, errors.New("grpo: no reward function")
	case cfg.StepsPerGeneration%cfg.GradientAccumulationSteps != 0:
		return nil, fmt.Errorf("grpo: steps_per_generation (%d) must be a multiple of gradient_accumulation_steps (%d)",
			cfg.StepsPerGeneration, cfg.GradientAccumulationSteps)
	}
	t := &Trainer{s: s, cfg: cfg, log: s.Logger, logs: runLog{window: map[string][]float64{}, streak: map[string]int{}},
		cursor: rollout.NewCursor(len(s.Prompts), cfg.Seed)}
	if t.log == nil {
		t.log = slog.Default()
	}
	t.stepBatch = cfg.MicroBatch() * cfg.GradientAccumulationSteps
	t.genBatch = cfg.MicroBatch() * cfg.StepsPerGeneration
	t.stepsPerGen = cfg.NumIterations * cfg.StepsPerGeneration / cfg.GradientAccumulationSteps
	t.totalSteps = cfg.TotalSteps(t.epochRows())
	for _, p := range s.Prompts {
		if len(p.IDs) == 0 {
			return nil, fmt.Errorf("grpo: prompt %q has no tokens", p.Text)
		}
		if len(p.IDs) > cfg.MaxPromptLength { // TRL truncates prompts on the left
			p.IDs = p.IDs[len(p.IDs)-cfg.MaxPromptLength:]
		}
		t.promptLen = max(t.promptLen, len(p.IDs))
	}
	// Refused here, before any graph or output: the generator would refuse the first batch.
	if m := s.Model.Config.MaxPositionEmbeddings; m > 0 && cfg.MaxCompletionLength > m-t.promptLen {
		return nil, fmt.Errorf("grpo: max_completion_length (--max-completion-length) %d + the longest prompt's %d tokens exceed the model's max_position_embeddings %d",
			cfg.MaxCompletionLength, t.promptLen, m)
	}
	t.promptLen = (t.promptLen + 7) / 8 * 8 // the widest prompt a batch is padded to (Scored.widths)
	// The driver builds the schedule; a configuration it would refuse is refused here already.
	if _, err := cfg.Schedule(t.totalSteps); err != nil {
		return nil, fmt.Errorf("grpo: %w", err)
	}
	t.spec = &lossSpec{
		Model: s.Model.Config, CompletionLen: cfg.MaxCompletionLength, Temperature: cfg.Temperature,
		Params: Params{EpsLow: cfg.Epsilon, EpsHigh: cfg.EpsilonHigh, Delta: cfg.Delta, Beta: cfg.Beta,
			Surrogate: surrogate(cfg.LossType), BiasCorrectionKL: cfg.UseBiasCorrectionKL, SAPOTempPos: cfg.SAPOTemperaturePos, SAPOTempNeg: cfg.SAPOTemperatureNeg,
			VESPO: VESPOParams{KPos: cfg.VESPOKPos, LambdaPos: cfg.VESPOLambdaPos, KNeg: cfg.VESPOKNeg, LambdaNeg: cfg.VESPOLambdaNeg}},
		Ratio:              TokenRatio,
		LossType:           cfg.LossType,
		GradAccum:          cfg.GradientAccumulationSteps,
		StepsPerGeneration: cfg.StepsPerGeneration,
		DAPOPerStep:        cfg.DAPONormalizer == "per_step",
		OffPolicy:          OffPolicy(cfg),
		EntropyMask:        cfg.TopEntropyQuantile < 1, TopEntropyQuantile: cfg.TopEntropyQuantile,
	}
	if s.Tools != nil { // the gap per turn: up to max_tool_calling_iterations+1 turns, 4 at most
		t.spec.Turns = 4
		if n := cfg.MaxToolCallingIterations; n > 0 && n < 3 {
			t.spec.Turns = n + 1
		}
	}
	if cfg.ImportanceSamplingLevel == "sequence" {
		t.spec.Ratio = SequenceRatio
	}
	if err := t.compile(); err != nil {
		return nil, err
	}
	if cfg.Evaluates() {
		var err error
		if t.eval, err = t.newEvaluator(s.EvalPrompts); err != nil {
			return nil, err
		}
	}
	if t.random = randomStream(s.Rewards); t.random != nil { // the run's stream, from its start
		t.random.Seed, t.random.Calls = uint64(cfg.Seed), 0
	}
	return t, nil
}

// surrogate is Params.Surrogate for a loss type: TRL 1.x's cispo, sapo and vespo have their own
// policy term; the others (luspo too) clip.
func surrogate(lossType string) string {
	switch lossType {
	case "cispo", "sapo", "vespo":
		return lossType
	}
	return ""
}

// OffPolicy is TRL's rule for recomputing the old log-probs after generation (grpo_trainer.py
// L1413-1440): only when a generation batch is used for more than one optimizer step, i.e. when
// gradient_accumulation_steps % (steps_per_generation · num_iterations) ≠ 0. Otherwise the update
// is on-policy and the detached current log-probs serve as π_old (ratio 1).
func OffPolicy(cfg *Config) bool {
	return cfg.GradientAccumulationSteps%(cfg.StepsPerGeneration*cfg.NumIterations) != 0
}

// compile creates the generator and the forward-only scorers (the driver creates the optimizer).
func (t *Trainer) compile() error {
	c, m := t.cfg, t.s.Model
	var err error
	t.gen = generate.NewGenerator(t.s.Backend, m.Ctx, decoder.Arch{Config: m.Config})
	if t.spec.OffPolicy {
		if t.oldEval, err = step.NewContextEval(t.s.Backend, m.Ctx, t.spec.scoreGraph); err != nil {
			return fmt.Errorf("grpo: old log-probs: %w", err)
		}
	}
	if c.SyncRefModel && c.Beta == 0 {
		// TRL: with beta 0 ref_model is None and SyncRefModelCallback.on_step_end does nothing.
		t.log.Info("grpo: sync_ref_model has no effect with beta 0: there is no reference model")
	}
	if c.Beta != 0 && m.Adapter != nil { // PEFT: the policy with its adapter disabled, no copy
		if c.SyncRefModel {
			return errors.New("grpo: sync_ref_model (--sync-ref-model) needs a reference model of its own, which use_peft (--use-peft) does not keep (TRL: the reference is the base model with the adapter disabled)")
		}
		t.refCtx = m.Ctx
		if t.refEval, err = step.NewContextEval(t.s.Backend, m.Ctx, t.spec.baseScoreGraph); err != nil {
			return fmt.Errorf("grpo: reference log-probs: %w", err)
		}
	} else if c.Beta != 0 { // the reference is the initial policy, in a second context
		ref, err := t.newReference()
		if err != nil {
			return err
		}
		t.refCtx = ref
		if t.refEval, err = step.NewContextEval(t.s.Backend, ref, t.spec.scoreGraph); err != nil {
			return fmt.Errorf("grpo: reference log-probs: %w", err)
		}
	}
	return t.splitRows()
}

// splitRows, with --devices N > 1, splits the generation, the old and reference scoring and the
// reward models over the devices the driver splits the update over (internal/shard): each
// generated or scored row on one device, per_device_train_batch_size rows of a scoring pass on
// each, the weights replicated.
func (t *Trainer) splitRows() error {
	parts := []shard.Splitter{t.gen}
	for _, e := range []*step.ContextEval{t.oldEval, t.refEval} {
		if e != nil {
			parts = append(parts, e)
		}
	}
	for _, rw := range t.s.Rewards {
		if rw.Scorer != nil {
			parts = append(parts, rw.Scorer)
		}
	}
	if err := shard.SplitAll(t.s.Backend, t.cfg.DeviceCount(), parts...); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	return nil
}

// newReference returns the reference context: a frozen clone of the weights, or, with
// sync_ref_model, the compute-dtype weights of t.ref, which syncReference updates.
func (t *Trainer) newReference() (*context.Context, error) {
	if !t.cfg.SyncRefModel {
		return CloneWeights(t.s.Model.Ctx)
	}
	var err error
	if t.ref, err = newSyncedReference(t.s.Model); err != nil {
		return nil, err
	}
	return t.ref.Ctx, nil
}

// CloneWeights copies the model weights of ctx (the variables under /model and /lm_head) into a
// new context, not trainable: a frozen reference policy (trainable.CloneWeights).
func CloneWeights(ctx *context.Context) (*context.Context, error) {
	ref, err := trainable.CloneWeights(ctx)
	if err != nil {
		return nil, fmt.Errorf("grpo: %w", err)
	}
	return ref, nil
}

func hasPrefix(scope, p string) bool {
	return scope == p || len(scope) > len(p) && scope[:len(p)] == p && scope[len(p)] == '/'
}

// TotalSteps is the number of optimizer steps the run makes.
func (t *Trainer) TotalSteps() int { return t.totalSteps }

// Train runs the configured number of optimizer steps with the training driver (trainers/engine/loop):
// resuming first when the configuration asks (resume / resume_from_checkpoint), logging to
// metrics.jsonl and completions.jsonl, evaluating, saving OUTPUT_DIR/checkpoint-N every save_steps,
// and the final model into OUTPUT_DIR. When ctx is cancelled it stops before the next generation
// batch, saves a checkpoint of the last completed step and returns an error wrapping
// loop.ErrInterrupted.
func (t *Trainer) Train(ctx stdctx.Context) (*loop.Result, error) {
	res, err := loop.Train(ctx, t.s.Model, source{t}, loop.Options{Config: t.cfg, Backend: t.s.Backend,
		Progress: t.s.Progress, Logger: t.log, NoFinalCheckpoint: true})
	if errors.Is(err, loop.ErrInterrupted) && res != nil { // GRPO's message, as before the driver
		return res, fmt.Errorf("grpo: stopped at step %d: %w", res.Steps, loop.ErrInterrupted)
	}
	return res, err
}

// source is the Trainer as the driver's step source (loop.Source and its optional interfaces).
type source struct{ *Trainer }

// Loss is the GRPO loss of a micro-batch of a rollout (lossSpec.lossGraph).
func (s source) Loss(ctx *context.Context, in named.Inputs, norm *graph.Node) (*graph.Node, map[string]*graph.Node) {
	return s.spec.lossGraph(ctx, in, norm)
}

// CanStop reports whether the generation batch is used up: rollouts are not checkpointed (as in
// TRL), so a run stops and saves only between them.
func (s source) CanStop() bool { return s.batch == nil || s.batchSteps >= s.stepsPerGen }

// Accumulate generates, rewards and scores a generation batch when the last one is used up, then
// runs the next optimizer step's rows of it as micro-batches.
func (s source) Accumulate(acc loop.Accumulator) error {
	t := s.Trainer
	if s.CanStop() {
		round, epoch, offset, tokens := t.round, t.cursor.Epoch, t.cursor.Offset, t.tokensSeen
		var calls uint64
		if t.random != nil {
			calls = t.random.Calls
		}
		r, tm, err := t.rollout()
		if err != nil {
			// A reward's failure (a loop.Fault) ends the run with a checkpoint of the last step:
			// the position is put back so that the resumed run generates this batch again.
			t.round, t.tokensSeen = round, tokens
			t.cursor.Seek(epoch, offset)
			if t.random != nil {
				t.random.Calls = calls
			}
			return err
		}
		t.logs.addRollout(r, t.s.Rewards, tm, t.tokensSeen)
		t.batch, t.batchSteps = r, 0
	}
	lo := (t.batchSteps % (t.cfg.StepsPerGeneration / t.cfg.GradientAccumulationSteps)) * t.stepBatch
	t.stepStart = time.Now()
	ms, err := t.accumulate(acc, t.batch, lo)
	if err != nil {
		return fmt.Errorf("grpo: step %d: %w", t.globalStep+1, err)
	}
	t.stepMetrics, t.batchSteps = ms, t.batchSteps+1
	return nil
}

// accumulate runs rows [lo, lo+stepBatch) of the rollout as one optimizer step's micro-batches:
// one acc.Micro per micro-batch of per_device_train_batch_size rows (gradients summed, each loss
// already divided by the step's normaliser). Metrics are averaged over the micro-batches,
// sampling_logp_difference/max is their maximum.
func (t *Trainer) accumulate(acc loop.Accumulator, r *Scored, lo int) (map[string]float64, error) {
	mb := t.cfg.MicroBatch()
	norm := t.spec.stepNorm(t.stepBatch, r.completionTokens())
	metrics := map[string]float64{}
	for m := lo; m < lo+t.stepBatch; m += mb {
		p, c := r.widths(m, m+mb, t.promptLen, t.cfg.MaxCompletionLength)
		b, err := r.batch(m, m+mb, p, c)
		if err != nil {
			return nil, err
		}
		adv := make([]float32, mb)
		for i := range adv {
			adv[i] = float32(r.Advantages[m+i])
		}
		_, ms, err := acc.Micro(named.Of[any](MicroBatch[any]{Sequences: b.Sequences, Mask: b.Mask, Advantages: adv,
			OldLogProbs: rows(r.OldLogp, m, m+mb, c), RefLogProbs: rows(r.RefLogp, m, m+mb, c), SampledLogProbs: b.Sampled}), norm)
		if err != nil {
			return nil, err
		}
		for name, v := range ms {
			if isMaxMetric(name) {
				metrics[name] = max(metrics[name], v)
			} else {
				metrics[name] += v / float64(t.cfg.GradientAccumulationSteps)
			}
		}
	}
	return metrics, nil
}

// Stepped syncs the reference when the step is a multiple of ref_model_sync_steps (TRL: on_step_end,
// before log/eval/save) and records the step's metrics.
func (s source) Stepped(u loop.Update) error {
	t := s.Trainer
	t.globalStep = u.Step
	if t.ref != nil && t.globalStep%t.cfg.RefModelSyncSteps == 0 {
		if err := t.syncReference(); err != nil {
			return err
		}
	}
	info := StepInfo{Step: t.globalStep, Loss: u.Loss, GradNorm: u.GradNorm, Metrics: map[string]float64{}, Scored: t.batch}
	for name, v := range t.stepMetrics {
		if name != "kl" || t.cfg.Beta != 0 {
			info.Metrics[name] = v
		}
	}
	t.logs.addStep(info, u.LR, time.Since(t.stepStart), t.stepBatch*(t.promptLen+t.cfg.MaxCompletionLength))
	if t.s.OnStep != nil {
		t.s.OnStep(info)
	}
	return nil
}

// Epoch is HF's fractional epoch after the last step (steps / steps per epoch) and whether that
// step crossed an integer epoch.
func (s source) Epoch() (float64, bool) { return s.epochAt(s.globalStep), s.endedEpoch(s.globalStep) }

// epochRows is the training rows of one epoch: every prompt's num_generations completions, each
// trained on num_iterations times. It is the length of TRL's RepeatSampler (which repeats a
// generation batch num_iterations × steps_per_generation times, read one micro-batch of
// per_device_train_batch_size × steps_per_generation a time) in micro-batches of
// per_device_train_batch_size, so HF counts num_train_epochs and the logged epoch over it; TRL
// drops the prompts past a whole number of generation batches each epoch, posttrain's cursor runs
// on into the next epoch instead, so the two agree when the prompts fill whole generation batches.
func (t *Trainer) epochRows() int {
	return len(t.s.Prompts) * t.cfg.NumGenerations * t.cfg.NumIterations
}

// epochAt is the fractional epoch after step (HF's epoch: steps / steps per epoch).
func (t *Trainer) epochAt(step int) float64 {
	perEpoch := float64(t.epochRows()) / float64(t.stepBatch)
	return float64(step) / max(perEpoch, 1)
}
