package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/config"
	"github.com/posttrain/posttrain/trainers/schedule"
)

// trainer is one run's state.
type trainer struct {
	m       *Model
	method  Method
	opts    Options
	cfg     *config.Training
	logger  *slog.Logger
	opt     *Optimizer
	sched   schedule.Schedule
	n       int // examples
	total   int // optimizer steps of the run
	metrics *runlog.Metrics
	prog    *runlog.Progress
	eval    *evaluator // nil: no evaluation (no eval set, or eval_strategy no without eval_on_start)

	// Position: optimizer steps done, data cursor (pass, examples consumed in it), tokens seen.
	step          int
	epoch, offset int
	order         []int
	tokensSeen    int64
	win           window
	history       []json.RawMessage
	lastSaved     int
	saved         []string
	last          runlog.Record
}

// window accumulates what is logged at the next logging step; it is checkpointed so that a
// resumed run logs the same lines as an uninterrupted one.
type window struct {
	Sums         map[string]float64 `json:"sums"`
	MicroBatches int                `json:"micro_batches"`
	LossSum      float64            `json:"loss_sum"`
	Steps        int                `json:"steps"`
	GradNorm     float64            `json:"grad_norm"`
}

func newTrainer(m *Model, method Method, opts Options) (*trainer, error) {
	if opts.Config == nil || opts.Backend == nil {
		return nil, fmt.Errorf("train: a configuration and a backend are required")
	}
	cfg := opts.Config.Common()
	if cfg.OutputDir == "" {
		return nil, fmt.Errorf("train: output_dir (--output-dir) is required")
	}
	t := &trainer{m: m, method: method, opts: opts, cfg: cfg, logger: opts.Logger, n: method.NumExamples()}
	if t.logger == nil {
		t.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if t.n == 0 {
		return nil, fmt.Errorf("train: no training examples")
	}
	t.total = cfg.TotalSteps(t.n)
	var err error
	if t.sched, err = cfg.Schedule(t.total); err != nil {
		return nil, err
	}
	hp := AdamW{Beta1: cfg.AdamBeta1, Beta2: cfg.AdamBeta2, Epsilon: cfg.AdamEpsilon, WeightDecay: cfg.WeightDecay, MaxGradNorm: cfg.MaxGradNorm}
	if t.opt, err = NewOptimizer(opts.Backend, m, hp, method.Loss); err != nil {
		return nil, err
	}
	if opts.Eval != nil && cfg.Evaluates() {
		if t.eval, err = newEvaluator(opts.Backend, m, opts.Eval, cfg.PerDeviceEvalBatchSize); err != nil {
			t.opt.Close()
			return nil, err
		}
	}
	t.win.Sums = map[string]float64{}
	t.order = Order(t.n, cfg.Seed, 0)
	return t, nil
}

func (t *trainer) close() {
	if t.metrics != nil {
		t.metrics.Close()
	}
	if t.opt != nil {
		t.opt.Close()
	}
	if t.eval != nil {
		t.eval.close()
	}
}

// run is the loop: resume, then steps with logging and checkpoints, then the final save.
func (t *trainer) run(ctx context.Context) (*Result, error) {
	if err := t.start(); err != nil {
		return nil, err
	}
	res := &Result{OutputDir: t.cfg.OutputDir}
	if err := t.preflight(); err != nil {
		return nil, err
	}
	if t.eval != nil && t.cfg.EvalOnStart {
		if err := t.evaluate(); err != nil {
			return nil, err
		}
	}
	for t.step < t.total {
		if ctx.Err() != nil {
			return t.interrupted(res, ctx)
		}
		pass := t.epoch
		if err := t.trainStep(); err != nil {
			return nil, fmt.Errorf("step %d: %w", t.step+1, err)
		}
		t.prog.Step(t.step)
		if t.step%max(1, t.cfg.LoggingSteps) == 0 || t.step == t.total {
			if err := t.log(); err != nil {
				return nil, err
			}
		}
		if t.shouldEvaluate(t.epoch != pass) {
			if err := t.evaluate(); err != nil {
				return nil, err
			}
		}
		if (t.cfg.SaveSteps > 0 && t.step%t.cfg.SaveSteps == 0) || t.step == t.total {
			if err := t.save(); err != nil {
				return nil, err
			}
		}
		if t.opts.AfterStep != nil {
			t.opts.AfterStep(t.step)
		}
	}
	t.prog.Done()
	if err := t.saveFinal(); err != nil {
		return nil, err
	}
	res.Steps, res.Last, res.Checkpoints = t.step, t.last, t.saved
	return res, nil
}

// interrupted saves a checkpoint of the current step (unless it was just saved) and stops.
func (t *trainer) interrupted(res *Result, ctx context.Context) (*Result, error) {
	t.prog.Done()
	res.Steps, res.Last, res.Interrupted = t.step, t.last, true
	if t.step == 0 {
		return res, fmt.Errorf("%w before the first step (%v): nothing saved", ErrInterrupted, context.Cause(ctx))
	}
	if t.step > t.lastSaved {
		if err := t.save(); err != nil {
			return nil, err
		}
	}
	res.Checkpoints = t.saved
	dir := checkpoint.Dir(t.cfg.OutputDir, t.step)
	return res, fmt.Errorf("%w at step %d (%v): saved %s; continue with --resume", ErrInterrupted, t.step, context.Cause(ctx), dir)
}

// start writes the resolved config, resumes if asked, and opens the logs.
func (t *trainer) start() error {
	if _, err := config.WriteResolved(t.opts.Config); err != nil {
		return err
	}
	dir, err := checkpoint.ResumeDir(t.cfg.OutputDir, t.cfg.Resume, t.cfg.ResumeFromCheckpoint)
	if err != nil {
		return err
	}
	if dir != "" {
		if err := t.resume(dir); err != nil {
			return fmt.Errorf("resume from %s: %w", dir, err)
		}
		t.logger.Info("resumed", "checkpoint", dir, "step", t.step)
	}
	if t.metrics, err = runlog.OpenMetrics(t.cfg.OutputDir, t.step); err != nil {
		return err
	}
	w := t.opts.Progress
	if w == nil {
		w = io.Discard
	}
	t.prog = runlog.NewProgress(w, t.total, t.step)
	t.logger.Info("training", "run", describe(t.cfg, t.n, t.total), "output_dir", t.cfg.OutputDir)
	return nil
}

// preflight runs the largest micro-batch the data can make (the per_device_train_batch_size
// examples with the most tokens, padded to their length bucket) through the gradient graph once
// and discards its gradients: that shape is compiled and its memory taken before the first step,
// so a batch that does not fit fails now, naming its size, not when it comes up hours later
// (TRL #2927, unsloth #1624: out of memory only when a long sample arrives). The weights, the
// AdamW state and the data order are untouched.
func (t *trainer) preflight() error {
	idx := make([]int, t.n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return t.method.Tokens(b) - t.method.Tokens(a) })
	idx = idx[:min(t.n, t.cfg.PerDeviceTrainBatchSize)]
	start := time.Now()
	fail := func(err error) error {
		return fmt.Errorf("the largest micro-batch (%d examples of up to %d tokens) does not run: %w", len(idx), t.method.Tokens(idx[0]), err)
	}
	inputs, err := t.method.Batch(idx)
	if err != nil {
		return fail(err)
	}
	if _, _, err := t.opt.Micro(inputs, 1); err != nil {
		return fail(err)
	}
	if err := t.opt.Discard(); err != nil {
		return err
	}
	t.logger.Info("preflight: the largest micro-batch runs", "examples", len(idx), "max_tokens", t.method.Tokens(idx[0]),
		"seconds", time.Since(start).Seconds())
	return nil
}

