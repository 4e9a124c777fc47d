package step

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Eval is a compiled forward-only computation (reference or old log-probs, metrics, tests): no
// gradient, no update. Like Step it compiles once per distinct input shapes.
type Eval struct {
	run func(inputs ...any) ([]*tensors.Tensor, error)
}

// NewEval compiles a pure graph function of its inputs, once per input shape (no limit).
func NewEval(backend backends.Backend, fn func(inputs []*graph.Node) []*graph.Node) (*Eval, error) {
	var e *graph.Exec
	err := catch("eval: build", func() error {
		var err error
		if e, err = graph.NewExec(backend, fn); err == nil {
			e.SetMaxCache(-1) // one graph per input shape, unbounded (see NewContextEval)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Eval{run: e.Exec}, nil
}

// NewContextEval compiles a graph function that reads (never updates) the variables of ctx, once
// per input shape (no limit on the number of shapes).
func NewContextEval(backend backends.Backend, ctx *context.Context,
	fn func(ctx *context.Context, inputs []*graph.Node) []*graph.Node) (*Eval, error) {
	var e *context.Exec
	err := catch("eval: build", func() error {
		var err error
		if e, err = context.NewExec(backend, ctx, fn); err == nil {
			// GoMLX keeps 32 compiled shapes by default and then fails; a long run (GRPO's scoring
			// of ever new prompt+completion length buckets) can need more.
			e.SetMaxCache(-1)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Eval{run: e.Exec}, nil
}

// Run executes the computation; inputs are tensors or Go slices/scalars.
func (e *Eval) Run(inputs ...any) (outs []*tensors.Tensor, err error) {
	err = catch("eval: run", func() error {
		var err error
		outs, err = e.run(inputs...)
		return err
	})
	return outs, err
}

// Float64s returns the flat values of a float, integer or bool tensor as float64.
func Float64s(t *tensors.Tensor) []float64 {
	switch t.DType() {
	case dtypes.Float64:
		return tensors.MustCopyFlatData[float64](t)
	case dtypes.Float32:
		return convert(tensors.MustCopyFlatData[float32](t))
	case dtypes.Int64:
		return convert(tensors.MustCopyFlatData[int64](t))
	case dtypes.Int32:
		return convert(tensors.MustCopyFlatData[int32](t))
	case dtypes.Bool:
		bs := tensors.MustCopyFlatData[bool](t)
		out := make([]float64, len(bs))
		for i, b := range bs {
			if b {
				out[i] = 1
			}
		}
		return out
	}
	panic(fmt.Sprintf("step: Float64s of unsupported dtype %s", t.DType()))
}

func convert[T float32 | int64 | int32](xs []T) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}
