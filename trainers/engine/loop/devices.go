package loop

import (
	"fmt"
	"path"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/posttrain/posttrain/internal/shard"
)

// dataAxis is the name of the one axis of the data-parallel device mesh, modelAxis of the
// tensor-parallel one.
const (
	dataAxis  = shard.DataAxis
	modelAxis = "model"
)

// Megatron's split of a decoder block (Shoeybi et al. 2019, §3): the projections that fan out
// (q, k, v; gate, up) split by output rows — axis 0 of HF's [out, in] weight, and their biases —
// and the two that fan back in (o, down) by input columns (axis 1), so that attention heads and
// the MLP's hidden units live on one device each and one all-reduce per sub-block joins them.
var (
	columnParallel = map[string]bool{"q_proj": true, "k_proj": true, "v_proj": true, "gate_proj": true, "up_proj": true}
	rowParallel    = map[string]bool{"o_proj": true, "down_proj": true}
)

// dataParallel runs the driver's graphs on several devices through XLA's SPMD partitioner
// (GoMLX's AutoSharding, Shardy): a 1-D mesh of the backend's first n devices, every variable
// (weights, float32 masters, accumulators, AdamW moments) replicated on each — or, with FSDP
// (shard), the trained ones split along their first axis — and each micro-batch input split
// along its first (batch) axis. The graph is the single-device one —
// the loss is a sum over the whole micro-batch divided by norm — so the partitioner inserts the
// all-reduce of the gradients itself: no collective is written here, and the result is the
// one-device result up to the order of float32 additions.
//
// Which inputs are split is fixed per compiled graph, while GoMLX's Exec caches graphs by the
// shapes of the per-device pieces only: a split [2b, S] input and a replicated [b, S] one have
// the same pieces. So each layout (which inputs are split) has its own Exec; a micro-batch
// whose batch does not divide by n (the last of a pass) runs replicated, every device computing
// all of it.
type dataParallel struct {
	n        int
	tp       bool // tensor parallel: the inputs replicated, the projections split (tensorParallel)
	mesh     *distributed.DeviceMesh
	split    *distributed.ShardingSpec // axis 0 over the mesh
	repl     *distributed.ShardingSpec
	newAccum func() (*context.Exec, error)
	accums   map[string]*context.Exec // by layout: one letter per input, s(plit) or r(eplicated)
	// Split and Replicated count the tensors tensorParallel or shard split over the devices and
	// those they left whole (a dimension that does not divide by n), for the run's log.
	Split, Replicated int
	replicatedNames   []string
}

func newDataParallel(b backends.Backend, n int, tp bool) (*dataParallel, error) {
	axis := dataAxis
	if tp {
		axis = modelAxis
	}
	mesh, err := shard.Mesh(b, n, axis) // the generator's and the scorers' mesh too
	if err != nil {
		return nil, err
	}
	split, err := distributed.BuildSpec(mesh).S(axis).Done()
	if err != nil {
		return nil, fmt.Errorf("devices %d: %w", n, err)
	}
	return &dataParallel{n: n, tp: tp, mesh: mesh, split: split, repl: distributed.NewReplicatedShardingSpec(mesh),
		accums: map[string]*context.Exec{}}, nil
}

// tensorParallel gives every projection variable of ctx — the weights, trained or frozen, and
// what the optimizer keeps beside a trained one under its own scope (master, accumulator,
// moments), all named as the weight — Megatron's split (columnParallel, rowParallel) where the
// axis divides by the devices; the rest (embeddings, norms, LoRA adapters, the head) stays
// replicated. Nothing else changes: the graph is the one-device graph, and XLA's partitioner
// propagates the weights' layout through the activations and inserts the collectives.
func (dp *dataParallel) tensorParallel(ctx *context.Context) error {
	for v := range ctx.IterVariables() {
		d, layer := v.Shape().Dimensions, path.Base(v.Scope())
		axis := -1
		switch {
		case columnParallel[layer] && (v.Name() == "weight" || v.Name() == "bias"):
			axis = 0
		case rowParallel[layer] && v.Name() == "weight" && len(d) == 2:
			axis = 1
		}
		if axis < 0 {
			continue
		}
		if d[axis]%dp.n != 0 {
			dp.Replicated++
			dp.replicatedNames = append(dp.replicatedNames, v.ScopeAndName())
			continue
		}
		dp.Split++
		axes := make([]distributed.AxisSpec, len(d))
		axes[axis] = distributed.AxisSpec{modelAxis}
		spec, err := distributed.NewShardingSpec(dp.mesh, axes...)
		if err == nil {
			err = v.SetShardingSpec(spec)
		}
		if err != nil {
			return fmt.Errorf("tensor parallel: %s: %w", v.ScopeAndName(), err)
		}
	}
	if dp.Split == 0 {
		return fmt.Errorf("tensor_parallel (--tensor-parallel) over %d devices would split nothing: no projection's split dimension divides by %d; give a --devices that divides the heads' and MLP widths", dp.n, dp.n)
	}
	return nil
}

// replicatedSummary names up to three of the tensors left whole, for the log.
func (dp *dataParallel) replicatedSummary() string {
	names := dp.replicatedNames[:min(3, len(dp.replicatedNames))]
	out := strings.Join(names, ", ")
	if len(dp.replicatedNames) > 3 {
		out += ", …"
	}
	return out
}

