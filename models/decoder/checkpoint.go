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

// The LM head is checkpointed the same way, chunk by chunk (CheckpointedChunk): each chunk's
// per-token outputs (log-probs) are computed with their gradient stopped, and the backward pass
// recomputes the chunk's logits from its hidden states, takes the chunk's adjoint at them and
// hands it to the hidden states as a term Σ h ⊙ sg(v_h); the chunks' logits [B,c,V] float32 are
// then never kept for the backward pass.

// ckptGraphs are the graphs being built with checkpointed decoders: each decoder call's layers
// (a chain) and each checkpointed LM-head chunk.
var ckptGraphs = struct {
	sync.Mutex
	m map[*Graph]*ckptGraph
}{m: map[*Graph]*ckptGraph{}}

type ckptGraph struct {
	chains  []*ckptChain
	heads   []*ckptSegment
	forward *Node // the last head chunk's outputs, which the next chunk waits for
}

// ckptChain is one checkpointed decoder call: the embedding output with its gradient path, each
// layer's input (gradient stopped) and function, and the last layer's output as a leaf that
// CheckpointGradients takes the loss's adjoint at.
type ckptChain struct {
	first *Node
	ins   []*Node
	fns   []func(x *Node) *Node
	out   *Node
}

// ckptSegment is one checkpointed LM-head chunk: its hidden states (with their gradient path),
// the function of them whose gradient is wanted, and its output as a leaf.
type ckptSegment struct {
	in, out *Node
	fn      func(h *Node) *Node
}

// CheckpointLayers makes the decoders built in g from now on (Decoder, DecoderMasks, Hidden, and
// what calls them; not those with a KV cache) and the LM-head chunks (CheckpointedChunk)
// checkpointed, until CheckpointGradients(loss) on a loss of g.
func CheckpointLayers(g *Graph) {
	ckptGraphs.Lock()
	defer ckptGraphs.Unlock()
	if _, ok := ckptGraphs.m[g]; !ok {
		ckptGraphs.m[g] = &ckptGraph{}
	}
}

// NoGradient builds fn's part of g — a forward pass whose result the caller detaches (KTO's KL
// rows: TRL computes them under no_grad) — without checkpointing it: nothing of it is kept for a
// backward pass anyway, and a checkpointed copy would be recomputed for a zero adjoint.
func NoGradient(g *Graph, fn func()) {
	ckptGraphs.Lock()
	c, ok := ckptGraphs.m[g]
	delete(ckptGraphs.m, g)
	ckptGraphs.Unlock()
	defer func() {
		if ok {
			ckptGraphs.Lock()
			ckptGraphs.m[g] = c
			ckptGraphs.Unlock()
		}
	}()
	fn()
}

// checkpointed returns g's checkpointing state, nil when g is not checkpointed.
func checkpointed(g *Graph) *ckptGraph {
	ckptGraphs.Lock()
	defer ckptGraphs.Unlock()
	return ckptGraphs.m[g]
}

// checkpointing reports whether decoders built in g are checkpointed.
func checkpointing(g *Graph) bool { return checkpointed(g) != nil }

func addChain(g *Graph, c *ckptChain) {
	ckptGraphs.Lock()
	defer ckptGraphs.Unlock()
	st := ckptGraphs.m[g]
	if st == nil { // its layers ran with their gradient stopped: dropping the chain would lose their gradients
		panic("decoder: a checkpointed decoder's graph stopped checkpointing while it was being built")
	}
	st.chains = append(st.chains, c)
}

// CheckpointedChunk is fn(h) for one chunk of hidden states h [B,c,D]: fn returns the chunk's
// differentiable output (per-token log-probs) and outputs without a gradient (metrics). Where
// h's graph is checkpointed (CheckpointLayers), fn runs on h with its gradient stopped and the
// backward pass recomputes it (see above); elsewhere it is fn(h).
func CheckpointedChunk(h *Node, fn func(h *Node) (out *Node, detached []*Node)) (*Node, []*Node) {
	c := checkpointed(h.Graph())
	if c == nil {
		return fn(h)
	}
	// The chunks of the forward pass run one after the other too: each waits for the previous
	// one's outputs (x + 0·dep, as the backward pass's), else XLA computed every chunk's logits
	// first, all of them alive at once.
	in := StopGradient(h)
	ckptGraphs.Lock()
	prev := c.forward
	ckptGraphs.Unlock()
	if prev != nil {
		in = Add(in, Mul(ScalarZero(h.Graph(), in.DType()), ConvertDType(prev, in.DType())))
	}
	out, detached := fn(in)
	leaf := Identity(StopGradient(out))
	dep := ConvertDType(first(out), dtypes.Float32)
	for _, d := range detached {
		dep = Add(dep, MulScalar(ConvertDType(first(d), dtypes.Float32), 0))
	}
	ckptGraphs.Lock()
	c.heads = append(c.heads, &ckptSegment{in: h, out: leaf, fn: func(h *Node) *Node { y, _ := fn(h); return y }})
	c.forward = dep
	ckptGraphs.Unlock()
	return leaf, detached
}

