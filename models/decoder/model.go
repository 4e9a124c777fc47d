package decoder

import (
	"strconv"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/gomlxfix"
)

func init() { gomlxfix.Install() }

// maskedScore is added where attention is not allowed (the softmax is computed in float32).
const maskedScore = -1e9

// KVFunc lets a caller replace a layer's freshly computed keys and values [B,KV,S,hd] (RoPE
// applied; head-major, the KV cache's layout) by the ones to attend to, [B,KV,Sk,hd]: a KV cache
// writes the new ones into its slots and returns the whole cache. nil means self-attention over
// the S positions (Sk = S).
type KVFunc func(layer int, k, v *Node) (keys, values *Node)

// weight returns the value of variable name in ctx's scope; under Reuse a missing variable or a
// different shape or dtype panics, naming the variable.
func weight(ctx *context.Context, g *Graph, name string, dtype dtypes.DType, dims ...int) *Node {
	if a := activeAdapter(ctx, g); a != nil {
		if w := a.Weight(ctx, g, name); w != nil {
			return w
		}
	}
	return ctx.VariableWithShape(name, shapes.Make(dtype, dims...)).ValueGraph(g)
}

// linear is HF's nn.Linear with weight [out,in]: x [...,in] → [...,out].
func linear(ctx *context.Context, x *Node, out int, bias bool) *Node {
	var y *Node // [...,out]
	if wl := decodeLayoutWeight(ctx, x, out); wl != nil {
		y = matmulLayout(x, wl) // the generator's steps on the pure-Go backend (decode_layout.go)
	} else if yu := matmulUpcast(ctx, x, out); yu != nil {
		y = yu // the generator's bfloat16 steps on XLA's CPU backend (decode_upcast.go)
	} else {
		y = matmulT(x, weight(ctx, x.Graph(), "weight", x.DType(), out, x.Shape().Dim(-1)))
	}
	if bias {
		y = Add(y, ExpandLeftToRank(weight(ctx, x.Graph(), "bias", x.DType(), out), y.Rank()))
	}
	if a := activeAdapter(ctx, x.Graph()); a != nil {
		y = a.Linear(ctx, x, y) // LoRA: y + s·B·A·x (models/lora)
	}
	return y
}

// rmsNorm is x / sqrt(mean(x²) + eps) · w over x's last axis, normalized in float32 as HF does
// (Gemma 3: gemmaRMSNorm).
func rmsNorm(ctx *context.Context, cfg *Config, x *Node) *Node {
	if cfg.Gemma != nil {
		return gemmaRMSNorm(ctx, cfg, x)
	}
	xf := ConvertDType(x, dtypes.Float32)
	xf = Mul(xf, Rsqrt(AddScalar(ReduceAndKeep(Square(xf), ReduceMean, -1), cfg.RMSNormEps)))
	w := weight(ctx, x.Graph(), "weight", x.DType(), x.Shape().Dim(-1))
	return Mul(ConvertDType(xf, x.DType()), ExpandLeftToRank(w, x.Rank()))
}

// Rotary returns RoPE's cos and sin [B,S,1,hd] for position ids pos [B,S]: the angle of pair i is
// pos·f_i (f_i = θ^(-2i/hd), or its llama3 rescaling: Config.InvFreq), computed in float32 like
// HF, duplicated over the two halves of a head.
func Rotary(cfg *Config, pos *Node, dtype dtypes.DType) (cos, sin *Node) {
	return rotary(cfg.InvFreq(), pos, dtype)
}

// rotary is Rotary for the inverse frequencies inv [hd/2].
func rotary(inv []float64, pos *Node, dtype dtypes.DType) (cos, sin *Node) {
	invFreq := make([]float32, len(inv))
	for i, f := range inv {
		invFreq[i] = float32(f)
	}
	angle := Mul(ExpandAxes(ConvertDType(pos, dtypes.Float32), -1), ExpandLeftToRank(Const(pos.Graph(), invFreq), 3)) // [B,S,hd/2]
	angle = ExpandAxes(Concatenate([]*Node{angle, angle}, -1), 2)                                                     // [B,S,1,hd]
	return ConvertDType(Cos(angle), dtype), ConvertDType(Sin(angle), dtype)
}

// applyRotary is x·cos + rotate_half(x)·sin, rotate_half(x) = (-x₂, x₁) computed with a 2×2 einsum
// instead of slices (Slice's stock gradient needs Pad). x [B,S,N,hd].
func applyRotary(x, cos, sin *Node) *Node {
	dims := x.Shape().Dimensions
	halves := Reshape(x, dims[0], dims[1], dims[2], 2, dims[3]/2) // [B,S,N,2,hd/2]
	rot := ConstAsDType(x.Graph(), x.DType(), [][]float32{{0, -1}, {1, 0}})
	rotated := Reshape(Einsum("bsnix,ji->bsnjx", halves, rot), dims...) // [B,S,N,hd]
	return Add(Mul(x, cos), Mul(rotated, sin))
}

