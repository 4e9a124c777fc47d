package loop

import (
	"fmt"
	"github.com/posttrain/posttrain/trainers/engine/trainable"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/lora"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/step"
)

// Scopes of the optimizer's float32 state, beside the model's weights in the same context.
const (
	GradScope     = step.GradScope     // gradients summed over the micro-batches of a step
	ExpAvgScope   = step.ExpAvgScope   // AdamW first moment (PyTorch's exp_avg)
	ExpAvgSqScope = step.ExpAvgSqScope // AdamW second moment (exp_avg_sq)
)

// OptimizerConfig selects the update and its hyper-parameters: by default PyTorch's
// torch.optim.AdamW (HF Trainer's default optimizer; WeightDecay 0 is Adam), or with Optimizer
// step.Plain the plain gradient step θ ← θ − lr·g (the betas, epsilon and weight decay unused,
// no moments kept). The update rule is trainers/engine/step's, the one the toys' steps run.
type OptimizerConfig struct {
	Optimizer                          step.Optimizer // step.AdamW (the zero value) or step.Plain
	Beta1, Beta2, Epsilon, WeightDecay float64
	MaxGradNorm                        float64 // > 0: clip the global gradient norm (clip_grad_norm_)
	// Devices > 1 splits each micro-batch over the backend's first Devices devices along the batch
	// axis (devices.go); 0 or 1: the single-device graphs.
	Devices int
	// FSDP (with Devices > 1) splits the trained weights, masters, accumulators and moments over
	// the devices along their first axis (devices.go).
	FSDP bool
	// TensorParallel (with Devices > 1) splits the attention and MLP projections over the devices
	// and gives each device the whole micro-batch (devices.go).
	TensorParallel bool
	// GradientCheckpointing recomputes each decoder layer's activations in the backward pass
	// instead of keeping them (gradient_checkpointing; decoder.CheckpointLayers).
	GradientCheckpointing bool
}

func (c OptimizerConfig) adam() step.AdamHyper {
	return step.AdamHyper{Beta1: c.Beta1, Beta2: c.Beta2, Epsilon: c.Epsilon, WeightDecay: c.WeightDecay}
}

// Optimizer is the update machinery of the driver, usable on its own (bench parity, tests):
// compiled micro-batch (gradient accumulation) and update graphs over a Model. It is an
// Accumulator.
//
// A step is: for each micro-batch, accumulate += ∂(loss_micro)/∂θ (the trainer's loss is already
// divided by the whole accumulated batch's size, so the sum is the full batch's gradient); then
// update: clip the summed gradient by its global norm, apply AdamW (or the plain step) to the
// float32 masters, refresh the bfloat16 copies; the next micro-batch starts a new sum.
type Optimizer struct {
	backend backends.Backend
	model   *trainable.Model
	hp      OptimizerConfig
	params  []*context.Variable // compute weights (HF scopes)
	names   []string            // their HF names
	decay   []bool              // weight decay applies (HF: not to biases and norm weights)
	grads   []*context.Variable
	expAvg  []*context.Variable // AdamW's moments (none for the plain step)
	expAvg2 []*context.Variable
	accum   *context.Exec // the single-device micro-batch graph (nil with several devices)
	update  *context.Exec
	dp      *dataParallel // several devices: the mesh and the micro-batch graphs by input layout
	// The names of accum's inputs (the method's, then "norm") and metrics, and of update's inputs.
	accumSig, updateSig named.Signature
	steps               int // AdamW updates done (PyTorch's state["step"])
	// dropout: the model's adapter applies dropout in the training graph, whose masks come from
	// an RNG state input derived from seed, the step and the micro-batch (resume draws the same).
	dropout bool
	seed    int64
	micros  int // micro-batches of the step in progress
	lossFn  LossFunc
	// ran are the graphs of the last Micro and Apply on one device (Ran reads their memory plans).
	ran struct{ accum, update *Graph }
}

// LossFunc builds a micro-batch's loss, divided by norm (the accumulated batch's size, a float32
// scalar), and its metric scalars by name, from the graph inputs in (the names of the Feed given
// to Micro, e.g. Method.Batch's).
type LossFunc func(ctx *context.Context, in named.Inputs, norm *Node) (loss *Node, metrics map[string]*Node)

// normInput is the name of the accumulation graph's own input beside the method's: the
// accumulated batch's size. Methods name their inputs after Go struct fields (capitalised), so it
// cannot collide; Signature.Args refuses a Feed that names it twice.
const normInput = "norm"