// first is x's first element as a scalar, its gradient stopped.
func first(x *Node) *Node {
	at := make([]SliceAxisSpec, x.Rank())
	for i := range at {
		at[i] = AxisElem(0)
	}
	return Reshape(Slice(StopGradient(x), at...))
}

// floatParams are the floating-point parameters (weights) y depends on, not through stop, in
// the order first reached.
func floatParams(y, stop *Node) []*Node {
	seen := map[*Node]bool{stop: true}
	var out []*Node
	var walk func(n *Node)
	walk = func(n *Node) {
		if seen[n] {
			return
		}
		seen[n] = true
		if n.Type() == NodeTypeParameter && n.DType().IsFloat() {
			out = append(out, n)
		}
		for _, in := range n.Inputs() {
			walk(in)
		}
	}
	walk(y)
	return out
}

// CheckpointGradients ends checkpointing in loss's graph and returns the loss whose gradient
// recomputes the checkpointed LM-head chunks and layers (see above); loss itself when g has
// none.
//
// Each segment's backward (a head chunk's, a layer's) takes the gradients with respect to its
// input and to the weights it reads explicitly, adds the weights' into float32 sums, and the next
// segment's recomputation waits for those sums (its x + 0·dep, dep made of the input's adjoint
// and the sums): a segment's activations and weight-gradient partials are then dead before the
// next segment starts, which XLA's scheduler would not otherwise guarantee (it deferred the LM
// head's per-chunk weight gradients to the end, keeping every chunk's logits alive). The sums
// reach the weights as terms Σ w ⊙ sg(∂w) − sg(…).
func CheckpointGradients(loss *Node) *Node {
	g := loss.Graph()
	ckptGraphs.Lock()
	c := ckptGraphs.m[g]
	delete(ckptGraphs.m, g)
	ckptGraphs.Unlock()
	if c == nil {
		return loss
	}
	sur := loss
	// term adds s − sg(s), s = Σ y ⊙ sg(v) in float32: zero, with s's gradient.
	term := func(y, v *Node) {
		s := ReduceAllSum(Mul(ConvertDType(y, dtypes.Float32), ConvertDType(StopGradient(v), dtypes.Float32)))
		sur = Add(sur, Sub(s, StopGradient(s)))
	}
	sums := map[*Node]*Node{} // a weight → its gradient's float32 sum over the segments
	var weights []*Node
	// backward recomputes fn at x once dep is known and returns x's adjoint given out's, v, and the
	// next segment's dep.
	backward := func(fn func(*Node) *Node, x, v, dep *Node) (vx, next *Node) {
		xr := Add(StopGradient(x), Mul(ScalarZero(g, x.DType()), ConvertDType(dep, x.DType())))
		out := fn(xr)
		params := floatParams(out, xr)
		// v waits for dep too: an adjoint that is a function of the inputs alone (an SFT loss's)
		// made XLA compute every chunk's [B,c,V] adjoint of the logits first.
		vd := Add(ConvertDType(StopGradient(v), dtypes.Float32), MulScalar(ConvertDType(dep, dtypes.Float32), 0))
		s := ReduceAllSum(Mul(ConvertDType(out, dtypes.Float32), vd))
		grads := Gradient(s, append([]*Node{xr}, params...)...)
		next = ConvertDType(first(grads[0]), dtypes.Float32)
		for i, p := range params {
			gp := ConvertDType(grads[i+1], dtypes.Float32)
			if sums[p] == nil {
				weights = append(weights, p)
				sums[p] = gp
			} else {
				sums[p] = Add(sums[p], gp)
			}
			next = Add(next, MulScalar(first(sums[p]), 0))
		}
		return grads[0], next
	}
	if len(c.heads) > 0 {
		outs := make([]*Node, len(c.heads))
		for i, h := range c.heads {
			outs[i] = h.out
		}
		vs := Gradient(loss, outs...)
		dep := first(vs[0])
		for i, h := range c.heads { // one chunk after the other
			var vh *Node
			vh, dep = backward(h.fn, h.in, vs[i], dep)
			term(h.in, vh) // on to the final norm and the layers
		}
	}
	if len(c.chains) > 0 {
		outs := make([]*Node, len(c.chains))
		for i, ch := range c.chains {
			outs[i] = ch.out
		}
		vs := Gradient(sur, outs...) // through the loss and the head chunks' terms
		for i, ch := range c.chains {
			v, dep := vs[i], first(vs[i])
			for l := len(ch.ins) - 1; l >= 0; l-- {
				v, dep = backward(ch.fns[l], ch.ins[l], v, dep)
			}
			term(ch.first, v) // on to the embedding
		}
	}
	for _, w := range weights {
		term(w, sums[w])
	}
	return sur
}
