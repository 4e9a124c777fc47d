// Package step is the plumbing every trainer shares: one compiled context.Exec that builds a loss
// from a trainer's graph function, differentiates it with respect to the trainable variables,
// optionally clips the global gradient norm, and updates the variables with either the course's
// plain gradient step or AdamW — the update rule of optimizer.go, the same one the LLM trainers'
// loop.Optimizer runs. It holds no loss math (that lives in each trainer's loss.go).
//
// The learning rate and AdamW's bias corrections are graph inputs computed on the host
// (UpdateScalars), so SetLearningRate changes the rate without recompiling. GoMLX panics while building or running the graph come back as errors. Inputs
// travel by name (internal/named): Run takes a named.Feed, the loss function receives the same
// names as named.Inputs, and metrics come back by name; so do ContextEval's inputs and outputs.
package step

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
)

// Optimizer selects how gradients change the variables.
type Optimizer int

const (
	// AdamW is PyTorch's torch.optim.AdamW (AdamWUpdate; WeightDecay 0 is Adam), the zero value:
	// here decay applies to every variable, and the moments live in the context at ExpAvgScope
	// and ExpAvgSqScope.
	AdamW Optimizer = iota
	// Plain is the course's gradient step θ ← θ − lr·∇L (SGDUpdate), computed in the variables'
	// dtype.
	Plain
)

func (o Optimizer) String() string {
	switch o {
	case Plain:
		return "plain"
	case AdamW:
		return "adamw"
	}
	return fmt.Sprintf("Optimizer(%d)", int(o))
}

// Config is the optimizer part of a trainer's configuration.
type Config struct {
	Optimizer    Optimizer
	LearningRate float64
	// AdamW only; zero values mean PyTorch's defaults (0.9, 0.999, 1e-8). WeightDecay 0 = plain Adam.
	Beta1, Beta2, Epsilon, WeightDecay float64
	// MaxGradNorm > 0 rescales the gradients so that their global L2 norm is at most MaxGradNorm
	// (torch.nn.utils.clip_grad_norm_: scale = min(1, max/(‖g‖+1e-6))). 0 disables clipping.
	MaxGradNorm float64
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Optimizer != Plain && c.Optimizer != AdamW:
		return fmt.Errorf("step: unknown optimizer %v", c.Optimizer)
	case math.IsNaN(c.LearningRate) || c.LearningRate < 0:
		return fmt.Errorf("step: learning rate %v must be ≥ 0", c.LearningRate)
	case c.MaxGradNorm < 0:
		return fmt.Errorf("step: max grad norm %v must be ≥ 0 (0 disables clipping)", c.MaxGradNorm)
	case c.WeightDecay < 0:
		return fmt.Errorf("step: weight decay %v must be ≥ 0", c.WeightDecay)
	case c.Beta1 < 0 || c.Beta1 >= 1 || c.Beta2 < 0 || c.Beta2 >= 1:
		return fmt.Errorf("step: Adam betas (%v, %v) must be in [0, 1)", c.Beta1, c.Beta2)
	case c.Epsilon < 0:
		return fmt.Errorf("step: Adam epsilon %v must be ≥ 0", c.Epsilon)
	}
	return nil
}

// LossFn builds a trainer's scalar loss from the graph inputs (the names of the Feed given to
// Step.Run; named.Bind reads them into the trainer's input struct) and the model variables in ctx.
// metrics are extra scalar nodes by name, which Run returns by name; the loss function must not
// update variables itself.
type LossFn func(ctx *context.Context, in named.Inputs) (loss *Node, metrics map[string]*Node)

// Step is a compiled training step. It is not safe for concurrent use.
type Step struct {
	ctx  *context.Context
	cfg  Config
	exec *context.Exec
	sig  named.Signature // the input names of exec's graphs and the names of their metrics
	lr   float64
	hp   AdamHyper // the resolved AdamW hyper-parameters
	// updates counts the Runs that updated the variables (AdamW's t).
	updates int
}

// numScalars is the number of graph inputs after the loss function's: the update's Scalars
// (StepSize, BC2Sqrt, DecayFactor), in float64.
const numScalars = 3

// Result is what one Run returns: the loss before the update, the global gradient norm before
// clipping, and the LossFn's metrics.
type Result struct {
	Loss, GradNorm float64
	Metrics        map[string]float64
}

