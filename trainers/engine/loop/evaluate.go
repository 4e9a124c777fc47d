package loop

import (
	"fmt"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"math"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/step"
)

// WithEval pairs a training Method with the Method of its eval set (the same trainer built on
// the eval rows), for callers that hand Run a single Method; Run unwraps it into Options.Eval.
func WithEval(train, eval Method) Method { return &withEval{Method: train, eval: eval} }

type withEval struct {
	Method
	eval Method
}

// evaluator is the forward-only pass over the eval set (HF's Trainer.evaluate): the eval
// Method's own Loss graph, without gradients or an update, over the whole set in
// per_device_eval_batch_size batches in dataset order (HF's SequentialSampler).
type evaluator struct {
	method Method
	batch  int
	exec   *context.Exec
	sig    named.Signature // the method's inputs and "norm"; its metrics
}

func newEvaluator(backend backends.Backend, m *trainable.Model, method Method, batch int) (*evaluator, error) {
	if method.NumExamples() == 0 {
		return nil, fmt.Errorf("eval: no evaluation examples")
	}
	e := &evaluator{method: method, batch: batch}
	err := step.Catch("build evaluation graph", func() error {
		var err error
		e.exec, err = context.NewExec(backend, m.Ctx.Reuse(), func(ctx *context.Context, inputs []*Node) []*Node {
			in := e.sig.Inputs(inputs)
			loss, metrics := method.Loss(ctx, in.Without(normInput), in.Get(normInput))
			out := []*Node{ConvertDType(StopGradient(loss), dtypes.Float64)}
			return append(out, e.sig.Outputs(named.FromMap(step.Float64Metrics(metrics)))...)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	e.exec.SetMaxCache(-1)
	return e, nil
}

// run evaluates the current weights and returns the metrics with HF's "eval_" prefix. The other
// metrics aggregate the eval set as the micro-batches of one accumulated training batch (each
// batch's graph divides by the set's total Units: its loss tokens for SFT, its rows for DPO/KTO;
// then the trainer's window metrics, Finisher or mean). eval_loss is HF's evaluation_loop value:
// each batch's own loss (its mean over its Units, what compute_loss returns without
// num_items_in_batch) repeated batch-size times and averaged over the examples,
//
//	eval_loss = Σ_b n_b·(Σ_{i∈b} ℓ_i / Σ_{i∈b} u_i) / Σ_b n_b,
//
// so for SFT it depends on per_device_eval_batch_size exactly as in TRL (DPO and KTO, one unit
// per row: the mean over the rows). A batch without units (no scored token) adds 0.
// tokensSeen is the training tokens so far (TRL logs eval_num_tokens as the train count).
func (e *evaluator) run(tokensSeen int64) (map[string]float64, error) {
	start := time.Now()
	n := e.method.NumExamples()
	norm := 0.0
	for i := range n {
		norm += e.method.Units(i)
	}
	w := Window{Sums: map[string]float64{}, TokensSeen: tokensSeen}
	loss := 0.0
	for lo := 0; lo < n; lo += e.batch {
		idx := make([]int, 0, e.batch)
		for i := lo; i < min(n, lo+e.batch); i++ {
			idx = append(idx, i)
		}
		inputs, err := e.method.Batch(idx)
		if err != nil {
			return nil, err
		}
		var outs []*tensors.Tensor
		if err := step.Catch("evaluate", func() error {
			args, err := e.sig.Args(inputs.With(normInput, float32(max(norm, 1))))
			if err != nil {
				return err
			}
			outs, err = e.exec.Exec(args...)
			return err
		}); err != nil {
			return nil, err
		}
		ms, err := e.sig.Results(outs[1:])
		if err != nil {
			return nil, fmt.Errorf("evaluate: %w", err)
		}
		units := 0.0
		for _, i := range idx {
			units += e.method.Units(i)
		}
		if units > 0 { // the graph's loss is Σ_{i∈b} ℓ_i / norm
			loss += step.ScalarValue(outs[0]) * max(norm, 1) / units * float64(len(idx))
		}
		for name, v := range step.MetricValues(ms) {
			w.Sums[name] += v
		}
		w.MicroBatches++
	}
	out := map[string]float64{"eval_loss": loss / float64(n)}
	for k, v := range windowMetrics(e.method, w) {
		out["eval_"+k] = v
	}
	// HF's speed_metrics: runtime rounded to 4 decimals, rates to 3.
	secs := time.Since(start).Seconds()
	out["eval_runtime"] = math.Round(secs*1e4) / 1e4
	out["eval_samples_per_second"] = math.Round(float64(n)/secs*1e3) / 1e3
	out["eval_steps_per_second"] = math.Round(float64(w.MicroBatches)/secs*1e3) / 1e3
	return out, nil
}

// windowMetrics are a method's logged metrics over a window: its Finisher, or the plain mean
// over the micro-batches of each metric its Loss returned.
func windowMetrics(method Method, w Window) map[string]float64 {
	if f, ok := method.(Finisher); ok {
		return f.Finish(w)
	}
	out := map[string]float64{}
	for name := range w.Sums {
		out[name] = w.Mean(name)
	}
	return out
}

func (e *evaluator) close() { e.exec.Finalize() }

// shouldEvaluate reports whether the step just done ends with an evaluation, as HF's
// DefaultFlowCallback decides: eval_strategy steps when the step is a multiple of eval_steps
// (not at the last step otherwise); epoch when the step ended a pass over the data, or ended
// training inside a pass (the Trainer's epoch loop still calls on_epoch_end after max_steps).
func (d *driver) shouldEvaluate() bool {
	if d.eval == nil {
		return false
	}
	switch d.cfg.EvalStrategy {
	case "steps":
		return d.step%d.cfg.EvalEvery() == 0
	case "epoch":
		_, ended := d.src.Epoch()
		return ended || d.step == d.total
	}
	return false
}

// evaluate writes one metrics.jsonl line with the source's eval metrics at the current step and
// epoch (HF's Trainer.log adds both to the evaluate() metrics), and shows it.
func (d *driver) evaluate() error {
	ms, err := d.eval.Evaluate()
	if err != nil {
		return err
	}
	// A NaN eval_loss (the model's logits on the eval set are not finite) was logged as a metric
	// and training went on; GRPO's and PPO's evaluations generate, and the generator stops at a
	// non-finite log-prob itself.
	if v, ok := ms["eval_loss"]; ok && (math.IsNaN(v) || math.IsInf(v, 0)) {
		last := "no checkpoint was saved"
		if d.lastSaved > 0 {
			last = "the last checkpoint is " + checkpoint.Dir(d.cfg.OutputDir, d.lastSaved)
		}
		return fmt.Errorf("step %d: evaluation: eval_loss is %g: the model's logits on the eval set are not finite; training stopped (%s)", d.step, v, last)
	}
	epoch, _ := d.src.Epoch()
	return d.write(runlog.Record{Step: d.step, Epoch: epoch, Metrics: ms})
}

// WithEvalData reads the configuration's eval_dataset when the run evaluates (eval_strategy steps
// or epoch, or eval_on_start), builds its Method with build (the same trainer constructor as the
// training set's) and pairs it with train (WithEval). Otherwise it returns train as is: like
// TRL's scripts, which pass no eval split with eval_strategy "no", the file is not even read.
// read are the training set's reading options (SFT's dataset_text_field).
func WithEvalData(train Method, c *config.Training, read data.ReadOptions, build func(*data.Dataset) (Method, error)) (Method, error) {
	if !c.Evaluates() {
		return train, nil
	}
	path, split := c.EvalSource()
	read.Split = split
	if path == c.Dataset {
		read.Config = c.DatasetConfig
	}
	d, err := data.ReadFileWith(path, read)
	if err != nil {
		return nil, fmt.Errorf("eval_dataset: %w", err)
	}
	eval, err := build(d)
	if err != nil {
		return nil, fmt.Errorf("eval_dataset: %w", err)
	}
	return WithEval(train, eval), nil
}
