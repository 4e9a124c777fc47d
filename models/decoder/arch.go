package decoder

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/generate"
)

// Arch is the decoder of Config (any supported family) as the generator runs it (generate.Model): the prompt pass
// that hands its keys and values to the cache, the decode step against the cache, and the
// uncached last logits. The weights are those of the context the Generator was given.
type Arch struct {
	Config *Config
}

var _ generate.Model = Arch{}

// Spec is the vocabulary, max_position_embeddings and eos_token_id of the config; the family
// (errors' prefix) is its model_type.
func (a Arch) Spec() generate.Spec {
	c := a.Config
	return generate.Spec{Family: c.ModelType, VocabSize: c.VocabSize, MaxPositions: c.MaxPositionEmbeddings, EOSTokenIDs: c.EOSTokenIDs}
}

// Prefill runs the left-padded prompts ids [B,P] (positions pos, mask [B,P]) and returns the
// logits of the last position [B,V] and every layer's keys and values [B,KV,P,hd].
func (a Arch) Prefill(ctx *context.Context, ids, pos, mask *Node) (logits *Node, kv []*Node) {
	cfg := a.Config
	b, p := ids.Shape().Dim(0), ids.Shape().Dim(1)
	kv = make([]*Node, 2*cfg.NumHiddenLayers)
	readsDecodeLayout(ctx, ids.Graph())
	keep := func(layer int, k, v *Node) (*Node, *Node) {
		kv[2*layer], kv[2*layer+1] = k, v
		return k, v
	}
	h := Decoder(ctx, cfg, ids, pos, AttentionMask(mask), keep)  // [B,P,D]
	last := Reshape(Slice(h, AxisRange(), AxisElem(p-1)), b, -1) // [B,D]
	return Logits(ctx, cfg, last), kv                            // [B,V], [B,KV,P,hd] each
}

// Decode runs one token per row, tok [B,1] at positions pos [B,1], attending to the cache's real
// slots through cache.Update (a sliding-window layer: those of the window ending at cache.Slot,
// the query's column); it returns the logits [B,V].
func (a Arch) Decode(ctx *context.Context, tok, pos *Node, cache *generate.Cache) *Node {
	cfg := a.Config
	readsDecodeLayout(ctx, tok.Graph())
	masks := LayerMasks{Full: cache.Allowed()} // [B,1,L]
	if cfg.HasSlidingLayers() {                // the window of the query's column, cache.Slot
		l := masks.Full.Shape().Dim(2)
		window := WindowMask(cfg, cache.Slot, Iota(tok.Graph(), shapes.Make(dtypes.Int32, l), 0)) // [L]
		masks.Sliding = LogicalAnd(masks.Full, BroadcastToDims(Reshape(window, 1, 1, l), masks.Full.Shape().Dimensions...))
	}
	h := DecoderMasks(ctx, cfg, tok, pos, masks, cache.Update)  // [B,1,D]
	return Logits(ctx, cfg, Reshape(h, tok.Shape().Dim(0), -1)) // [B,V]
}

// LastLogits is the uncached reference: the full forward pass over ids [B,S] and the logits at
// position last [B] (int32) of each row [B,V]. It multiplies by the same prepared weights as
// Prefill and Decode (readsDecodeLayout: the pure-Go decode layouts where a product fits them, the
// float32 copies of bfloat16 weights on XLA's CPU backend), so that the cached and uncached paths
// differ only in the cache.
func (a Arch) LastLogits(ctx *context.Context, ids, pos, mask, last *Node) *Node {
	cfg := a.Config
	readsDecodeLayout(ctx, ids.Graph())
	h := Hidden(ctx, cfg, ids, pos, mask)                            // [B,S,D]
	at := Stack([]*Node{Iota(h.Graph(), last.Shape(), 0), last}, -1) // [B,2]: (row, position)
	return Logits(ctx, cfg, Gather(h, at))                           // [B,V]
}
