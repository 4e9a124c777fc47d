package decoder

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Adapter changes the decoder's projections without touching its weights (PEFT's LoRA:
// models/lora). Set on a context with SetAdapter, it is consulted by every linear layer and every
// weight read of the graphs built on that context (training, scoring, generation) for every
// family, unless DisableAdapter was called for the graph (the reference policy π_ref).
type Adapter interface {
	// Linear returns the output of the projection at ctx's scope (e.g. /model/layers/0/self_attn/q_proj)
	// given its input x [...,in] and the base layer's output y [...,out].
	Linear(ctx *context.Context, x, y *Node) *Node
	// Weight returns the value to read instead of variable name at ctx's scope (a trained copy of a
	// module, PEFT's modules_to_save), or nil for the stored weight.
	Weight(ctx *context.Context, g *Graph, name string) *Node
}

// Context parameters of the adapter: the adapter (a parameter of the root scope) and, per graph,
// whether it is disabled.
const (
	adapterParam  = "posttrain_adapter"
	disabledParam = "posttrain_adapter_disabled"
)

// SetAdapter makes every graph built on ctx (and on contexts sharing its variables) run through a;
// nil removes it.
func SetAdapter(ctx *context.Context, a Adapter) {
	ctx.InAbsPath("/").SetParam(adapterParam, a)
}

// AdapterOf returns the adapter set on ctx, or nil.
func AdapterOf(ctx *context.Context) Adapter {
	v, _ := ctx.GetParam(adapterParam)
	a, _ := v.(Adapter)
	return a
}

// DisableAdapter makes graph g read the base model: PEFT's disable_adapter(), TRL's reference
// model under PEFT.
func DisableAdapter(ctx *context.Context, g *Graph) {
	ctx.InAbsPath("/").SetGraphParam(g, disabledParam, true)
}

// activeAdapter returns the adapter of ctx for graph g: nil when none is set or it is disabled.
func activeAdapter(ctx *context.Context, g *Graph) Adapter {
	a := AdapterOf(ctx)
	if a == nil {
		return nil
	}
	if off, _ := ctx.GetGraphParam(g, disabledParam); off == true {
		return nil
	}
	return a
}

// CopyTokenizer copies the tokenizer files of the checkpoint (or tokenizer file) at path into dir,
// as Save does (an adapter's output carries them too).
func CopyTokenizer(dir, path string) error { return copyTokenizer(dir, path, "model") }