// New compiles nothing yet: the graph is built on the first Run for each distinct input shape.
func New(backend backends.Backend, ctx *context.Context, cfg Config, fn LossFn) (s *Step, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if backend == nil || ctx == nil || fn == nil {
		return nil, errors.New("step: backend, context and loss function are required")
	}
	s = &Step{ctx: ctx, cfg: cfg, lr: cfg.LearningRate, hp: AdamHyper{Beta1: orDefault(cfg.Beta1, 0.9),
		Beta2: orDefault(cfg.Beta2, 0.999), Epsilon: orDefault(cfg.Epsilon, 1e-8), WeightDecay: cfg.WeightDecay}}
	err = Catch("step: build", func() error {
		var e error
		s.exec, e = context.NewExec(backend, ctx, func(ctx *context.Context, inputs []*Node) []*Node {
			n := len(inputs) - numScalars
			sc := Scalars[*Node]{StepSize: inputs[n], BC2Sqrt: inputs[n+1], DecayFactor: inputs[n+2]}
			return s.graph(ctx, fn, s.sig.Inputs(inputs[:n]), sc)
		})
		return e
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// graph is the step's computation: loss → gradients → clip → update. Outputs: the loss, the
// gradient norm, then the metrics by sorted name (s.sig records the names).
func (s *Step) graph(ctx *context.Context, fn LossFn, inputs named.Inputs, sc Scalars[*Node]) []*Node {
	loss, metrics := fn(ctx, inputs)
	if loss == nil || !loss.Shape().IsScalar() || !loss.DType().IsFloat() {
		panic(fmt.Sprintf("step: the loss must be a float scalar, got %v", loss))
	}
	g, dtype := loss.Graph(), loss.DType()
	var vars []*context.Variable
	var values []*Node
	for v := range ctx.IterVariables() {
		if v.Trainable && v.InUseByGraph(g) {
			vars = append(vars, v)
			values = append(values, v.ValueGraph(g))
		}
	}
	if len(vars) == 0 {
		panic("step: the loss uses no trainable variable")
	}
	grads := Gradient(loss, values...)
	norm := GlobalNorm(grads, dtype)
	if s.cfg.MaxGradNorm > 0 {
		grads = ClipByGlobalNorm(grads, norm, s.cfg.MaxGradNorm)
	}
	for i, v := range vars {
		if s.cfg.Optimizer == Plain {
			v.SetValueGraph(SGDUpdate(values[i], grads[i], sc))
			continue
		}
		s.adamW(ctx, v, values[i], grads[i], sc)
	}
	return append([]*Node{loss, norm}, s.sig.Outputs(named.FromMap(Float64Metrics(metrics)))...)
}

// adamW updates v by AdamWUpdate in its dtype (float32 for a 16-bit variable), with moments in
// ctx at ExpAvgScope/ExpAvgSqScope + v's scope (zero at first).
func (s *Step) adamW(ctx *context.Context, v *context.Variable, theta, grad *Node, sc Scalars[*Node]) {
	dtype := v.DType()
	if dtype.IsFloat16() {
		dtype = dtypes.Float32
	}
	moment := func(scope string) *context.Variable {
		if x := ctx.GetVariableByScopeAndName(scope+v.Scope(), v.Name()); x != nil {
			return x
		}
		return ctx.InAbsPath(scope+v.Scope()).Checked(false).
			VariableWithValue(v.Name(), tensors.FromShape(shapes.Make(dtype, v.Shape().Dimensions...))).SetTrainable(false)
	}
	m, v2 := moment(ExpAvgScope), moment(ExpAvgSqScope)
	g := theta.Graph()
	in := Scalars[*Node]{StepSize: ConvertDType(sc.StepSize, dtype), BC2Sqrt: ConvertDType(sc.BC2Sqrt, dtype),
		DecayFactor: ConvertDType(sc.DecayFactor, dtype)}
	newTheta, newM, newV := AdamWUpdate(ConvertDType(theta, dtype), ConvertDType(grad, dtype), m.ValueGraph(g), v2.ValueGraph(g), in, s.hp, true)
	m.SetValueGraph(newM)
	v2.SetValueGraph(newV)
	v.SetValueGraph(ConvertDType(newTheta, v.DType()))
}

// Float64Metrics returns the metric scalars detached and in float64 (what the host reads); a metric
// that is not a scalar panics, naming it.
func Float64Metrics(metrics map[string]*Node) map[string]*Node {
	out := make(map[string]*Node, len(metrics))
	for _, name := range slices.Sorted(maps.Keys(metrics)) { // the graph's nodes in a fixed order
		m := metrics[name]
		if m == nil || !m.Shape().IsScalar() {
			panic(fmt.Sprintf("step: metric %s must be a scalar, got %v", name, m))
		}
		out[name] = ConvertDType(StopGradient(m), dtypes.Float64)
	}
	return out
}

// MetricValues reads metric scalars back by name (Float64Metrics' outputs, paired with their
// names by a named.Signature).
func MetricValues(l named.List[*tensors.Tensor]) map[string]float64 {
	out := make(map[string]float64, len(l.Names))
	for i, name := range l.Names {
		out[name] = ScalarValue(l.Values[i])
	}
	return out
}

func orDefault(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// GlobalNorm returns √(Σ_i ‖g_i‖²) over all gradient tensors, in dtype.
//
// Squares and sums of 16-bit gradients (bfloat16, float16) run in float32: a bf16 running sum
// keeps 8 significant bits, so Σ g² over 2¹⁶ ones stalls at 256 and the norm reads 16, not 256.
// float64 gradients stay in float64; the sum over tensors runs in dtype or float32, whichever is
// wider, and only the norm is converted to dtype.
func GlobalNorm(grads []*Node, dtype dtypes.DType) *Node {
	acc := dtype
	if acc.IsFloat16() {
		acc = dtypes.Float32
	}
	var sum *Node
	for _, gr := range grads {
		if gr.DType().IsFloat16() {
			gr = ConvertDType(gr, dtypes.Float32)
		}
		sq := ConvertDType(ReduceAllSum(Square(gr)), acc)
		if sum == nil {
			sum = sq
		} else {
			sum = Add(sum, sq)
		}
	}
	return ConvertDType(Sqrt(sum), dtype)
}

// ClipByGlobalNorm rescales grads by min(1, maxNorm/(norm+1e-6)) (torch.nn.utils.clip_grad_norm_).
func ClipByGlobalNorm(grads []*Node, norm *Node, maxNorm float64) []*Node {
	scale := MinScalar(Div(Scalar(norm.Graph(), norm.DType(), maxNorm), AddScalar(norm, 1e-6)), 1)
	out := make([]*Node, len(grads))
	for i, gr := range grads {
		out[i] = Mul(gr, ConvertDType(scale, gr.DType()))
	}
	return out
}

// Run executes one step on the inputs of in: it returns the loss and metrics computed before the
// update, and leaves the context's variables updated.
func (s *Step) Run(in named.Feed) (Result, error) {
	var outs []*tensors.Tensor
	sc := UpdateScalars(s.cfg.Optimizer, s.hp, s.lr, s.updates+1)
	err := Catch("step: run", func() error {
		args, e := s.sig.Args(in)
		if e != nil {
			return e
		}
		args = append(args, sc.StepSize, sc.BC2Sqrt, sc.DecayFactor)
		outs, e = s.exec.Exec(args...)
		return e
	})
	if err != nil {
		return Result{}, err
	}
	if len(outs) < 2 {
		return Result{}, fmt.Errorf("step: run: got %d outputs, want ≥ 2", len(outs))
	}
	s.updates++
	ms, err := s.sig.Results(outs[2:])
	if err != nil {
		return Result{}, fmt.Errorf("step: run: %w", err)
	}
	return Result{Loss: ScalarValue(outs[0]), GradNorm: ScalarValue(outs[1]), Metrics: MetricValues(ms)}, nil
}

// SetLearningRate changes the learning rate used by the following Runs, without recompiling.
func (s *Step) SetLearningRate(lr float64) error {
	if math.IsNaN(lr) || lr < 0 {
		return fmt.Errorf("step: learning rate %v must be ≥ 0", lr)
	}
	s.lr = lr
	return nil
}

// Context is the context holding the variables this step updates.
func (s *Step) Context() *context.Context { return s.ctx }

// LearningRate is the learning rate the next Run uses.
func (s *Step) LearningRate() float64 { return s.lr }

// GlobalStep is the number of updates this Step applied (AdamW's t of the last one).
func (s *Step) GlobalStep() int64 { return int64(s.updates) }

// ScalarValue converts a float or integer scalar tensor to float64.
func ScalarValue(t *tensors.Tensor) float64 {
	switch x := t.Value().(type) {
	case float64:
		return x
	case float32:
		return float64(x)
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	}
	panic(fmt.Sprintf("step: scalar of unsupported type %s", t.Shape()))
}

// ScalarValueInt converts an integer scalar tensor to int64.
func ScalarValueInt(t *tensors.Tensor) int64 {
	switch x := t.Value().(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	}
	return int64(ScalarValue(t))
}
