package generate

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// The KV cache is a fixed-size [B,KV,L,hd] key and value tensor per layer (head-major: attention's
// products read it with their batch axes leading, so no step transposes it), passed into and out
// of the decode graph (2·layers tensors, keys then values per layer) and updated in place (the
// outputs aliased to the donated inputs), so that one compiled graph per (B, L) serves every step:
// the step's token, slot and the rows' first slots are inputs.
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

// writeSlot returns cache [B,KV,L,hd] with slot (scalar int32) of every row replaced by x [B,KV,1,hd].
func writeSlot(cache, x, slot *Node, how KVUpdate) *Node {
	g := cache.Graph()
	if how == KVUpdateDynamic {
		zero := ScalarZero(g, dtypes.Int32)
		return DynamicUpdateSlice(cache, x, []*Node{zero, zero, slot, zero})
	}
	dims := cache.Shape().Dimensions
	sel := Equal(Iota(g, shapes.Make(dtypes.Int32, dims[2]), 0), slot) // [L]
	sel = BroadcastToDims(Reshape(sel, 1, 1, dims[2], 1), dims...)     // [B,KV,L,hd]
	return Where(sel, BroadcastToDims(x, dims...), cache)
}

// prefillGraph runs m's prompt pass over the left-padded prompts ids [B,P] (positions pos, mask
// [B,P]) and returns the logits of the last position [B,V] and the caches [B,KV,L,hd] with the
// prompt's keys and values in slots 0..P-1 and zeros after; L is the length of keyValid [B,L]
// (only its shape is used).
func prefillGraph(ctx *context.Context, m Model, ids, pos, mask, keyValid *Node) (logits *Node, caches []*Node) {
	b, p := ids.Shape().Dim(0), ids.Shape().Dim(1)
	l := keyValid.Shape().Dim(1)
	logits, kv := m.Prefill(ctx, ids, pos, mask)
	if len(kv) == 0 || len(kv)%2 != 0 {
		panic(fmt.Errorf("KV cache: the prompt pass returned %d key and value tensors, want a pair per layer", len(kv)))
	}
	caches = make([]*Node, len(kv))
	for i, x := range kv { // [B,KV,P,hd] → [B,KV,L,hd]
		caches[i] = x
		if l != p {
			dims := x.Shape().Dimensions
			zeros := Zeros(x.Graph(), shapes.Make(x.DType(), b, dims[1], l-p, dims[3]))
			caches[i] = Concatenate([]*Node{x, zeros}, 2)
		}
	}
	return logits, caches
}

// decodeGraph runs m's decode step on one token per row, tok [B,1] at positions pos [B,1],
// writing its keys and values into slot (scalar int32) of caches and attending to the slots where
// keyValid [B,L] is 1 (the slot itself included). It returns the logits [B,V] and the updated
// caches.
func decodeGraph(ctx *context.Context, m Model, tok, pos, slot, keyValid *Node, caches []*Node, how KVUpdate) (logits *Node, updated []*Node) {
	c := &Cache{Slot: slot, KeyValid: keyValid, in: caches, out: make([]*Node, len(caches)), how: how}
	logits = m.Decode(ctx, tok, pos, c)
	for i, x := range c.out {
		if x == nil {
			panic(fmt.Errorf("KV cache: the decode step did not update cache %d (layer %d)", i, i/2))
		}
	}
	return logits, c.out
}
