package qwen2

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// The KV cache is a fixed-size [B,L,KV,hd] key and value tensor per layer, passed into and out of
// the decode graph (2·layers tensors, keys then values per layer), so that one compiled graph per
// (B, L) serves every step: the step's token, slot, positions and key-valid mask are inputs.
// Slot s of row b holds the key/value of the s-th position of the left-padded prompt followed by
// the generated tokens; keyValid[b,s] = 1 where that slot holds a real token.

// KVUpdate says how a decode step writes its key/value into the cache slot.
type KVUpdate int

const (
	// KVUpdateAuto uses DynamicUpdateSlice where the backend has it (XLA), else KVUpdateWhere.
	KVUpdateAuto KVUpdate = iota
	// KVUpdateWhere selects the slot with Where(Iota(L) = slot, new, cache): O(L) per step, works
	// on every backend (the pure-Go one lacks DynamicUpdateSlice).
	KVUpdateWhere
	// KVUpdateDynamic writes the slot in place with DynamicUpdateSlice.
	KVUpdateDynamic
)

// ParseKVUpdate parses "auto" (or ""), "where" or "dynamic".
func ParseKVUpdate(s string) (KVUpdate, error) {
	switch s {
	case "", "auto":
		return KVUpdateAuto, nil
	case "where":
		return KVUpdateWhere, nil
	case "dynamic":
		return KVUpdateDynamic, nil
	}
	return KVUpdateAuto, fmt.Errorf("KV cache update %q is not supported; valid: auto, where, dynamic", s)
}

// resolve picks the concrete update for backend b.
func (u KVUpdate) resolve(b backends.Backend) KVUpdate {
	if u != KVUpdateAuto {
		return u
	}
	if b.Capabilities().Operations[backends.OpTypeDynamicUpdateSlice] {
		return KVUpdateDynamic
	}
	return KVUpdateWhere
}

// writeSlot returns cache [B,L,KV,hd] with slot (scalar int32) of every row replaced by x [B,1,KV,hd].
func writeSlot(cache, x, slot *Node, how KVUpdate) *Node {
	g := cache.Graph()
	if how == KVUpdateDynamic {
		zero := ScalarZero(g, dtypes.Int32)
		return DynamicUpdateSlice(cache, x, []*Node{zero, slot, zero, zero})
	}
	dims := cache.Shape().Dimensions
	sel := Equal(Iota(g, shapes.Make(dtypes.Int32, dims[1]), 0), slot) // [L]
	sel = BroadcastToDims(Reshape(sel, 1, dims[1], 1, 1), dims...)     // [B,L,KV,hd]
	return Where(sel, BroadcastToDims(x, dims...), cache)
}

// prefillGraph runs the left-padded prompts ids [B,P] (positions pos, mask [B,P]) and returns the
// logits of the last position [B,V] and the caches [B,L,KV,hd] with the prompt's keys and values in
// slots 0..P-1 and zeros after; L is the length of keyValid [B,L] (only its shape is used).
func prefillGraph(ctx *context.Context, cfg *Config, ids, pos, mask, keyValid *Node) (logits *Node, caches []*Node) {
	b, p := ids.Shape().Dim(0), ids.Shape().Dim(1)
	l := keyValid.Shape().Dim(1)
	caches = make([]*Node, 2*cfg.NumHiddenLayers)
	extend := func(x *Node) *Node { // [B,P,KV,hd] → [B,L,KV,hd]
		if l == p {
			return x
		}
		zeros := Zeros(x.Graph(), shapes.Make(x.DType(), b, l-p, cfg.NumKeyValueHeads, cfg.HeadDim))
		return Concatenate([]*Node{x, zeros}, 1)
	}
	kv := func(layer int, k, v *Node) (*Node, *Node) {
		caches[2*layer], caches[2*layer+1] = extend(k), extend(v)
		return k, v
	}
	h := Decoder(ctx, cfg, ids, pos, AttentionMask(mask), kv)    // [B,P,D]
	last := Reshape(Slice(h, AxisRange(), AxisElem(p-1)), b, -1) // [B,D]
	return Logits(ctx, cfg, last), caches                        // [B,V], caches
}

// decodeGraph runs one token per row, tok [B,1] at positions pos [B,1], writing its keys and
// values into slot (scalar int32) of caches and attending to the slots where keyValid [B,L] is 1
// (the slot itself included). It returns the logits [B,V] and the updated caches.
func decodeGraph(ctx *context.Context, cfg *Config, tok, pos, slot, keyValid *Node, caches []*Node, how KVUpdate) (logits *Node, updated []*Node) {
	b, l := keyValid.Shape().Dim(0), keyValid.Shape().Dim(1)
	out := make([]*Node, len(caches))
	kv := func(layer int, k, v *Node) (*Node, *Node) {
		out[2*layer] = writeSlot(caches[2*layer], k, slot, how)
		out[2*layer+1] = writeSlot(caches[2*layer+1], v, slot, how)
		return out[2*layer], out[2*layer+1]
	}
	allowed := Reshape(NotEqual(keyValid, ZerosLike(keyValid)), b, 1, l) // [B,1,L]
	h := Decoder(ctx, cfg, tok, pos, allowed, kv)                        // [B,1,D]
	return Logits(ctx, cfg, Reshape(h, b, -1)), out                      // [B,V], caches
}

// lastLogitsGraph is the uncached reference: the full forward pass over ids [B,S] and the logits
// at position last [B] (int32) of each row [B,V].
func lastLogitsGraph(ctx *context.Context, cfg *Config, ids, pos, mask, last *Node) *Node {
	h := Hidden(ctx, cfg, ids, pos, mask)                            // [B,S,D]
	at := Stack([]*Node{Iota(h.Graph(), last.Shape(), 0), last}, -1) // [B,2]: (row, position)
	return Logits(ctx, cfg, Gather(h, at))                           // [B,V]
}