// shard gives each variable of vs whose first axis divides by the devices the split spec (FSDP);
// the others stay replicated.
func (dp *dataParallel) shard(vs []*context.Variable) error {
	for _, v := range vs {
		d := v.Shape().Dimensions
		if len(d) == 0 || d[0]%dp.n != 0 {
			dp.Replicated++
			dp.replicatedNames = append(dp.replicatedNames, v.ScopeAndName())
			continue
		}
		dp.Split++
		// One axis spec per dimension (the first split, the others replicated), so that
		// Variable.ShardShape reports the shard (it returns the whole shape for a spec of
		// another rank, though feeding and collecting split the first axis either way).
		axes := make([]distributed.AxisSpec, len(d))
		axes[0] = distributed.AxisSpec{dataAxis}
		spec, err := distributed.NewShardingSpec(dp.mesh, axes...)
		if err == nil {
			err = v.SetShardingSpec(spec)
		}
		if err != nil {
			return fmt.Errorf("fsdp: %s: %w", v.ScopeAndName(), err)
		}
	}
	if dp.Split == 0 {
		return fmt.Errorf("fsdp (--fsdp) over %d devices would split nothing: no tensor's first dimension divides by %d; give a --devices that divides the model's widths", dp.n, dp.n)
	}
	return nil
}

// setOutputSpecs, called by a graph function of e once it has set the variables' new values in
// g, gives the compiled program the output layout context.Exec reads back: first each changed
// variable (in the context's order, as context.Exec lists them) in its own spec, then the
// graph's outputs replicated. GoMLX v0.26 applies WithOutputShardingSpecs positionally to all
// outputs, changed variables included, and rebuilds each changed variable with its own spec
// without checking (docs/distributed.md): a split variable given a replicated output comes back
// N times its size. Nothing on one device (dp nil).
func (dp *dataParallel) setOutputSpecs(e *context.Exec, ctx *context.Context, g *graph.Graph) {
	if dp == nil {
		return
	}
	var specs []*distributed.ShardingSpec
	for v := range ctx.IterVariables() { // the order of context.Exec's EnumerateVariables
		if v.ChangedInGraph(g) {
			spec := v.ShardingSpec()
			if spec == nil {
				spec = dp.repl
			}
			specs = append(specs, spec)
		}
	}
	e.WithOutputShardingSpecs(append(specs, dp.repl)...)
}

// replicate makes e a graph over the mesh whose inputs and outputs are all replicated (the
// update and the zeroing of the accumulators: every device holds the same state).
func (dp *dataParallel) replicate(e *context.Exec) error {
	e.AutoSharding(dp.mesh).WithInputShardingSpecs(dp.repl).WithOutputShardingSpecs(dp.repl)
	return e.SetDefaultShardingSpec(dp.repl)
}

// micro runs one micro-batch: the inputs of the method (not the driver's own norm and dropout
// state, names) whose first axis divides by the devices are split along it.
func (dp *dataParallel) micro(args []any, names []string) ([]*tensors.Tensor, error) {
	ts := make([]*tensors.Tensor, len(args))
	specs := make([]*distributed.ShardingSpec, len(args))
	var layout strings.Builder
	for i, a := range args {
		ts[i] = tensors.FromAnyValue(a)
		specs[i] = dp.repl
		if d := ts[i].Shape().Dimensions; !dp.tp && names[i] != normInput && names[i] != rngInput && len(d) > 0 && d[0]%dp.n == 0 {
			specs[i] = dp.split
		}
		layout.WriteByte("rs"[btoi(specs[i] == dp.split)])
	}
	e := dp.accums[layout.String()]
	if e == nil {
		var err error
		if e, err = dp.newAccum(); err != nil {
			return nil, err
		}
		e.AutoSharding(dp.mesh).WithInputShardingSpecs(specs...).WithOutputShardingSpecs(dp.repl)
		if err := e.SetDefaultShardingSpec(dp.repl); err != nil {
			return nil, err
		}
		dp.accums[layout.String()] = e
	}
	return dp.runTensors(e, ts, specs)
}

// run executes e with every argument replicated.
func (dp *dataParallel) run(e *context.Exec, args []any) ([]*tensors.Tensor, error) {
	ts := make([]*tensors.Tensor, len(args))
	specs := make([]*distributed.ShardingSpec, len(args))
	for i, a := range args {
		ts[i], specs[i] = tensors.FromAnyValue(a), dp.repl
	}
	return dp.runTensors(e, ts, specs)
}

// runTensors shards each argument by its spec, runs e, and returns the first device's outputs
// (every output of the driver's graphs is replicated).
func (dp *dataParallel) runTensors(e *context.Exec, ts []*tensors.Tensor, specs []*distributed.ShardingSpec) ([]*tensors.Tensor, error) {
	in := make([]any, len(ts))
	for i, t := range ts {
		d, err := distributed.ShardTensor(specs[i], t)
		if err != nil {
			return nil, err
		}
		in[i] = d
	}
	outs, err := e.Exec(in...)
	if err != nil {
		return nil, err
	}
	return outs[:len(outs)/dp.n], nil
}

func (dp *dataParallel) close() {
	for _, e := range dp.accums {
		e.Finalize()
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
