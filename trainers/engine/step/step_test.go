package step

import (
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/internal/named"
)

var testBackend = sync.OnceValue(func() backends.Backend { return backend.MustNewForTests() })

// target is the tests' one graph input: the point c the quadratic losses pull θ to.
type target[T any] struct{ C T }

func feed(c any) named.Feed { return named.Of[any](target[any]{C: c}) }

// quadratic builds L = Σ_i (θ_i − c_i)² for a trainable θ initialised to theta0; metric: Σθ.
func quadratic(t *testing.T, cfg Config, theta0 []float64) (*Step, *context.Variable) {
	t.Helper()
	ctx := context.New()
	v := ctx.In("model").VariableWithValue("theta", theta0)
	s, err := New(testBackend(), ctx, cfg, func(ctx *context.Context, in named.Inputs) (*Node, map[string]*Node) {
		c := named.Bind[target[*Node]](in).C
		theta := v.ValueGraph(c.Graph())
		return ReduceAllSum(Square(Sub(theta, c))), map[string]*Node{"sum": ReduceAllSum(theta)}
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

func values(v *context.Variable) []float64 { return tensors.MustCopyFlatData[float64](v.MustValue()) }

// The course's plain step θ ← θ − lr·∇L, then a host-side learning-rate change without rebuild.
func TestStep_PlainGradientStep(t *testing.T) {
	theta0, c := []float64{1, -2}, []float64{0.5, 1}
	s, v := quadratic(t, Config{Optimizer: Plain, LearningRate: 0.1}, theta0)
	r, err := s.Run(feed(c))
	if err != nil {
		t.Fatal(err)
	}
	wantLoss := 0.25 + 9.0
	if r.Loss != wantLoss || len(r.Metrics) != 1 || r.Metrics["sum"] != -1 {
		t.Errorf("Run = %+v, want loss %v and metric Σθ = −1 (before the update)", r, wantLoss)
	}
	if want := math.Sqrt(1 + 36); math.Abs(r.GradNorm-want) > 1e-15 {
		t.Errorf("grad norm = %v, want %v", r.GradNorm, want)
	}
	want := []float64{1 - 0.1*2*0.5, -2 - 0.1*2*(-3)}
	if got := values(v); got[0] != want[0] || got[1] != want[1] {
		t.Errorf("θ after one step = %v, want %v", got, want)
	}
	if err := s.SetLearningRate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(feed(c)); err != nil {
		t.Fatal(err)
	}
	if got := values(v); got[0] != want[0] || got[1] != want[1] {
		t.Errorf("θ moved to %v with learning rate 0", got)
	}
	if got := s.GlobalStep(); got != 2 {
		t.Errorf("global step = %d, want 2", got)
	}
}

// Global-norm clipping: g = 2(θ−c) = (6, 8), ‖g‖ = 10, max 1 → the step uses g/(10+1e-6).
func TestStep_ClipByGlobalNorm(t *testing.T) {
	s, v := quadratic(t, Config{Optimizer: Plain, LearningRate: 1, MaxGradNorm: 1}, []float64{3, 4})
	r, err := s.Run(feed([]float64{0, 0}))
	if err != nil {
		t.Fatal(err)
	}
	if r.GradNorm != 10 {
		t.Errorf("grad norm = %v, want 10 (before clipping)", r.GradNorm)
	}
	scale := 1 / (10 + 1e-6)
	want := []float64{3 - 6*scale, 4 - 8*scale}
	for i, got := range values(v) {
		if math.Abs(got-want[i]) > 1e-15 {
			t.Errorf("θ[%d] = %v, want %v", i, got, want[i])
		}
	}
}

// AdamW's first step: m̂ = g, v̂ = g², so θ ← θ − lr·g/(|g|+ε) − lr·wd·θ.
func TestStep_AdamWFirstStep(t *testing.T) {
	const lr, wd, eps = 0.01, 0.1, 1e-8
	theta0 := []float64{1, -2}
	s, v := quadratic(t, Config{Optimizer: AdamW, LearningRate: lr, WeightDecay: wd}, theta0)
	c := []float64{0.5, 1}
	if _, err := s.Run(feed(c)); err != nil {
		t.Fatal(err)
	}
	for i, got := range values(v) {
		g := 2 * (theta0[i] - c[i])
		want := theta0[i] - lr*g/(math.Abs(g)+eps) - lr*wd*theta0[i]
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("θ[%d] = %v, want %v", i, got, want)
		}
	}
}

// A graph-building panic (here a non-scalar loss) comes back as an error, not a crash.
func TestStep_PanicBecomesError(t *testing.T) {
	ctx := context.New()
	v := ctx.VariableWithValue("w", []float64{1, 2})
	s, err := New(testBackend(), ctx, Config{LearningRate: 1}, func(ctx *context.Context, in named.Inputs) (*Node, map[string]*Node) {
		c := named.Bind[target[*Node]](in).C
		return Mul(v.ValueGraph(c.Graph()), c), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Run(feed([]float64{1, 1}))
	if err == nil || !strings.Contains(err.Error(), "scalar") {
		t.Fatalf("Run with a vector loss: err = %v, want an error about the scalar loss", err)
	}
}

func TestConfig_Validate(t *testing.T) {
	for _, c := range []Config{{LearningRate: -1}, {Optimizer: 7}, {MaxGradNorm: -1}, {Optimizer: AdamW, Beta1: 1}} {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", c)
		}
	}
	if err := (Config{Optimizer: AdamW, LearningRate: 1e-6, WeightDecay: 0.01, MaxGradNorm: 1}).Validate(); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}

// float32 variables and loss (the Qwen2 path): both optimizers move θ, GradNorm is reported.
func TestStep_Float32(t *testing.T) {
	for _, opt := range []Optimizer{Plain, AdamW} {
		ctx := context.New()
		v := ctx.In("model").VariableWithValue("w", []float32{1, -2})
		s, err := New(testBackend(), ctx, Config{Optimizer: opt, LearningRate: 0.1, MaxGradNorm: 1},
			func(ctx *context.Context, in named.Inputs) (*Node, map[string]*Node) {
				c := named.Bind[target[*Node]](in).C
				return ReduceAllSum(Square(Sub(v.ValueGraph(c.Graph()), c))), nil
			})
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Run(feed([]float32{0, 0}))
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(r.GradNorm-math.Sqrt(20)) > 1e-5 || r.Loss != 5 {
			t.Errorf("%v: Run = %+v, want loss 5 and grad norm √20", opt, r)
		}
		got := tensors.MustCopyFlatData[float32](v.MustValue())
		if !(got[0] < 1 && got[1] > -2) {
			t.Errorf("%v: θ = %v, want it to move toward 0 from [1 -2]", opt, got)
		}
		if err := s.SetLearningRate(0.01); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Run(feed([]float32{0, 0})); err != nil {
			t.Fatal(err)
		}
	}
}

// An Eval compiles one graph per input shape without GoMLX's default limit of 32 shapes (a GRPO
// run scores ever new length buckets); the 40th shape still runs.
func TestEval_ManyShapes(t *testing.T) {
	ctx := context.New()
	ctx.InAbsPath("/w").VariableWithValue("x", float32(2))
	e, err := NewContextEval(testBackend(), ctx, func(ctx *context.Context, in named.Inputs) map[string]*Node {
		c := named.Bind[target[*Node]](in).C
		w := ctx.InAbsPath("/w").GetVariableByScopeAndName("/w", "x").ValueGraph(c.Graph())
		return map[string]*Node{"y": Mul(ReduceAllSum(c), w)}
	})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 40; n++ {
		outs, err := e.Run(feed(make([]float32, n)))
		if err != nil {
			t.Fatalf("shape %d: %v", n, err)
		}
		if got := Float64s(outs["y"]); got[0] != 0 {
			t.Fatalf("shape %d: %v", n, got)
		}
	}
}

// A step whose loss reads inputs by other names than its Feed's fails when its graph is built,
// naming both; the Feed's names are then the step's, and another layout is refused before any
// graph is built.
func TestStep_MisnamedInputFailsAtBuild(t *testing.T) {
	type point[T any] struct{ Target T }
	ctx := context.New()
	v := ctx.In("model").VariableWithValue("theta", []float64{1})
	s, err := New(testBackend(), ctx, Config{LearningRate: 1}, func(ctx *context.Context, in named.Inputs) (*Node, map[string]*Node) {
		c := named.Bind[point[*Node]](in).Target
		return ReduceAllSum(Square(Sub(v.ValueGraph(c.Graph()), c))), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Run(feed([]float64{0}))
	want := "step: run: named: the graph inputs (C) are not step.point's fields (Target): missing Target; no field for C"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
	_, err = s.Run(named.Of[any](point[any]{Target: []float64{0}}))
	if want := "inputs (Target) differ from those the graph was built with (C)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
	if got := values(v); got[0] != 1 {
		t.Errorf("θ = %v after failed steps, want it unchanged", got)
	}
}

// Three AdamW steps equal PyTorch's torch.optim.AdamW recurrence computed on the host in float64
// (torch/optim/adamw.py, single-tensor path: decay, moments, bias corrections as AdamWUpdate's
// doc), with the learning rate changed between steps.
func TestStep_AdamWMatchesTorchRecurrence(t *testing.T) {
	const b1, b2, eps, wd = 0.9, 0.999, 1e-8, 0.1
	theta := []float64{1, -2}
	c := []float64{0.5, 1}
	s, v := quadratic(t, Config{Optimizer: AdamW, LearningRate: 0.01, WeightDecay: wd}, theta)
	m, v2 := make([]float64, 2), make([]float64, 2)
	for step, lr := range []float64{0.01, 0.02, 0.005} {
		if err := s.SetLearningRate(lr); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Run(feed(c)); err != nil {
			t.Fatal(err)
		}
		tt := float64(step + 1)
		for i := range theta {
			g := 2 * (theta[i] - c[i])
			theta[i] *= 1 - lr*wd
			m[i] = b1*m[i] + (1-b1)*g
			v2[i] = b2*v2[i] + (1-b2)*g*g
			theta[i] -= lr / (1 - math.Pow(b1, tt)) * m[i] / (math.Sqrt(v2[i])/math.Sqrt(1-math.Pow(b2, tt)) + eps)
		}
		for i, got := range values(v) {
			if math.Abs(got-theta[i]) > 1e-14 {
				t.Errorf("step %d: θ[%d] = %v, want %v", step+1, i, got, theta[i])
			}
		}
	}
	if got := s.GlobalStep(); got != 3 {
		t.Errorf("GlobalStep = %d, want 3", got)
	}
}