// restartInput is the accumulation graph's boolean scalar that starts a step's sum: true on the
// step's first micro-batch (accumulator ← gradient), false after it (accumulator += gradient). The
// update and Discard then leave the accumulators as they are, with nothing to zero: on XLA the
// update writes the weights and moments in place (input/output aliasing), and a zeroed
// accumulator beside them cost a copy of every gradient.
const restartInput = "restart_sum"

// rngInput is the accumulation graph's RNG state of LoRA's dropout (only when it applies).
const rngInput = "dropout_rng"

// OptimizerFor is the optimizer a run of cfg trains with (TrainingArguments' AdamW settings,
// max_grad_norm and the devices).
func OptimizerFor(cfg *config.Training) OptimizerConfig {
	return OptimizerConfig{Beta1: cfg.AdamBeta1, Beta2: cfg.AdamBeta2, Epsilon: cfg.AdamEpsilon, WeightDecay: cfg.WeightDecay, MaxGradNorm: cfg.MaxGradNorm,
		Devices: cfg.DeviceCount(), FSDP: cfg.FSDP, TensorParallel: cfg.TensorParallel, GradientCheckpointing: cfg.GradientCheckpointing}
}

// NewOptimizer creates the float32 gradient accumulators and AdamW moments (not for step.Plain) of m's trainable
// weights (Model.Trainable: every weight, or an adapter's) in m.Ctx (zero, or kept if they exist)
// and prepares the graphs; lossFn is compiled per input shape on the first Micro call with that
// shape.
func NewOptimizer(backend backends.Backend, m *trainable.Model, hp OptimizerConfig, lossFn LossFunc) (*Optimizer, error) {
	o := &Optimizer{backend: backend, model: m, hp: hp, lossFn: lossFn}
	var err error
	if o.params, o.names, err = m.Trainable(); err != nil {
		return nil, err
	}
	o.dropout = m.Adapter != nil && m.Adapter.Dropping()
	for i, v := range o.params {
		n := o.names[i]
		o.decay = append(o.decay, step.Decays(n))
		shape := shapes.Make(dtypes.Float32, v.Shape().Dimensions...)
		zeros := func(scope string) *context.Variable {
			if x := m.Ctx.GetVariableByScopeAndName(scope+v.Scope(), v.Name()); x != nil {
				return x
			}
			vctx := m.Ctx.InAbsPath(scope + v.Scope()).Checked(false)
			if !v.HasValue() { // a trainable.ShapeModel's: shapes only, for Plan
				return vctx.VariableWithShape(v.Name(), shape).SetTrainable(false)
			}
			return vctx.VariableWithValue(v.Name(), tensors.FromShape(shape)).SetTrainable(false)
		}
		o.grads = append(o.grads, zeros(GradScope))
		if hp.Optimizer != step.Plain {
			o.expAvg = append(o.expAvg, zeros(ExpAvgScope))
			o.expAvg2 = append(o.expAvg2, zeros(ExpAvgSqScope))
		}
	}
	if hp.Devices > 1 {
		if o.dp, err = newDataParallel(backend, hp.Devices, hp.TensorParallel); err != nil {
			return nil, err
		}
		if hp.TensorParallel {
			if err := o.dp.tensorParallel(m.Ctx); err != nil {
				return nil, err
			}
		}
		if hp.FSDP {
			if err := o.dp.shard(o.state()); err != nil {
				return nil, err
			}
		}
	}
	err = step.Catch("build training graphs", func() error {
		var e error
		if o.dp == nil {
			if o.accum, e = o.newAccumExec(lossFn); e != nil {
				return e
			}
		} else {
			o.dp.newAccum = func() (*context.Exec, error) { return o.newAccumExec(lossFn) }
		}
		o.update, e = context.NewExec(backend, m.Ctx.Reuse(), func(ctx *context.Context, inputs []*Node) []*Node {
			out := o.updateGraph(named.Bind[step.Scalars[*Node]](o.updateSig.Inputs(inputs)))
			o.dp.setOutputSpecs(o.update, ctx, out[0].Graph())
			return out
		})
		if e == nil && o.dp != nil {
			e = o.dp.replicate(o.update)
		}
		return e
	})
	return o, err
}