// trainStep runs one optimizer step: up to gradient_accumulation_steps micro-batches of the
// current pass, then the update.
func (t *trainer) trainStep() error {
	b, ga := t.cfg.PerDeviceTrainBatchSize, t.cfg.GradientAccumulationSteps
	var micros [][]int
	norm := 0.0
	for len(micros) < ga && t.offset+len(micros)*b < t.n {
		lo := t.offset + len(micros)*b
		mb := t.order[lo:min(t.n, lo+b)]
		micros = append(micros, mb)
		for _, i := range mb {
			norm += t.method.Units(i)
		}
	}
	loss := 0.0
	for _, mb := range micros {
		inputs, err := t.method.Batch(mb)
		if err != nil {
			return err
		}
		l, ms, err := t.opt.Micro(inputs, max(norm, 1))
		if err != nil {
			return err
		}
		loss += l
		for i, name := range t.method.MetricNames() {
			t.win.Sums[name] += ms[i]
		}
		t.win.MicroBatches++
		for _, i := range mb {
			t.tokensSeen += int64(t.method.Tokens(i))
		}
		t.offset += len(mb)
	}
	gnorm, err := t.opt.Apply(t.sched.LR(t.step))
	if err != nil {
		return err
	}
	t.step++
	t.win.LossSum += loss
	t.win.Steps++
	t.win.GradNorm = gnorm
	if t.offset >= t.n {
		t.epoch, t.offset = t.epoch+1, 0
		t.order = Order(t.n, t.cfg.Seed, t.epoch)
	}
	return nil
}

// epochFloat is HF's fractional epoch: passes done + micro-batches done in this pass / per pass.
func (t *trainer) epochFloat() float64 {
	b := t.cfg.PerDeviceTrainBatchSize
	perPass := (t.n + b - 1) / b
	return float64(t.epoch) + float64((t.offset+b-1)/b)/float64(perPass)
}

// log writes one metrics.jsonl line for the window and starts a new one.
func (t *trainer) log() error {
	rec := runlog.Record{Step: t.step, Epoch: t.epochFloat(), Metrics: map[string]float64{
		"loss":          t.win.LossSum / float64(max(1, t.win.Steps)),
		"grad_norm":     t.win.GradNorm,
		"learning_rate": t.sched.LR(t.step),
	}}
	w := Window{Sums: t.win.Sums, MicroBatches: t.win.MicroBatches, TokensSeen: t.tokensSeen}
	if f, ok := t.method.(Finisher); ok {
		for k, v := range f.Finish(w) {
			rec.Metrics[k] = v
		}
	} else {
		for _, name := range t.method.MetricNames() {
			rec.Metrics[name] = w.Mean(name)
		}
	}
	line, err := t.metrics.Write(rec)
	if err != nil {
		return err
	}
	t.history = append(t.history, line)
	t.prog.Log(rec)
	t.last = rec
	t.win = window{Sums: map[string]float64{}}
	return nil
}