// attention is grouped-query self-attention: x [B,S,D] → [B,S,D]; allowed [B,S,Sk] bool.
// Query head h uses key/value head h/G, as HF's repeat_kv does, without copying keys.
func attention(ctx *context.Context, cfg *Config, layer int, x, cos, sin, allowed *Node, kv KVFunc) *Node {
	b, s := x.Shape().Dim(0), x.Shape().Dim(1)
	nKV, g, hd, bias := cfg.NumKeyValueHeads, cfg.NumGroups(), cfg.HeadDim, cfg.QKVBias()
	q := Reshape(linear(ctx.In("q_proj"), x, nKV*g*hd, bias), b, s, nKV*g, hd) // [B,S,H,hd]
	k := Reshape(linear(ctx.In("k_proj"), x, nKV*hd, bias), b, s, nKV, hd)     // [B,S,KV,hd]
	v := Reshape(linear(ctx.In("v_proj"), x, nKV*hd, bias), b, s, nKV, hd)     // [B,S,KV,hd]
	q, k = qkNorm(ctx, cfg, q, k)                                              // Qwen3, Gemma 3 (qwen3.go)
	if cfg.UsesRope(layer) {                                                   // not on SmolLM3's NoPE layers (smollm3.go)
		q, k = applyRotary(q, cos, sin), applyRotary(k, cos, sin)
	}
	// Keys and values head-major, [B,KV,S,hd]: the products below then read them with their batch
	// axes (b, k) leading, so a decode step reads its cache as stored, with no transpose.
	k, v = TransposeAllDims(k, 0, 2, 1, 3), TransposeAllDims(v, 0, 2, 1, 3)
	if kv != nil {
		k, v = kv(layer, k, v) // [B,KV,Sk,hd]
	}
	sk := k.Shape().Dim(2)
	q5 := Reshape(q, b, s, nKV, g, hd)                                       // [B,S,KV,G,hd]
	scores := MulScalar(Einsum("bqkgd,bksd->bkgqs", q5, k), scoreScale(cfg)) // [B,KV,G,S,Sk]
	scores = ConvertDType(scores, dtypes.Float32)
	mask := BroadcastToDims(Reshape(allowed, b, 1, 1, s, sk), scores.Shape().Dimensions...)
	probs := Softmax(Where(mask, scores, Scalar(x.Graph(), dtypes.Float32, maskedScore)), -1)
	out := Einsum("bkgqs,bksd->bqkgd", ConvertDType(probs, x.DType()), v) // [B,S,KV,G,hd]
	return linear(ctx.In("o_proj"), Reshape(out, b, s, nKV*g*hd), cfg.HiddenSize, cfg.OBias())
}

// mlp is SwiGLU: down(silu(gate(x)) · up(x)), with biases when mlp_bias (Llama); Gemma 3 has
// GELU-tanh in place of silu (activation).
func mlp(ctx *context.Context, cfg *Config, x *Node) *Node {
	gate := linear(ctx.In("gate_proj"), x, cfg.IntermediateSize, cfg.MLPBias) // [B,S,I]
	up := linear(ctx.In("up_proj"), x, cfg.IntermediateSize, cfg.MLPBias)
	return linear(ctx.In("down_proj"), Mul(activation(cfg, gate), up), cfg.HiddenSize, cfg.MLPBias) // [B,S,D]
}

// Decoder runs the embedding, the layers and the final norm: ids [B,S] int → hidden [B,S,D] in
// the weights' dtype. pos [B,S] are the position ids; allowed [B,S,Sk] says which keys each query
// may attend to; kv may be nil (see KVFunc). ctx must hold the weights (LoadWeights, InitWeights).
// Sliding-window layers (Gemma 3) restrict allowed to the window of each query's column, the
// queries being the columns of the keys (Sk = S: no cache; a cache uses DecoderMasks).
func Decoder(ctx *context.Context, cfg *Config, ids, pos, allowed *Node, kv KVFunc) *Node {
	return DecoderMasks(ctx, cfg, ids, pos, SelfAttentionMasks(cfg, allowed), kv)
}

