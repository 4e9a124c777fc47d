package loop

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/trainers/engine/step"
)

// StepPlan is the memory an optimizer step needs as its backend's compiler planned it (XLA's
// buffer assignment), for the two graphs of a step: the micro-batch graph (forward, backward,
// the gradient added to the accumulators) and the update (clipping, AdamW).
type StepPlan struct {
	Accum, Update backends.CompiledMemoryStats
	// AccumVarBytes and UpdateVarBytes are the bytes of the variables each graph reads (part of
	// its arguments): what the rest of its arguments, the batch, adds to the state is the
	// difference.
	AccumVarBytes, UpdateVarBytes int64
}

// Plan builds and compiles, without running them, the graphs of one optimizer step on
// micro-batches shaped as in (only the shapes of in's values are read) and returns their memory
// plans. It works on a model whose weights have no values (trainable.ShapeModel): the graphs are
// built as Micro and Apply build them, each variable a graph updates an output written in place
// into its donated input (as context.Exec marks them), and compiled by the backend, which must
// report memory plans (XLA). One device only.
func (o *Optimizer) Plan(in named.Feed) (p StepPlan, err error) {
	if o.dp != nil {
		return p, fmt.Errorf("memory plan: one device only")
	}
	feed := in.With(normInput, float32(1)).With(restartInput, true)
	if o.dropout {
		feed = feed.With(rngInput, o.dropoutState())
	}
	args, err := o.accumSig.Args(feed)
	if err != nil {
		return p, err
	}
	err = step.Catch("memory plan of the micro-batch graph", func() error {
		var e error
		p.Accum, p.AccumVarBytes, e = planGraph(o.backend, o.model.Ctx.Reuse(), "plan_accum", args, func(ctx *context.Context, inputs []*Node) []*Node {
			return o.accumGraph(ctx, o.lossFn, o.accumSig.Inputs(inputs))
		})
		return e
	})
	if err != nil {
		return p, err
	}
	uargs, err := o.updateSig.Args(named.Of[any](step.Scalars[any]{StepSize: float32(1), BC2Sqrt: float32(1), DecayFactor: float32(1)}))
	if err != nil {
		return p, err
	}
	err = step.Catch("memory plan of the update graph", func() error {
		var e error
		p.Update, p.UpdateVarBytes, e = planGraph(o.backend, o.model.Ctx.Reuse(), "plan_update", uargs, func(_ *context.Context, inputs []*Node) []*Node {
			return o.updateGraph(named.Bind[step.Scalars[*Node]](o.updateSig.Inputs(inputs)))
		})
		return e
	})
	return p, err
}

// Ran is the memory plan of the graphs the last Micro and Apply ran (one device), to compare
// with Plan's; the variable bytes are left zero.
func (o *Optimizer) Ran() (p StepPlan, err error) {
	if o.ran.accum == nil || o.ran.update == nil {
		return p, fmt.Errorf("memory plan: no step has run on one device")
	}
	if p.Accum, err = o.ran.accum.CompiledMemoryStats(); err != nil {
		return p, err
	}
	p.Update, err = o.ran.update.CompiledMemoryStats()
	return p, err
}

// planGraph builds build's graph on inputs shaped as args, with the variables of ctx it reads as
// parameters and those it changes as outputs aliased to them (context.Exec's layout), compiles it
// and returns the backend's memory plan and the bytes of the variables it reads.
func planGraph(b backends.Backend, ctx *context.Context, name string, args []any, build func(*context.Context, []*Node) []*Node) (backends.CompiledMemoryStats, int64, error) {
	g := NewGraph(b, name)
	defer g.Finalize()
	inputs := make([]*Node, len(args))
	for i, a := range args {
		t, ok := a.(*tensors.Tensor)
		if !ok {
			t = tensors.FromAnyValue(a)
		}
		inputs[i] = Parameter(g, fmt.Sprintf("input_%d", i), t.Shape())
	}
	outs := build(ctx, inputs)
	var all []*Node
	var varBytes int64
	for v := range ctx.IterVariables() {
		if v.InUseByGraph(g) {
			varBytes += int64(v.Shape().Memory())
		}
		if v.ChangedInGraph(g) {
			if param := g.GetParameterByName(v.ParameterName()); param != nil {
				g.AliasOutputToParameter(len(all), param)
			}
			all = append(all, v.ValueGraph(g))
		}
	}
	g.Compile(append(all, outs...)...)
	m, err := g.CompiledMemoryStats()
	return m, varBytes, err
}
