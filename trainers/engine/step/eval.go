package step

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/shard"
)

// Eval is a compiled pure graph function for the hand checks of the loss tests: its arguments are
// listed at the call that runs it, in the order the function reads them; no gradient, no update.
// It compiles once per distinct input shapes. Computations over a model's variables are
// ContextEvals, whose inputs and outputs are named.
type Eval struct {
	run func(inputs ...any) ([]*tensors.Tensor, error)
}

// NewEval compiles a pure graph function of its inputs, once per input shape (no limit).
func NewEval(backend backends.Backend, fn func(inputs []*graph.Node) []*graph.Node) (*Eval, error) {
	var e *graph.Exec
	err := Catch("eval: build", func() error {
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

// Run executes the computation; inputs are tensors or Go slices/scalars.
func (e *Eval) Run(inputs ...any) (outs []*tensors.Tensor, err error) {
	err = Catch("eval: run", func() error {
		var err error
		outs, err = e.run(inputs...)
		return err
	})
	return outs, err
}

// ContextEval is a compiled forward-only computation over a context's variables (reference or
// old log-probs, evaluation losses and metrics): no gradient, no update. Its inputs and outputs
// are named (internal/named): Run takes a Feed, the graph function receives the same names and
// returns its outputs by name, and Run returns them by name. It compiles once per distinct input
// shapes.
type ContextEval struct {
	exec *context.Exec
	sig  named.Signature
	rows *shard.Rows // several devices (SplitRows), nil on one
}

// SplitRows runs e over the devices of rows (internal/shard): every input of rank ≥ 1 and every
// output are rows (their first axis the batch), split over the devices; a batch that does not
// divide by the devices is padded with copies of its last row, whose outputs are dropped. Scalar
// inputs are replicated. nil runs on one device (the default). Set before the first Run.
func (e *ContextEval) SplitRows(rows *shard.Rows) { e.rows = rows }

// NewContextEval compiles a graph function that reads (never updates) the variables of ctx, once
// per input shape (no limit on the number of shapes).
func NewContextEval(backend backends.Backend, ctx *context.Context,
	fn func(ctx *context.Context, in named.Inputs) map[string]*graph.Node) (*ContextEval, error) {
	e := &ContextEval{}
	err := Catch("eval: build", func() error {
		var err error
		e.exec, err = context.NewExec(backend, ctx, func(ctx *context.Context, nodes []*graph.Node) []*graph.Node {
			return e.sig.Outputs(named.FromMap(fn(ctx, e.sig.Inputs(nodes))))
		})
		if err == nil {
			// GoMLX keeps 32 compiled shapes by default and then fails; a long run (GRPO's scoring
			// of ever new prompt+completion length buckets) can need more.
			e.exec.SetMaxCache(-1)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Run executes the computation on the inputs of in (tensors or Go slices/scalars) and returns
// the outputs by name.
func (e *ContextEval) Run(in named.Feed) (outs map[string]*tensors.Tensor, err error) {
	err = Catch("eval: run", func() error {
		args, err := e.sig.Args(in)
		if err != nil {
			return err
		}
		var ts []*tensors.Tensor
		if e.rows != nil {
			ts, err = e.rows.ExecPadded(e.exec, args)
		} else {
			ts, err = e.exec.Exec(args...)
		}
		if err != nil {
			return err
		}
		res, err := e.sig.Results(ts)
		outs = res.Map()
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
