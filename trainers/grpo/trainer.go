package grpo

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/models/qwen2"
	"github.com/posttrain/posttrain/trainers/config"
	"github.com/posttrain/posttrain/trainers/loop"
	"github.com/posttrain/posttrain/trainers/schedule"
	"github.com/posttrain/posttrain/trainers/step"
)

// Setup is what a GRPO run needs besides its configuration: the policy (its weights, which the
// run updates in place through the shared loop's AdamW, loop.Optimizer), the tokenized prompts and
// the reward functions.
type Setup struct {
	Config  *config.GRPO // resolved and validated (config.FromCommand or Resolve+Validate)
	Backend backends.Backend
	// Model holds the policy; only Config and Ctx are needed (plus Dir and Tokenizer for saving
	// checkpoints with the tokenizer files).
	Model *loop.Model
	// Decoder turns completion ids into the text the reward functions see (special tokens skipped).
	Decoder generate.TextDecoder
	// StopIDs are every end-of-sequence id (config.json and generation_config.json, TRL #7039).
	StopIDs []int
	Prompts []*Prompt
	// EvalPrompts are the eval_dataset's prompts, read like Prompts; required when the
	// configuration evaluates (eval_strategy steps|epoch or eval_on_start), unused otherwise.
	EvalPrompts []*Prompt
	Rewards     []Reward
	// Logger receives events and guard-rail warnings; nil means slog.Default().
	Logger *slog.Logger
	// Progress, when set, shows a progress bar / log lines there.
	Progress io.Writer
	// OnStep, when set, is called after every optimizer step (tests, the demo).
	OnStep func(StepInfo)
}

// StepInfo is what one optimizer step reports to Setup.OnStep.
type StepInfo struct {
	Step     int
	Loss     float64
	GradNorm float64
	Metrics  map[string]float64 // the step's graph metrics (TRL names)
	Rollout  *Rollout           // the generation batch the step trained on
}

// Trainer runs GRPO on a Qwen2 policy.
type Trainer struct {
	s         Setup
	cfg       *config.GRPO
	log       *slog.Logger
	spec      *lossSpec
	gen       *generate.Generator
	opt       *loop.Optimizer
	oldEval   *step.Eval  // off-policy runs: π_old log-probs after generation
	refEval   *step.Eval  // β ≠ 0: the reference's log-probs (the frozen initial weights unless synced)
	ref       *loop.Model // sync_ref_model with β ≠ 0: the reference weights that syncReference mixes
	eval      *evaluator  // when the configuration evaluates
	sched     schedule.Schedule
	promptLen int // P of the batch layout

	stepBatch, genBatch, stepsPerGen int
	totalSteps                       int
	order                            []int // shuffled prompt order of the current epoch
	epoch, offset                    int
	round                            int
	tokensSeen                       int64
	globalStep                       int
	history                          []json.RawMessage // logged lines, for trainer_state.json
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
	t := &Trainer{s: s, cfg: cfg, log: s.Logger}
	if t.log == nil {
		t.log = slog.Default()
	}
	t.stepBatch = cfg.PerDeviceTrainBatchSize * cfg.GradientAccumulationSteps
	t.genBatch = cfg.PerDeviceTrainBatchSize * cfg.StepsPerGeneration
	t.stepsPerGen = cfg.NumIterations * cfg.StepsPerGeneration / cfg.GradientAccumulationSteps
	t.totalSteps = cfg.TotalSteps(len(s.Prompts) * cfg.NumGenerations)
	for _, p := range s.Prompts {
		if len(p.IDs) == 0 {
			return nil, fmt.Errorf("grpo: prompt %q has no tokens", p.Text)
		}
		if len(p.IDs) > cfg.MaxPromptLength { // TRL truncates prompts on the left
			p.IDs = p.IDs[len(p.IDs)-cfg.MaxPromptLength:]
		}
		t.promptLen = max(t.promptLen, len(p.IDs))
	}
	t.promptLen = (t.promptLen + 7) / 8 * 8 // one graph for every batch of the run
	var err error
	if t.sched, err = cfg.Schedule(t.totalSteps); err != nil {
		return nil, fmt.Errorf("grpo: %w", err)
	}
	t.spec = &lossSpec{
		Model: s.Model.Config, CompletionLen: cfg.MaxCompletionLength, Temperature: cfg.Temperature,
		Params:      Params{EpsLow: cfg.Epsilon, EpsHigh: cfg.EpsilonHigh, Delta: cfg.Delta, Beta: cfg.Beta},
		Ratio:       TokenRatio,
		LossType:    cfg.LossType,
		GradAccum:   cfg.GradientAccumulationSteps,
		OffPolicy:   OffPolicy(cfg),
		EntropyMask: cfg.TopEntropyQuantile < 1, TopEntropyQuantile: cfg.TopEntropyQuantile,
	}
	if cfg.ImportanceSamplingLevel == "sequence" {
		t.spec.Ratio = SequenceRatio
	}
	if err := t.compile(); err != nil {
		return nil, err
	}
	if cfg.Evaluates() {
		if t.eval, err = t.newEvaluator(s.EvalPrompts); err != nil {
			return nil, err
		}
	}
	SetRandomRewardSeed(uint64(cfg.Seed))
	return t, nil
}