// newAccumExec is the compiled micro-batch graph (accumGraph), one per input shapes.
func (o *Optimizer) newAccumExec(lossFn LossFunc) (*context.Exec, error) {
	var e *context.Exec
	e, err := context.NewExec(o.backend, o.model.Ctx.Reuse(), func(ctx *context.Context, inputs []*Node) []*Node {
		out := o.accumGraph(ctx, lossFn, o.accumSig.Inputs(inputs))
		o.dp.setOutputSpecs(e, ctx, out[0].Graph())
		return out
	})
	if err != nil {
		return nil, err
	}
	return e.SetMaxCache(-1), nil
}

// exec runs e on args: on one device as they are; on several, each arg split or replicated
// (dataParallel.run) and the outputs of the first device returned (all are replicated).
func (o *Optimizer) exec(e *context.Exec, args []any) ([]*tensors.Tensor, error) {
	if o.dp == nil {
		return e.Exec(args...)
	}
	return o.dp.run(e, args)
}

// accumGraph is one micro-batch: loss → gradients → added to the accumulators. in are the
// trainer's inputs and norm. Outputs: the loss, then the metrics by sorted name (accumSig).
func (o *Optimizer) accumGraph(ctx *context.Context, lossFn LossFunc, in named.Inputs) []*Node {
	if o.dropout {
		lora.Train(ctx, in.Get(rngInput).Graph(), in.Get(rngInput))
		in = in.Without(rngInput)
	}
	restart := in.Get(restartInput)
	in = in.Without(restartInput)
	g := restart.Graph()
	if o.hp.GradientCheckpointing {
		decoder.CheckpointLayers(g)
	}
	loss, metrics := lossFn(ctx, in.Without(normInput), in.Get(normInput))
	if loss == nil || !loss.Shape().IsScalar() {
		panic(fmt.Sprintf("the loss must be a scalar, got %v", loss))
	}
	values := make([]*Node, len(o.params))
	for i, v := range o.params {
		values[i] = v.ValueGraph(g)
	}
	grads := Gradient(decoder.CheckpointGradients(loss), values...)
	for i, acc := range o.grads {
		grad := ConvertDType(grads[i], dtypes.Float32)
		// A select, not 0·acc: a non-finite sum of a discarded step must not reach the next one.
		acc.SetValueGraph(Where(restart, grad, Add(acc.ValueGraph(g), grad)))
	}
	out := []*Node{ConvertDType(StopGradient(loss), dtypes.Float64)}
	return append(out, o.accumSig.Outputs(named.FromMap(step.Float64Metrics(metrics)))...)
}

// updateGraph is one update of the float32 masters after clip_grad_norm_ on the accumulated
// gradients: step.AdamWUpdate (PyTorch's AdamW, decoupled weight decay on the weights HF decays,
// step.Decays) or step.SGDUpdate. in holds step.UpdateScalars, computed on the host in float64 so
// that the LR schedule never recompiles. Returns the pre-clip global norm.
func (o *Optimizer) updateGraph(in step.Scalars[*Node]) []*Node {
	g := in.StepSize.Graph()
	grads := make([]*Node, len(o.grads))
	for i, acc := range o.grads {
		grads[i] = acc.ValueGraph(g)
	}
	norm := step.GlobalNorm(grads, dtypes.Float32)
	if o.hp.MaxGradNorm > 0 {
		grads = step.ClipByGlobalNorm(grads, norm, o.hp.MaxGradNorm)
	}
	for i, v := range o.params {
		master := o.model.Master(v)
		if master == nil {
			panic(fmt.Sprintf("%s has no float32 master", o.names[i]))
		}
		var theta *Node
		if o.hp.Optimizer == step.Plain {
			theta = step.SGDUpdate(master.ValueGraph(g), grads[i], in)
		} else {
			var m, v2 *Node
			theta, m, v2 = step.AdamWUpdate(master.ValueGraph(g), grads[i], o.expAvg[i].ValueGraph(g), o.expAvg2[i].ValueGraph(g), in, o.hp.adam(), o.decay[i])
			o.expAvg[i].SetValueGraph(m)
			o.expAvg2[i].SetValueGraph(v2)
		}
		master.SetValueGraph(theta)
		if master != v {
			v.SetValueGraph(trainable.CopyOfMaster(theta, v.DType()))
		}
	}
	return []*Node{norm}
}

