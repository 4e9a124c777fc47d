package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/internal/tensorboard"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/schedule"
)

// driver is one run's state: the source, the optimizer, the schedule and the logs.
type driver struct {
	m       *trainable.Model
	src     Source
	hooks   Hooks     // nil: the source has none
	eval    Evaluator // nil: no evaluation
	opts    Options
	cfg     *config.Training
	logger  *slog.Logger
	opt     *Optimizer
	sched   schedule.Schedule
	total   int // optimizer steps of the run
	metrics *runlog.Metrics
	tb      *tensorboard.Run // nil: report_to has no tensorboard
	prog    *runlog.Progress
	began   time.Time

	step      int               // optimizer steps done
	history   []json.RawMessage // logged lines, for trainer_state.json
	lastSaved int
	fps       map[string]string // the inputs' fingerprints, saved in each checkpoint
	saved     []string
	last      runlog.Record
	unlock    func() // releases OUTPUT_DIR's lock (prepareOutput); nil before
}

func newDriver(m *trainable.Model, src Source, opts Options) (*driver, error) {
	if opts.Config == nil || opts.Backend == nil {
		return nil, fmt.Errorf("train: a configuration and a backend are required")
	}
	cfg := opts.Config.Common()
	if cfg.OutputDir == "" {
		return nil, fmt.Errorf("train: output_dir (--output-dir) is required")
	}
	d := &driver{m: m, src: src, opts: opts, cfg: cfg, logger: opts.Logger, total: src.TotalSteps()}
	if d.logger == nil {
		d.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	d.hooks, _ = src.(Hooks)
	if e, ok := src.(Evaluator); ok && cfg.Evaluates() && e.Evaluates() {
		d.eval = e
	}
	var err error
	if d.sched, err = cfg.Schedule(d.total); err != nil {
		return nil, err
	}
	hp := OptimizerFor(cfg)
	if d.opt, err = NewOptimizer(opts.Backend, m, hp, src.Loss); err != nil {
		return nil, err
	}
	if hp.Devices > 1 {
		attrs := []any{"devices", hp.Devices, "fsdp", hp.FSDP, "tensor_parallel", hp.TensorParallel, "state_bytes_per_device", d.opt.StateBytesPerDevice()}
		if split, whole, names := d.opt.Split(); split+whole > 0 {
			attrs = append(attrs, "tensors_split", split, "tensors_whole", whole)
			if whole > 0 {
				attrs = append(attrs, "whole", names)
			}
		}
		d.logger.Info("data parallel", attrs...)
	}
	d.opt.SetSeed(int64(cfg.Seed))
	return d, nil
}

func (d *driver) close() {
	if d.metrics != nil {
		d.metrics.Close()
	}
	if d.tb != nil {
		d.tb.Close()
	}
	if d.opt != nil {
		d.opt.Close()
	}
	if d.hooks != nil {
		d.hooks.Close()
	}
	if d.unlock != nil {
		d.unlock()
	}
}

// run is the loop: resume, then steps with logging, evaluation and checkpoints, then the final
// model.
func (d *driver) run(ctx context.Context) (*Result, error) {
	if err := d.start(); err != nil {
		return nil, err
	}
	res := &Result{OutputDir: d.cfg.OutputDir, Start: d.step}
	if p, ok := d.src.(Preflighter); ok {
		if err := p.Preflight(d.opt); err != nil {
			return nil, err
		}
		if err := d.opt.Discard(); err != nil {
			return nil, err
		}
	}
	if d.eval != nil && d.cfg.EvalOnStart { // HF's Trainer: before the first step, on a resume too
		if err := d.evaluate(); err != nil {
			return nil, err
		}
	}
	for d.step < d.total {
		if ctx.Err() != nil && d.canStop() {
			return d.interrupted(res, ctx)
		}
		if err := d.trainStep(); err != nil {
			return nil, d.faulted(err)
		}
		if err := d.afterStep(); err != nil {
			return nil, d.faulted(err)
		}
		if d.opts.AfterStep != nil {
			d.opts.AfterStep(d.step)
		}
	}
	d.prog.Done()
	if err := d.saveFinal(); err != nil {
		return nil, err
	}
	res.Steps, res.Last, res.Checkpoints, res.Elapsed = d.step, d.last, d.saved, time.Since(d.began)
	return res, nil
}

func (d *driver) canStop() bool {
	s, ok := d.src.(Stopper)
	return !ok || s.CanStop()
}

// trainStep runs one optimizer step: the source's micro-batches, then the update with the
// schedule's learning rate.
func (d *driver) trainStep() error {
	lr := d.sched.LR(d.step)
	acc := &stepAccumulator{opt: d.opt, d: d, lr: lr}
	if err := d.src.Accumulate(acc); err != nil {
		return err
	}
	if err := d.finite("loss", acc.loss); err != nil { // before the update: the weights stay finite
		return err
	}
	gnorm, err := d.opt.Apply(lr)
	if err != nil {
		return fmt.Errorf("step %d: %w", d.step+1, err)
	}
	if err := d.finite("grad_norm", gnorm); err != nil {
		return err
	}
	d.step++
	return d.src.Stepped(Update{Step: d.step, LR: lr, Loss: acc.loss, GradNorm: gnorm})
}

// finite stops the run at a non-finite loss or gradient norm of the step being done: the error
// names the step and the metric, and the run ends before the step is logged or saved, so no
// checkpoint or final model holds the non-finite weights and the last checkpoint saved (if any)
// stays the newest. HF's Trainer and TRL train on (their logs show loss nan and the saved model is
// NaN); posttrain stops, since no later step can recover from a NaN in the weights or the AdamW
// moments.
func (d *driver) finite(metric string, v float64) error {
	if !math.IsNaN(v) && !math.IsInf(v, 0) {
		return nil
	}
	last := "no checkpoint was saved"
	if d.lastSaved > 0 {
		last = "the last checkpoint is " + checkpoint.Dir(d.cfg.OutputDir, d.lastSaved)
	}
	return fmt.Errorf("step %d: %s is %g: training stopped, nothing saved of this step (%s)", d.step+1, metric, v, last)
}

// stepAccumulator sums the loss of a step's micro-batches (since its last Update).
type stepAccumulator struct {
	opt  *Optimizer
	loss float64
	d    *driver
	lr   float64 // the step's learning rate (Update's)
}

// Updater is the optional side of the Accumulator given to Source.Accumulate for a source that
// makes several optimizer updates in one driver step (PPO: num_ppo_epochs × num_mini_batches
// AdamW steps on one rollout batch, TRL's "update", which is its global_step and the unit of its
// LR schedule). Update applies AdamW to the gradients accumulated so far with the step's
// learning rate, as the driver does at the end of the step (with the same non-finite checks),
// and returns the global gradient norm before clipping; the driver's own update at the end of
// the step applies the micro-batches after the last Update.
type Updater interface {
	Update() (gradNorm float64, err error)
}

// Update implements Updater.
func (a *stepAccumulator) Update() (float64, error) {
	if err := a.d.finite("loss", a.loss); err != nil {
		return 0, err
	}
	gnorm, err := a.opt.Apply(a.lr)
	if err != nil {
		return 0, fmt.Errorf("step %d: %w", a.d.step+1, err)
	}
	if err := a.d.finite("grad_norm", gnorm); err != nil {
		return 0, err
	}
	a.loss = 0
	return gnorm, nil
}

func (a *stepAccumulator) Micro(in named.Feed, norm float64) (float64, map[string]float64, error) {
	l, ms, err := a.opt.Micro(in, norm)
	a.loss += l
	return l, ms, err
}

// afterStep logs, evaluates and saves as the cadence says for the step just done.
func (d *driver) afterStep() error {
	d.prog.Step(d.step)
	if d.step%max(1, d.cfg.LoggingSteps) == 0 || d.step == d.total {
		if err := d.log(); err != nil {
			return err
		}
	}
	if d.shouldEvaluate() {
		if err := d.evaluate(); err != nil {
			return err
		}
	}
	if (d.cfg.SaveSteps > 0 && d.step%d.cfg.SaveSteps == 0) || (d.step == d.total && !d.opts.NoFinalCheckpoint) {
		return d.save()
	}
	return nil
}

// faulted is err, and for a Fault it first saves a checkpoint of the last step done (unless it is
// saved already) and says where the run resumes from.
func (d *driver) faulted(err error) error {
	var f *Fault
	if !errors.As(err, &f) {
		return err
	}
	if d.step == 0 {
		return fmt.Errorf("%w: training stopped before its first step; nothing saved", err)
	}
	if err := d.opt.Discard(); err != nil {
		return err
	}
	if d.step > d.lastSaved {
		if serr := d.save(); serr != nil {
			return fmt.Errorf("%w (and saving step %d failed: %v)", err, d.step, serr)
		}
	}
	return fmt.Errorf("%w: training stopped; saved %s: continue with --resume once fixed", err, checkpoint.Dir(d.cfg.OutputDir, d.step))
}

// interrupted saves a checkpoint of the current step (unless it was just saved) and stops.
func (d *driver) interrupted(res *Result, ctx context.Context) (*Result, error) {
	d.prog.Done()
	res.Steps, res.Last, res.Interrupted, res.Elapsed = d.step, d.last, true, time.Since(d.began)
	if d.step == 0 {
		return res, fmt.Errorf("%w before the first step (%v): nothing saved", ErrInterrupted, context.Cause(ctx))
	}
	if d.step > d.lastSaved {
		if err := d.save(); err != nil {
			return nil, err
		}
	}
	res.Checkpoints = d.saved
	dir := checkpoint.Dir(d.cfg.OutputDir, d.step)
	return res, fmt.Errorf("%w at step %d (%v): saved %s; continue with --resume", ErrInterrupted, d.step, context.Cause(ctx), dir)
}

// start resumes if asked (after checking the checkpoint against this run), writes the resolved
// config, and opens the logs.
func (d *driver) start() error {
	var err error
	if d.fps, err = d.fingerprints(); err != nil {
		return err
	}
	dir, err := checkpoint.ResumeDir(d.cfg.OutputDir, d.cfg.Resume, d.cfg.ResumeFromCheckpoint)
	if err != nil {
		return err
	}
	if dir != "" {
		if err := d.resume(dir); err != nil {
			return fmt.Errorf("resume from %s: %w", dir, err)
		}
		d.logger.Info("resumed", "checkpoint", dir, "step", d.step)
		if d.cfg.ResumeFromCheckpoint == "" {
			// A run killed between saving its newest checkpoint and pruning the older ones left
			// more than save_total_limit: finish that rotation (only checkpoints older than dir go).
			if err := checkpoint.Prune(d.cfg.OutputDir, d.cfg.SaveTotalLimit, dir); err != nil {
				return err
			}
		}
	}
	// Written after the resume check, so that a refused resume leaves the previous run's file.
	if _, err := config.WriteResolved(d.opts.Config); err != nil {
		return err
	}
	if d.metrics, err = runlog.OpenMetrics(d.cfg.OutputDir, d.step); err != nil {
		return err
	}
	if d.cfg.ReportsTo("tensorboard") { // the same resume rule as metrics.jsonl
		if d.tb, err = tensorboard.OpenRun(d.cfg.OutputDir, d.step, time.Now()); err != nil {
			return err
		}
		d.logger.Info("report_to tensorboard", "logdir", d.tb.Dir())
	}
	w := d.opts.Progress
	if w == nil {
		w = io.Discard
	}
	d.prog = runlog.NewProgress(w, d.total, d.step)
	d.began = time.Now()
	if d.hooks != nil {
		return d.hooks.Begin(d.step, d.prog)
	}
	return nil
}

// log writes one metrics.jsonl line with the source's window metrics.
func (d *driver) log() error {
	epoch, _ := d.src.Epoch()
	rec := runlog.Record{Step: d.step, Epoch: epoch, Metrics: d.src.Log()}
	if err := d.write(rec); err != nil {
		return err
	}
	d.last = rec
	return nil
}

// write writes a metrics.jsonl line (training or eval) and its TensorBoard scalars (report_to
// tensorboard), keeps it for trainer_state.json, shows it and hands it to the source's hooks.
func (d *driver) write(rec runlog.Record) error {
	line, err := d.metrics.Write(rec)
	if err != nil {
		return err
	}
	if d.tb != nil {
		if err := d.tb.Write(rec); err != nil {
			return err
		}
	}
	d.history = append(d.history, line)
	d.prog.Log(rec)
	if d.hooks != nil {
		return d.hooks.Logged(rec)
	}
	return nil
}