// OffPolicy is TRL's rule for recomputing the old log-probs after generation (grpo_trainer.py
// L1413-1440): only when a generation batch is used for more than one optimizer step, i.e. when
// gradient_accumulation_steps % (steps_per_generation · num_iterations) ≠ 0. Otherwise the update
// is on-policy and the detached current log-probs serve as π_old (ratio 1).
func OffPolicy(cfg *config.GRPO) bool {
	return cfg.GradientAccumulationSteps%(cfg.StepsPerGeneration*cfg.NumIterations) != 0
}

// compile creates the optimizer, the generator and the forward-only scorers.
func (t *Trainer) compile() error {
	c, m := t.cfg, t.s.Model
	var err error
	t.opt, err = loop.NewOptimizer(t.s.Backend, m, loop.AdamW{Beta1: c.AdamBeta1, Beta2: c.AdamBeta2,
		Epsilon: c.AdamEpsilon, WeightDecay: c.WeightDecay, MaxGradNorm: c.MaxGradNorm}, t.spec.lossGraph)
	if err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	t.gen = generate.NewGenerator(t.s.Backend, m.Ctx, qwen2.Arch{Config: m.Config})
	if t.spec.OffPolicy {
		if t.oldEval, err = step.NewContextEval(t.s.Backend, m.Ctx, t.spec.scoreGraph); err != nil {
			return fmt.Errorf("grpo: old log-probs: %w", err)
		}
	}
	if c.SyncRefModel && c.Beta == 0 {
		// TRL: with beta 0 ref_model is None and SyncRefModelCallback.on_step_end does nothing.
		t.log.Info("grpo: sync_ref_model has no effect with beta 0: there is no reference model")
	}
	if c.Beta != 0 { // the reference is the initial policy, in a second context
		ref, err := t.newReference()
		if err != nil {
			return err
		}
		if t.refEval, err = step.NewContextEval(t.s.Backend, ref, t.spec.scoreGraph); err != nil {
			return fmt.Errorf("grpo: reference log-probs: %w", err)
		}
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
// new context, not trainable: a frozen reference policy.
func CloneWeights(ctx *context.Context) (*context.Context, error) {
	ref := context.New()
	n := 0
	for v := range ctx.IterVariables() {
		scope := v.Scope()
		if !(hasPrefix(scope, "/model") || hasPrefix(scope, "/lm_head")) {
			continue
		}
		val, err := v.Value()
		if err != nil {
			return nil, fmt.Errorf("grpo: reference weights: %s/%s: %w", scope, v.Name(), err)
		}
		c, err := val.LocalClone()
		if err != nil {
			return nil, fmt.Errorf("grpo: reference weights: %s/%s: %w", scope, v.Name(), err)
		}
		ref.InAbsPath(scope).Checked(false).VariableWithValue(v.Name(), c).SetTrainable(false)
		n++
	}
	if n == 0 {
		return nil, errors.New("grpo: reference weights: the model context has no /model variables")
	}
	return ref, nil
}

func hasPrefix(scope, p string) bool {
	return scope == p || len(scope) > len(p) && scope[:len(p)] == p && scope[len(p)] == '/'
}

// TotalSteps is the number of optimizer steps the run makes.
func (t *Trainer) TotalSteps() int { return t.totalSteps }

// trainStep runs one optimizer step on rows [lo, lo+stepBatch) of the rollout: one Micro per
// micro-batch of per_device_train_batch_size rows (gradients summed, each loss already divided by
// the step's normaliser), then the AdamW update. Metrics are averaged over the micro-batches,
// sampling_logp_difference/max is their maximum.
func (t *Trainer) trainStep(r *Rollout, lo int, lr float64) (loss, gradNorm float64, metrics []float64, err error) {
	c, mb := t.cfg.MaxCompletionLength, t.cfg.PerDeviceTrainBatchSize
	norm := t.spec.stepNorm(t.stepBatch, r.maskedTokens(lo, lo+t.stepBatch))
	metrics = make([]float64, numStepMetrics)
	for m := lo; m < lo+t.stepBatch; m += mb {
		b, err := r.batch(m, m+mb, t.promptLen, c)
		if err != nil {
			return 0, 0, nil, err
		}
		adv := make([]float32, mb)
		for i := range adv {
			adv[i] = float32(r.Advantages[m+i])
		}
		l, ms, err := t.opt.Micro([]any{b.IDs, b.Pos, b.Attn, b.Mask, adv, rows(r.OldLogp, m, m+mb, c),
			rows(r.RefLogp, m, m+mb, c), b.Sampled}, norm)
		if err != nil {
			return 0, 0, nil, err
		}
		loss += l
		for i, v := range ms {
			if i == mSampleDiffMax {
				metrics[i] = max(metrics[i], v)
			} else {
				metrics[i] += v / float64(t.cfg.GradientAccumulationSteps)
			}
		}
	}
	gradNorm, err = t.opt.Apply(lr)
	return loss, gradNorm, metrics, err
}

// Train runs the configured number of optimizer steps, resuming first when the configuration asks
// (resume / resume_from_checkpoint) and saving OUTPUT_DIR/checkpoint-N every save_steps. When ctx
// is cancelled it saves a checkpoint of the last completed step and returns an error wrapping
// loop.ErrInterrupted.
func (t *Trainer) Train(ctx stdctx.Context) (*Summary, error) {
	dir, err := checkpoint.ResumeDir(t.cfg.OutputDir, t.cfg.Resume, t.cfg.ResumeFromCheckpoint)
	if err != nil {
		return nil, err
	}
	if dir != "" {
		if err := t.resume(dir); err != nil {
			return nil, err
		}
	}
	logs, err := newRunLog(t, t.globalStep)
	if err != nil {
		return nil, err
	}
	defer logs.close()
	t.log.Info("grpo: start", "steps", t.totalSteps, "prompts", len(t.s.Prompts), "num_generations", t.cfg.NumGenerations,
		"generation_batch", t.genBatch, "step_batch", t.stepBatch, "off_policy", t.spec.OffPolicy, "beta", t.cfg.Beta,
		"loss_type", t.cfg.LossType, "advantage", t.cfg.Advantage)
	if t.eval != nil && t.cfg.EvalOnStart { // HF's Trainer: before the first step, on a resume too
		if err := t.evaluate(logs); err != nil {
			return logs.summary, err
		}
	}
	saved := t.globalStep
	for t.globalStep < t.totalSteps {
		if ctx.Err() != nil {
			if t.globalStep > saved {
				if _, err := t.save(); err != nil {
					return logs.summary, err
				}
			}
			return logs.summary, fmt.Errorf("grpo: stopped at step %d: %w", t.globalStep, loop.ErrInterrupted)
		}
		r, tm, err := t.rollout()
		if err != nil {
			return logs.summary, err
		}
		logs.addRollout(r, t.s.Rewards, tm, t.tokensSeen)
		for k := 0; k < t.stepsPerGen && t.globalStep < t.totalSteps; k++ {
			if err := t.optimizerStep(r, k, logs); err != nil {
				return logs.summary, err
			}
			if t.shouldEvaluate() {
				if err := t.evaluate(logs); err != nil {
					return logs.summary, err
				}
			}
			if t.cfg.SaveSteps > 0 && t.globalStep%t.cfg.SaveSteps == 0 {
				if _, err := t.save(); err != nil {
					return logs.summary, err
				}
				saved = t.globalStep
			}
		}
	}
	logs.done()
	return logs.summary, nil
}

// optimizerStep runs the k-th optimizer step on a generation batch and logs it.
func (t *Trainer) optimizerStep(r *Rollout, k int, logs *runLog) error {
	lo := (k % (t.cfg.StepsPerGeneration / t.cfg.GradientAccumulationSteps)) * t.stepBatch
	lr := t.sched.LR(t.globalStep)
	t0 := time.Now()
	loss, gradNorm, ms, err := t.trainStep(r, lo, lr)
	if err != nil {
		return fmt.Errorf("grpo: step %d: %w", t.globalStep+1, err)
	}
	t.globalStep++
	if t.ref != nil && t.globalStep%t.cfg.RefModelSyncSteps == 0 { // TRL: on_step_end, before log/eval/save
		if err := t.syncReference(); err != nil {
			return err
		}
	}
	info := StepInfo{Step: t.globalStep, Loss: loss, GradNorm: gradNorm, Metrics: map[string]float64{}, Rollout: r}
	for i, name := range stepMetricNames {
		if name != "kl" || t.cfg.Beta != 0 {
			info.Metrics[name] = ms[i]
		}
	}
	logs.addStep(info, lr, time.Since(t0), t.stepBatch)
	if t.s.OnStep != nil {
		t.s.OnStep(info)
	}
	if t.globalStep%t.cfg.LoggingSteps == 0 || t.globalStep == t.totalSteps {
		line, err := logs.flush(t.globalStep, t.epochAt(t.globalStep), r)
		if err != nil {
			return err
		}
		t.history = append(t.history, line)
	}
	return nil
}

// epochAt is the fractional epoch after step (HF's epoch: steps / steps per epoch).
func (t *Trainer) epochAt(step int) float64 {
	perEpoch := float64(len(t.s.Prompts)*t.cfg.NumGenerations) / float64(t.stepBatch)
	return float64(step) / max(perEpoch, 1)
}
