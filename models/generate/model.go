package generate

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Model is what a decoder family gives the Generator: three graph functions over the weights held
// in a context.Context, and the few facts the generator checks its inputs by (Spec). The
// generator owns everything else: the left-padded layout, position ids, the KV cache tensors and
// how a step writes them, the sampler, the buckets and the stop ids. A family implements it once
// (decoder.Arch); nothing here changes when one is added.
//
// Prefill, Decode and LastLogits are called while a graph is built, once per compiled bucket,
// with the context the Generator was given (its variables already loaded, under Reuse). Shapes: B rows, P prompt
// positions, L cache slots, V vocabulary, KV key/value heads, hd head size. The logits are
// float32 (any float dtype is accepted and converted); ids and positions int32; masks int32 0/1.
//
// Positions are HF generate()'s: cumsum(mask) − 1 over the left-padded rows, pads at 1. Causal
// order (and any sliding window) is over columns: prompt positions in Prefill, cache slots in
// Decode (slot s of a row holds its s-th column, the left padding included).
type Model interface {
	// Spec is read at the start of every Generate call.
	Spec() Spec
	// Prefill runs the left-padded prompts ids [B,P] at positions pos [B,P], mask [B,P] (1 =
	// token, 0 = pad), each column attending to the real columns up to itself. It returns the
	// logits of the last column [B,V] and the keys and values every layer attends to, [B,KV,P,hd]
	// each (after RoPE, in the dtype the cache should hold), in the order keys of layer 0, values
	// of layer 0, keys of layer 1, …: the cache's layout, with layer i's pair at 2i and 2i+1.
	Prefill(ctx *context.Context, ids, pos, mask *Node) (logits *Node, kv []*Node)
	// Decode runs one token per row, tok [B,1] at positions pos [B,1], against the cache: each
	// layer hands its new key and value [B,KV,1,hd] to cache.Update(layer, k, v), which writes
	// them into slot cache.Slot and returns the layer's whole keys and values [B,KV,L,hd] to
	// attend to, where cache.Allowed() [B,1,L] is true (the real slots, this one included). Every
	// layer Prefill returned keys and values for must call Update once. It returns the logits [B,V].
	Decode(ctx *context.Context, tok, pos *Node, cache *Cache) (logits *Node)
	// LastLogits is the full forward pass without a cache, the reference Decode is tested against:
	// ids [B,S] at positions pos [B,S] with mask [B,S] as in Prefill, and the logits [B,V] at
	// column last [B] (int32) of each row.
	LastLogits(ctx *context.Context, ids, pos, mask, last *Node) (logits *Node)
}

// WeightPreparer is implemented by a Model that derives tensors from the weights for its prompt
// pass and decode step (decoder.Arch: the pure-Go backend's layout of the projection weights). The
// Generator calls PrepareWeights with its context, its backend and the rows of the coming decode
// steps (the batch bucket) at the start of every generation, cached or not, before the prompt pass
// (its time counts in Stats.Prefill), so that weights a trainer updated between calls are seen
// and the uncached reference multiplies by what the cached path does.
type WeightPreparer interface {
	PrepareWeights(ctx *context.Context, b backends.Backend, rows int) error
}

// Spec is what the Generator must know of a Model.
type Spec struct {
	// Family names the model in errors ("qwen2" gives "qwen2 generate: …").
	Family string
	// VocabSize is V, the logits' last dimension; prompt ids must lie in [0, V).
	VocabSize int
	// MaxPositions is the longest sequence (prompt + new tokens) the model takes, HF's
	// max_position_embeddings; 0 means no limit.
	MaxPositions int
	// EOSTokenIDs end a row when Options.StopIDs is nil (config.json's eos_token_id).
	EOSTokenIDs []int
}

// Cache is the KV cache as one decode step's graph sees it: 2·layers tensors [B,KV,L,hd], keys
// then values per layer, of which Update returns a layer's pair with this step's key and value
// written into Slot.
type Cache struct {
	// Slot is the slot this step's token goes to: scalar int32, the same for every row.
	Slot *Node
	// KeyValid [B,L] int32 is 1 where a slot holds a real token (Slot included).
	KeyValid *Node

	in, out []*Node  // the step's input caches and the ones Update wrote
	how     KVUpdate // how Update writes a slot
}

// Allowed is the keys a query may attend to, [B,1,L] bool: the slots where KeyValid is 1. A
// family with sliding windows restricts it further by slot (the slots are the columns).
func (c *Cache) Allowed() *Node {
	b, l := c.KeyValid.Shape().Dim(0), c.KeyValid.Shape().Dim(1)
	return Reshape(NotEqual(c.KeyValid, ZerosLike(c.KeyValid)), b, 1, l)
}

// Update writes layer's key and value of this step, k and v [B,KV,1,hd], into Slot of the layer's
// cache and returns the layer's keys and values [B,KV,L,hd] to attend to.
func (c *Cache) Update(layer int, k, v *Node) (keys, values *Node) {
	if layer < 0 || 2*layer+1 >= len(c.in) {
		panic(fmt.Errorf("KV cache: layer %d, but the prompt pass returned %d caches (%d layers)", layer, len(c.in), len(c.in)/2))
	}
	if c.out[2*layer] != nil {
		panic(fmt.Errorf("KV cache: layer %d updated twice in one decode step", layer))
	}
	c.out[2*layer] = writeSlot(c.in[2*layer], k, c.Slot, c.how)
	c.out[2*layer+1] = writeSlot(c.in[2*layer+1], v, c.Slot, c.how)
	return c.out[2*layer], c.out[2*layer+1]
}
