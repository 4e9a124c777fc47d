package loop

import (
	"fmt"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/engine/config"
)

// Warner is a Method with warnings about its examples (SFT: rows with no token to train on),
// which Run logs once, before training.
type Warner interface {
	Warnings() []string
}

// Sequential is a Method whose examples are visited in their own order at every pass, not in a
// shuffled one: TRL v0.24's KTOTrainer overrides HF's RandomSampler with a SequentialSampler
// (`_get_train_sampler`), because each row's KL completion was taken from its neighbour in a
// per_device_train_batch_size batch of that order.
type Sequential interface {
	Sequential() bool
}

// methodSource is a Method as a Source: fixed examples in a per-pass order drawn from the seed,
// each step up to gradient_accumulation_steps micro-batches of per_device_train_batch_size
// examples, normalised over the whole accumulated batch.
type methodSource struct {
	method Method
	cfg    *config.Training
	logger *slog.Logger
	prog   *runlog.Progress
	eval   *evaluator // nil: no evaluation (no eval set, or eval_strategy no without eval_on_start)
	n      int        // examples
	total  int        // optimizer steps of the run

	// Position: optimizer steps done, data cursor (pass, examples consumed in it), tokens seen.
	step          int
	epoch, offset int
	order         []int
	tokensSeen    int64
	endedEpoch    bool    // the last step ended a pass
	lr            float64 // the last update's learning rate
	win           window
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

func newMethodSource(m *trainable.Model, method Method, opts Options) (*methodSource, error) {
	if opts.Config == nil || opts.Backend == nil {
		return nil, fmt.Errorf("train: a configuration and a backend are required")
	}
	cfg := opts.Config.Common()
	s := &methodSource{method: method, cfg: cfg, logger: opts.Logger, n: method.NumExamples()}
	if s.logger == nil {
		s.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.OutputDir == "" {
		return nil, fmt.Errorf("train: output_dir (--output-dir) is required")
	}
	if s.n == 0 {
		return nil, fmt.Errorf("train: no training examples")
	}
	if w, ok := method.(Warner); ok {
		for _, msg := range w.Warnings() {
			s.logger.Warn(msg)
		}
	}
	s.total = cfg.TotalSteps(s.n)
	if opts.Eval != nil && cfg.Evaluates() {
		var err error
		if s.eval, err = newEvaluator(opts.Backend, m, opts.Eval, cfg.PerDeviceEvalBatchSize); err != nil {
			return nil, err
		}
	}
	s.win.Sums = map[string]float64{}
	s.order = s.passOrder(0)
	return s, nil
}

// passOrder is the order of the examples in pass epoch: Order's permutation, or 0, 1, …, n−1 for
// a Sequential method.
func (s *methodSource) passOrder(epoch int) []int {
	if q, ok := s.method.(Sequential); ok && q.Sequential() {
		order := make([]int, s.n)
		for i := range order {
			order[i] = i
		}
		return order
	}
	return Order(s.n, s.cfg.Seed, epoch)
}

func (s *methodSource) Loss(ctx *mlctx.Context, in named.Inputs, norm *graph.Node) (*graph.Node, map[string]*graph.Node) {
	return s.method.Loss(ctx, in, norm)
}

func (s *methodSource) TotalSteps() int { return s.total }

// Begin says what is trained.
func (s *methodSource) Begin(_ int, prog *runlog.Progress) error {
	s.prog = prog
	s.logger.Info("training", "run", describe(s.cfg, s.n, s.total), "output_dir", s.cfg.OutputDir)
	return nil
}

func describe(c *config.Training, n, total int) string {
	if c.TensorParallel {
		return fmt.Sprintf("%d examples, %d steps, batch %d × %d accumulation, projections split over %d devices", n, total, c.PerDeviceTrainBatchSize, c.GradientAccumulationSteps, c.DeviceCount())
	}
	if c.DeviceCount() > 1 {
		return fmt.Sprintf("%d examples, %d steps, batch %d × %d devices × %d accumulation", n, total, c.PerDeviceTrainBatchSize, c.DeviceCount(), c.GradientAccumulationSteps)
	}
	return fmt.Sprintf("%d examples, %d steps, batch %d × %d accumulation", n, total, c.PerDeviceTrainBatchSize, c.GradientAccumulationSteps)
}

// Preflight runs the largest micro-batch the data can make (the per_device_train_batch_size
// examples with the most tokens, padded to their length bucket) through the gradient graph once
// (the driver discards its gradients): that shape is compiled and its memory taken before the
// first step, so a batch that does not fit fails now, naming its size, not when it comes up hours
// later (TRL #2927, unsloth #1624: out of memory only when a long sample arrives). The weights,
// the AdamW state and the data order are untouched.
func (s *methodSource) Preflight(acc Accumulator) error {
	idx := make([]int, s.n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return s.method.Tokens(b) - s.method.Tokens(a) })
	idx = idx[:min(s.n, s.cfg.MicroBatch())]
	start := time.Now()
	fail := func(err error) error {
		return fmt.Errorf("the largest micro-batch (%d examples of up to %d tokens) does not run: %w", len(idx), s.method.Tokens(idx[0]), err)
	}
	inputs, err := s.method.Batch(idx)
	if err != nil {
		return fail(err)
	}
	if _, _, err := acc.Micro(inputs, 1); err != nil {
		return fail(err)
	}
	s.logger.Info("preflight: the largest micro-batch runs", "examples", len(idx), "max_tokens", s.method.Tokens(idx[0]),
		"seconds", time.Since(start).Seconds())
	return nil
}

// Accumulate runs up to gradient_accumulation_steps micro-batches of the current pass.
func (s *methodSource) Accumulate(acc Accumulator) error {
	if err := s.accumulate(acc); err != nil {
		return fmt.Errorf("step %d: %w", s.step+1, err)
	}
	return nil
}

func (s *methodSource) accumulate(acc Accumulator) error {
	b, ga := s.cfg.MicroBatch(), s.cfg.GradientAccumulationSteps
	var micros [][]int
	norm, items := 0.0, 0.0 // the step's units; the loss's divisor (Itemizer's items, else the units)
	itemizer, _ := s.method.(Itemizer)
	for len(micros) < ga && s.offset+len(micros)*b < s.n {
		lo := s.offset + len(micros)*b
		mb := s.order[lo:min(s.n, lo+b)]
		micros = append(micros, mb)
		for _, i := range mb {
			u := s.method.Units(i)
			norm += u
			if itemizer != nil {
				u = itemizer.Items(i)
			}
			items += u
		}
	}
	if norm == 0 {
		// Only SFT's units can be 0 (rows whose scored tokens are all cut away, which New
		// warned about): TRL's loss is 0 too, or NaN where num_items_in_batch is 0 as well (no
		// first token carrying a label, Itemizer); here it is 0.
		s.logger.Warn(fmt.Sprintf("step %d: no row of the accumulated batch has a token to train on: its loss is 0 and the update is AdamW's momentum and weight decay only", s.step+1),
			"micro_batches", len(micros))
	}
	for _, mb := range micros {
		inputs, err := s.method.Batch(mb)
		if err != nil {
			return err
		}
		_, ms, err := acc.Micro(inputs, max(items, 1))
		if err != nil {
			return err
		}
		for name, v := range ms {
			s.win.Sums[name] += v
		}
		s.win.MicroBatches++
		for _, i := range mb {
			s.tokensSeen += int64(s.method.Tokens(i))
		}
		s.offset += len(mb)
	}
	return nil
}

// Stepped records the step in the window and starts the next pass when this one is done.
func (s *methodSource) Stepped(u Update) error {
	s.step = u.Step
	s.win.LossSum += u.Loss
	s.win.Steps++
	s.win.GradNorm = u.GradNorm
	s.lr = u.LR
	s.endedEpoch = s.offset >= s.n
	if s.endedEpoch {
		s.epoch, s.offset = s.epoch+1, 0
		s.order = s.passOrder(s.epoch)
	}
	return nil
}

// Epoch is HF's fractional epoch: passes done + micro-batches done in this pass / per pass.
func (s *methodSource) Epoch() (float64, bool) {
	b := s.cfg.MicroBatch()
	perPass := (s.n + b - 1) / b
	return float64(s.epoch) + float64((s.offset+b-1)/b)/float64(perPass), s.endedEpoch
}

// Log returns the window's loss (mean over its steps), the last step's gradient norm and learning
// rate (transformers 4.57's Trainer logs the rate the update used: _get_learning_rate() before
// lr_scheduler.step()) and the method's metrics (its Finisher, or the mean over the
// micro-batches), and starts a new window.
func (s *methodSource) Log() map[string]float64 {
	ms := map[string]float64{
		"loss":          s.win.LossSum / float64(max(1, s.win.Steps)),
		"grad_norm":     s.win.GradNorm,
		"learning_rate": s.lr,
	}
	for k, v := range windowMetrics(s.method, Window{Sums: s.win.Sums, MicroBatches: s.win.MicroBatches, TokensSeen: s.tokensSeen}) {
		ms[k] = v
	}
	s.win = window{Sums: map[string]float64{}}
	return ms
}

func (s *methodSource) Evaluates() bool { return s.eval != nil }

// Evaluate runs the eval Method's forward pass over the eval set (evaluator.run).
func (s *methodSource) Evaluate() (map[string]float64, error) {
	ms, err := s.eval.run(s.tokensSeen)
	if err != nil {
		return nil, fmt.Errorf("evaluate at step %d: %w", s.step, err)
	}
	return ms, nil
}

// Logged shows an eval line's summary above the progress bar.
func (s *methodSource) Logged(rec runlog.Record) error {
	if rec.IsEval() && s.prog.Terminal {
		fmt.Fprintf(s.prog, "eval step %d: eval_loss %.4g (%d examples, %.3gs)\n", rec.Step, rec.Metrics["eval_loss"],
			s.eval.method.NumExamples(), rec.Metrics["eval_runtime"])
	}
	return nil
}

func (s *methodSource) Close() {
	if s.eval != nil {
		s.eval.close()
	}
}
