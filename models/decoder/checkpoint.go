package decoder

import (
	"sync"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
)

// Gradient checkpointing (HF's gradient_checkpointing, torch.utils.checkpoint per decoder layer):
// the backward pass recomputes each layer's activations from the layer's input instead of keeping
// them from the forward pass, so a training graph holds one layer's activations at a time plus
// every layer's input [B,S,D], not all layers' (attention probabilities, MLP intermediates).
//
// XLA has no rematerialisation barrier go-xla exposes (JAX's optimization_barrier), and a
// recomputation written as the same operations on the same input would be merged back into the
// forward pass by XLA's common-subexpression elimination, its activations kept alive again. So
// the backward pass is written out layer by layer, each recomputation on its input plus zero
// times one element of the adjoint arriving from the layer above (x + 0·v₀, which XLA does not
// fold for floating point): the recomputation depends on the layer above's backward, and can
// neither be merged with the forward pass nor scheduled before it is needed.
//
// The layers of a checkpointed decoder run with their gradient stopped; CheckpointGradients then
// builds, for a loss L, the adjoint v_N = ∂L/∂y_N of the last layer's output, and for each layer
// ℓ from the top, with y_ℓ = f_ℓ(x_ℓ) recomputed, s_ℓ = Σ y_ℓ ⊙ sg(v_ℓ) and v_{ℓ−1} = ∂s_ℓ/∂x_ℓ;
// it returns L + Σ_ℓ (s_ℓ − sg(s_ℓ)) + (s_emb − sg(s_emb)), s_emb = Σ x_1 ⊙ sg(v_0) with x_1 the
// embedding lookup. Its value is L's, and its gradient with respect to each weight is L's: layer
// ℓ's weights through s_ℓ (v_ℓᵀ ∂f_ℓ/∂W), the embedding through s_emb, the final norm and the
// LM head through L.

// ckptGraphs are the graphs being built with checkpointed decoders, each with its decoders'
// layers (one chain per decoder call).
var ckptGraphs = struct {
	sync.Mutex
	m map[*Graph][]*ckptChain
}{m: map[*Graph][]*ckptChain{}}

// ckptChain is one checkpointed decoder call: the embedding output with its gradient path, each
// layer's input (gradient stopped) and function, and the last layer's output as a leaf that
// CheckpointGradients takes the loss's adjoint at.
type ckptChain struct {
	first *Node
	ins   []*Node
	fns   []func(x *Node) *Node
	out   *Node
}

// CheckpointLayers makes the decoders built in g from now on (Decoder, DecoderMasks, Hidden, and
// what calls them; not those with a KV cache) checkpointed, until CheckpointGradients(loss) on
// a loss of g.
func CheckpointLayers(g *Graph) {
	ckptGraphs.Lock()
	defer ckptGraphs.Unlock()
	if _, ok := ckptGraphs.m[g]; !ok {
		ckptGraphs.m[g] = []*ckptChain{}
	}
}

// checkpointing reports whether decoders built in g are checkpointed.
func checkpointing(g *Graph) bool {
	ckptGraphs.Lock()
	defer ckptGraphs.Unlock()
	_, ok := ckptGraphs.m[g]
	return ok
}

func addChain(g *Graph, c *ckptChain) {
	ckptGraphs.Lock()
	defer ckptGraphs.Unlock()
	ckptGraphs.m[g] = append(ckptGraphs.m[g], c)
}

// CheckpointGradients ends checkpointing in loss's graph and returns the loss whose gradient
// recomputes the checkpointed layers (see above); loss itself when g has none.
func CheckpointGradients(loss *Node) *Node {
	g := loss.Graph()
	ckptGraphs.Lock()
	chains := ckptGraphs.m[g]
	delete(ckptGraphs.m, g)
	ckptGraphs.Unlock()
	if len(chains) == 0 {
		return loss
	}
	outs := make([]*Node, len(chains))
	for i, c := range chains {
		outs[i] = c.out
	}
	vs := Gradient(loss, outs...)
	sur := loss
	// term adds s − sg(s), s = Σ y ⊙ sg(v) in float32: zero, with s's gradient.
	term := func(y, v *Node) *Node {
		s := ReduceAllSum(Mul(ConvertDType(y, dtypes.Float32), ConvertDType(StopGradient(v), dtypes.Float32)))
		sur = Add(sur, Sub(s, StopGradient(s)))
		return s
	}
	for i, c := range chains {
		v := vs[i]
		for l := len(c.ins) - 1; l >= 0; l-- {
			x := c.ins[l]
			v0 := Reshape(Slice(StopGradient(v), AxisElem(0), AxisElem(0), AxisElem(0))) // scalar
			xr := Add(x, Mul(ScalarZero(g, x.DType()), ConvertDType(v0, x.DType())))
			s := term(c.fns[l](xr), v)
			v = Gradient(s, xr)[0]
		}
		term(c.first, v)
	}
	return sur
}