// DecoderMasks is Decoder with the allowed keys of each kind of layer given (LayerMasks).
func DecoderMasks(ctx *context.Context, cfg *Config, ids, pos *Node, masks LayerMasks, kv KVFunc) *Node {
	ctx = ctx.Reuse().In("model")
	x := embedLookup(ctx, cfg, ids) // [B,S,D]
	x = scaleEmbeddings(cfg, x)     // Gemma 3: ·√D
	cos, sin := Rotary(cfg, pos, x.DType())
	allowed := masks.Full
	var local [2]*Node // Gemma 3's sliding layers' RoPE
	if cfg.HasSlidingLayers() {
		local[0], local[1] = rotary(cfg.LocalInvFreq(), pos, x.DType())
	}
	var chain *ckptChain // gradient checkpointing (checkpoint.go)
	if kv == nil && checkpointing(x.Graph()) {
		chain = &ckptChain{first: x}
		x = StopGradient(x)
	}
	for i := range cfg.NumHiddenLayers {
		lctx := ctx.In("layers").In(strconv.Itoa(i))
		layer := func(x *Node) *Node {
			if cfg.Gemma != nil {
				return gemmaLayer(lctx, cfg, i, x, masks, [2]*Node{cos, sin}, local, kv)
			}
			x = Add(x, attention(lctx.In("self_attn"), cfg, i, rmsNorm(lctx.In("input_layernorm"), cfg, x), cos, sin, allowed, kv))
			return Add(x, mlp(lctx.In("mlp"), cfg, rmsNorm(lctx.In("post_attention_layernorm"), cfg, x)))
		}
		if chain == nil {
			x = layer(x)
			continue
		}
		chain.ins, chain.fns = append(chain.ins, x), append(chain.fns, layer)
		x = StopGradient(layer(x))
	}
	if chain != nil {
		x = Identity(x) // the leaf CheckpointGradients takes the loss's adjoint at
		chain.out = x
		addChain(x.Graph(), chain)
	}
	return rmsNorm(ctx.In("norm"), cfg, x)
}

// embedding returns model.embed_tokens.weight [V,D] in its stored dtype; ctx is the "model" scope.
func embedding(ctx *context.Context, cfg *Config, g *Graph) *Node {
	ctx = ctx.In("embed_tokens")
	dtype := dtypes.Float32
	if v := ctx.GetVariableByScopeAndName(ctx.Scope(), "weight"); v != nil {
		dtype = v.DType()
	}
	return weight(ctx, g, "weight", dtype, cfg.VocabSize, cfg.HiddenSize)
}

// embedLookup is transformers' nn.Embedding(vocab_size, hidden_size, padding_idx) on ids [B,S] →
// [B,S,D]: the rows of model.embed_tokens.weight, where the rows looked up for the padding index
// (Config.PaddingIdx) pass no gradient back to the weight, as torch's embedding backward skips
// padding_idx. Only the lookup's: a tied LM head still sends that row its gradient (Logits).
func embedLookup(ctx *context.Context, cfg *Config, ids *Node) *Node {
	x := Gather(embedding(ctx, cfg, ids.Graph()), ExpandAxes(ids, -1)) // [B,S,D]
	pad, ok := cfg.PaddingIdx()
	if !ok {
		return x
	}
	isPad := BroadcastToDims(ExpandAxes(Equal(ids, Scalar(ids.Graph(), ids.DType(), pad)), -1), x.Shape().Dimensions...) // [B,S,D]
	return Where(isPad, StopGradient(x), x)
}

// AttentionMask is causal attention restricted to real keys: mask [B,S] (1 = token, 0 = pad) →
// allowed [B,S,S] bool, allowed[b,q,k] = k ≤ q ∧ mask[b,k].
func AttentionMask(mask *Node) *Node {
	b, s := mask.Shape().Dim(0), mask.Shape().Dim(1)
	causal := ExpandAxes(LowerTriangular(mask.Graph(), s), 0)                           // [1,S,S]
	keys := Reshape(NotEqual(mask, ZerosLike(mask)), b, 1, s)                           // [B,1,S]
	return LogicalAnd(BroadcastToDims(causal, b, s, s), BroadcastToDims(keys, b, s, s)) // [B,S,S]
}

// Hidden is Decoder with the causal and padding mask of mask [B,S]: hidden states [B,S,D].
func Hidden(ctx *context.Context, cfg *Config, ids, pos, mask *Node) *Node {
	return Decoder(ctx, cfg, ids, pos, AttentionMask(mask), nil)
}

// Logits applies the LM head (tied: the embedding matrix) to hidden [...,D] → [...,V] float32,
// soft-capped when final_logit_softcapping is set (Gemma 3).
func Logits(ctx *context.Context, cfg *Config, hidden *Node) *Node {
	head := ctx.Reuse().In("lm_head")
	if cfg.TieWordEmbeddings {
		head = ctx.Reuse().In("model").In("embed_tokens")
	}
	var logits *Node // [...,V]
	if wl := decodeLayoutWeight(head, hidden, cfg.VocabSize); wl != nil {
		logits = matmulLayout(hidden, wl) // the generator's steps on the pure-Go backend (decode_layout.go)
	} else if lu := matmulUpcast(head, hidden, cfg.VocabSize); lu != nil {
		logits = lu // the generator's bfloat16 steps on XLA's CPU backend (decode_upcast.go)
	} else if cfg.TieWordEmbeddings {
		logits = matmulT(hidden, embedding(ctx.Reuse().In("model"), cfg, hidden.Graph()))
	} else {
		logits = matmulT(hidden, weight(head, hidden.Graph(), "weight", hidden.DType(), cfg.VocabSize, cfg.HiddenSize))
	}
	return ConvertDType(softcapLogits(cfg, logits), dtypes.Float32)
}