// Micro runs one micro-batch: it adds the gradient of lossFn(in, norm) to the accumulators and
// returns the loss and the metrics by name (computed before any update of this step). Every call
// must name the same inputs (the first call's names are those of the compiled graphs).
func (o *Optimizer) Micro(in named.Feed, norm float64) (loss float64, metrics map[string]float64, err error) {
	var outs []*tensors.Tensor
	err = step.Catch("train micro-batch", func() error {
		feed := in.With(normInput, float32(norm)).With(restartInput, o.micros == 0)
		if o.dropout {
			feed = feed.With(rngInput, o.dropoutState())
		}
		args, e := o.accumSig.Args(feed)
		if e != nil {
			return e
		}
		if o.dp != nil {
			outs, e = o.dp.micro(args, feed.Names)
			return e
		}
		outs, o.ran.accum, e = o.accum.ExecWithGraph(args...)
		return e
	})
	if err != nil {
		return 0, nil, err
	}
	o.micros++
	ms, err := o.accumSig.Results(outs[1:])
	if err != nil {
		return 0, nil, fmt.Errorf("train micro-batch: %w", err)
	}
	return step.ScalarValue(outs[0]), step.MetricValues(ms), nil
}

// Apply runs the update on the accumulated gradients with learning rate lr, ends the step (the next
// micro-batch starts a new sum), and returns the global gradient norm before clipping.
func (o *Optimizer) Apply(lr float64) (float64, error) {
	sc := step.UpdateScalars(o.hp.Optimizer, o.hp.adam(), lr, o.steps+1)
	var outs []*tensors.Tensor
	err := step.Catch("optimizer update", func() error {
		args, e := o.updateSig.Args(named.Of[any](step.Scalars[any]{StepSize: float32(sc.StepSize), BC2Sqrt: float32(sc.BC2Sqrt),
			DecayFactor: float32(sc.DecayFactor)}))
		if e != nil {
			return e
		}
		if o.dp == nil {
			outs, o.ran.update, e = o.update.ExecWithGraph(args...)
			return e
		}
		outs, e = o.exec(o.update, args)
		return e
	})
	if err != nil {
		return 0, err
	}
	o.steps++
	o.micros = 0
	return step.ScalarValue(outs[0]), nil
}

// Discard drops the accumulated gradients without an update: the weights and the AdamW state are
// unchanged, and the next micro-batch starts a new sum.
func (o *Optimizer) Discard() error {
	o.micros = 0
	return nil
}

// SetSeed sets the seed of the adapter's dropout masks (the run's seed).
func (o *Optimizer) SetSeed(seed int64) { o.seed = seed }

// dropoutState is the RNG state (graph.RNGStateShape) of the next micro-batch's dropout masks: a
// function of the seed, the optimizer step and the micro-batch's index in it, so that a resumed
// run draws what the uninterrupted one would have.
func (o *Optimizer) dropoutState() []uint64 {
	x := uint64(o.seed)
	out := make([]uint64, 3)
	for i, v := range []uint64{uint64(o.steps), uint64(o.micros), 0x6c6f7261} {
		x = splitmix64(x ^ v)
		out[i] = x
	}
	return out
}

// splitmix64 is Steele et al.'s SplitMix64 finaliser: a bijective mix of 64 bits.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// state is the optimizer's state: the trained weights, their float32 masters (when apart),
// the gradient accumulators and the AdamW moments.
func (o *Optimizer) state() []*context.Variable {
	var vs []*context.Variable
	for i, v := range o.params {
		vs = append(vs, v, o.grads[i])
		if m := o.model.Master(v); m != nil && m != v {
			vs = append(vs, m)
		}
		if o.expAvg != nil {
			vs = append(vs, o.expAvg[i], o.expAvg2[i])
		}
	}
	return vs
}

// StateBytesPerDevice is what one device holds of the optimizer's state (state): all of it on
// one device or with data parallel alone, its shards with FSDP (and the projections' shards with
// tensor parallel).
func (o *Optimizer) StateBytesPerDevice() int64 {
	var n int64
	for _, v := range o.state() {
		n += int64(v.ShardShape().Memory())
	}
	return n
}

// Split reports, with FSDP or tensor parallelism, how many tensors are split over the devices and
// how many stay whole on each (a dimension that does not divide by the device count), naming up
// to three of those; zeros otherwise.
func (o *Optimizer) Split() (split, replicated int, names string) {
	if o.dp == nil || (!o.hp.FSDP && !o.hp.TensorParallel) {
		return 0, 0, ""
	}
	return o.dp.Split, o.dp.Replicated, o.dp.replicatedSummary()
}

// Steps is the number of updates applied (AdamW's t).
func (o *Optimizer) Steps() int { return o.steps }

// Close frees the compiled graphs.
func (o *Optimizer) Close() {
	if o.accum != nil {
		o.accum.Finalize()
	}
	if o.dp != nil {
		o.dp.close()
	}
	o.update.Finalize()
}
