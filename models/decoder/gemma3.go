package decoder

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Gemma 3's text decoder (model_type gemma3_text, Gemma3ForCausalLM), after transformers'
// modeling_gemma3.py and configuration_gemma3.py with the config fields of transformers 4.55
// (the version google/gemma-3-270m's config.json was written by: layer_types, sliding_window,
// rope_local_base_freq, query_pre_attn_scalar, the soft-capping fields). What differs from the
// other families, each switched on Config.Gemma in model.go:
//   - RMSNorm x̂·(1+w), the product in float32 before casting back (Gemma3RMSNorm), for every
//     norm including q_norm/k_norm;
//   - embeddings times √hidden_size, the scale rounded to float32 then to the weights' dtype
//     (Gemma3TextScaledWordEmbedding);
//   - attention scores scaled by query_pre_attn_scalar^-0.5 instead of head_dim^-0.5;
//   - MLP down(gelu_tanh(gate(x))·up(x)) (hidden_activation gelu_pytorch_tanh);
//   - per layer x += post_attention_layernorm(attn(input_layernorm(x))), then
//     x += post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x)));
//   - "sliding_attention" layers attend to the keys of the last sliding_window columns, the query's
//     own included (masking_utils.sliding_window_overlay: kv_idx > q_idx − sliding_window), with
//     the default RoPE of base rope_local_base_freq; "full_attention" layers use rope_theta and
//     rope_scaling ("linear" in the 4B and larger models);
//   - final logits cap·tanh(logits/cap) when final_logit_softcapping is set.
//
// attn_logit_softcapping is refused unless null: Gemma3Attention keeps it but never applies it,
// so a checkpoint that sets it would mean different things to different readers.

var _ = register("gemma3_text", Family{Name: "Gemma 3", Architecture: "Gemma3ForCausalLM", AttentionBiasField: true, QKNorm: true, DefaultHeadDim: 256,
	Gemma3: true, RopeTypes: []string{"default", "linear"},
	// modeling_gemma3.py: Gemma3ForSequenceClassification is the multimodal model's.
	Classifier: "Gemma3TextForSequenceClassification", DefaultPadTokenID: intPtr(0), ConfigJSON: gemma3ConfigJSON})

// gemmaFeedforwardNorms are the norms Gemma 3's layers have around the MLP besides the other
// families' two, for the layer whose names start with p (none for the other families).
func gemmaFeedforwardNorms(c *Config, p string, add func(name string, shape ...int)) {
	if c.Family().Gemma3 {
		add(p+"pre_feedforward_layernorm.weight", c.HiddenSize)
		add(p+"post_feedforward_layernorm.weight", c.HiddenSize)
	}
}

// Gemma3 are the gemma3_text fields of config.json that the other families lack.
type Gemma3 struct {
	// HiddenActivation (hidden_activation): only "gelu_pytorch_tanh".
	HiddenActivation string
	// QueryPreAttnScalar (query_pre_attn_scalar): scores are q·k / √QueryPreAttnScalar.
	QueryPreAttnScalar float64
	// SlidingWindow (sliding_window) is the number of columns a sliding layer's query sees,
	// its own included.
	SlidingWindow int
	// RopeLocalBaseFreq (rope_local_base_freq) is the RoPE base of the sliding layers.
	RopeLocalBaseFreq float64
	// FinalLogitSoftcapping (final_logit_softcapping), 0 when null.
	FinalLogitSoftcapping float64
	// AttnLogitSoftcapping (attn_logit_softcapping) and UseBidirectionalAttention
	// (use_bidirectional_attention, EmbeddingGemma's) are read to be refused: only null and false.
	AttnLogitSoftcapping      float64
	UseBidirectionalAttention bool

	drop gemmaAblation // tests only: drop one Gemma feature to show the fixtures detect it
}

// gemmaAblation switches off Gemma features that the config cannot (tests only).
type gemmaAblation struct{ onePlusW, embedScale, postNorms bool }

// Gemma3LayerTypes are the layer_types values Gemma 3 supports.
var Gemma3LayerTypes = []string{"full_attention", "sliding_attention"}

// DefaultSlidingWindowPattern is Gemma3TextConfig's sliding_window_pattern default: every 6th
// layer is full attention, the others sliding.
const DefaultSlidingWindowPattern = 6

// parseGemma3 parses a gemma3_text config.json with Gemma3TextConfig's defaults (tied embeddings,
// rope_theta 1e6, 4 key/value heads, head_dim 256, …) and, when layer_types is absent, the layers
// transformers derives from sliding_window_pattern: layer i is full attention iff (i+1) % pattern
// is 0. The shared fields are parsed and validated by ParseConfig as for any family.
func parseGemma3(data []byte) (*Config, error) {
	cfg := &Config{HiddenAct: "silu", RopeTheta: 1e6, RMSNormEps: 1e-6, InitializerRange: 0.02,
		TieWordEmbeddings: true, NumKeyValueHeads: 4, MaxPositionEmbeddings: 131072}
	if err := json.Unmarshal(data, cfg); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	window, pattern := 4096, DefaultSlidingWindowPattern
	f := struct {
		HiddenActivation      string   `json:"hidden_activation"`
		QueryPreAttnScalar    float64  `json:"query_pre_attn_scalar"`
		SlidingWindow         *int     `json:"sliding_window"`
		RopeLocalBaseFreq     float64  `json:"rope_local_base_freq"`
		FinalLogitSoftcapping *float64 `json:"final_logit_softcapping"`
		AttnLogitSoftcapping  *float64 `json:"attn_logit_softcapping"`
		Bidirectional         bool     `json:"use_bidirectional_attention"`
		Pattern               *int     `json:"sliding_window_pattern"`
		SavedPattern          *int     `json:"_sliding_window_pattern"`
	}{HiddenActivation: "gelu_pytorch_tanh", QueryPreAttnScalar: 256, SlidingWindow: &window, RopeLocalBaseFreq: 10000, Pattern: &pattern}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	g := &Gemma3{HiddenActivation: f.HiddenActivation, QueryPreAttnScalar: f.QueryPreAttnScalar,
		RopeLocalBaseFreq: f.RopeLocalBaseFreq, UseBidirectionalAttention: f.Bidirectional}
	if f.SlidingWindow != nil {
		g.SlidingWindow = *f.SlidingWindow
	}
	if f.FinalLogitSoftcapping != nil {
		g.FinalLogitSoftcapping = *f.FinalLogitSoftcapping
	}
	if f.AttnLogitSoftcapping != nil {
		g.AttnLogitSoftcapping = *f.AttnLogitSoftcapping
	}
	cfg.Gemma = g
	if cfg.LayerTypes != nil {
		return cfg, nil
	}
	if f.Pattern == nil || *f.Pattern < 1 {
		return nil, fmt.Errorf("config field sliding_window_pattern: must be a positive integer when layer_types is absent")
	}
	if f.SavedPattern != nil && *f.SavedPattern != *f.Pattern {
		return nil, fmt.Errorf("config field _sliding_window_pattern: %d differs from the sliding_window_pattern %d that transformers derives layer_types from; write layer_types", *f.SavedPattern, *f.Pattern)
	}
	cfg.LayerTypes = PatternLayerTypes(cfg.NumHiddenLayers, *f.Pattern)
	return cfg, nil
}

// perLayerTypeRope reports whether rope_parameters is transformers 5's Gemma 3 form, one RoPE per
// layer type: {"full_attention": {…}, "sliding_attention": {…}}.
func perLayerTypeRope(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	_, full := m["full_attention"]
	_, sliding := m["sliding_attention"]
	return full || sliding
}

// gemma3RopeParameters reads transformers 5's rope_parameters keyed by layer type into the 4.55
// fields: full_attention's rope_type/factor and rope_theta (Config.Rope, RopeTheta),
// sliding_attention's rope_theta (RopeLocalBaseFreq; only its default RoPE is supported). Another
// form of rope_parameters is ParseConfig's.
func gemma3RopeParameters(raw json.RawMessage, cfg *Config) error {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m) // perLayerTypeRope parsed it
	for kind, raw := range m {
		field := "rope_parameters." + kind
		var types []string
		switch kind {
		case "full_attention":
			types = cfg.ropeTypes()
		case "sliding_attention":
			types = []string{"default"}
		default:
			return fmt.Errorf("config field %s: not a layer type (supported: %s)", field, quoteList(Gemma3LayerTypes))
		}
		rope, theta, err := parseRope(field, raw, types)
		if err != nil {
			return err
		}
		if theta == nil {
			return fmt.Errorf("config field %s.rope_theta: missing", field)
		}
		if kind == "sliding_attention" {
			cfg.Gemma.RopeLocalBaseFreq = *theta
		} else {
			cfg.Rope, cfg.RopeTheta = rope, *theta
		}
	}
	return nil
}

// PatternLayerTypes are Gemma3TextConfig's layer_types for a sliding_window_pattern: layer i is
// "full_attention" iff (i+1) % pattern == 0, else "sliding_attention".
func PatternLayerTypes(layers, pattern int) []string {
	types := make([]string, max(layers, 0))
	for i := range types {
		types[i] = "sliding_attention"
		if (i+1)%pattern == 0 {
			types[i] = "full_attention"
		}
	}
	return types
}

// validate refuses the Gemma 3 values this implementation does not have, naming the field.
func (g *Gemma3) validate(c *Config) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config field %s: "+format, append([]any{field}, args...)...))
	}
	if g.HiddenActivation != "gelu_pytorch_tanh" {
		bad("hidden_activation", "%q is not supported (only \"gelu_pytorch_tanh\")", g.HiddenActivation)
	}
	if g.QueryPreAttnScalar <= 0 {
		bad("query_pre_attn_scalar", "must be positive, got %g", g.QueryPreAttnScalar)
	}
	if g.SlidingWindow <= 0 {
		bad("sliding_window", "must be a positive integer, got %d (null is not supported)", g.SlidingWindow)
	}
	if g.RopeLocalBaseFreq <= 0 {
		bad("rope_local_base_freq", "must be positive, got %g", g.RopeLocalBaseFreq)
	}
	if g.FinalLogitSoftcapping < 0 {
		bad("final_logit_softcapping", "must be positive or null, got %g", g.FinalLogitSoftcapping)
	}
	if g.AttnLogitSoftcapping != 0 {
		bad("attn_logit_softcapping", "%g is not supported (only null: transformers' Gemma3Attention does not apply it)", g.AttnLogitSoftcapping)
	}
	if g.UseBidirectionalAttention {
		bad("use_bidirectional_attention", "true is not supported (only causal attention)")
	}
	if c.LayerTypes == nil {
		bad("layer_types", "missing (ParseConfig fills it from sliding_window_pattern)")
	}
	return errs
}

// Sliding reports whether layer i is a sliding-window layer.
func (c *Config) Sliding(i int) bool {
	return c.Gemma != nil && i < len(c.LayerTypes) && c.LayerTypes[i] == "sliding_attention"
}

// HasSlidingLayers reports whether any layer is a sliding-window layer.
func (c *Config) HasSlidingLayers() bool {
	for i := range c.NumHiddenLayers {
		if c.Sliding(i) {
			return true
		}
	}
	return false
}

// LocalInvFreq is the sliding layers' RoPE inverse frequencies: the default RoPE with base
// rope_local_base_freq (no rope_scaling), as transformers' rotary_emb_local.
func (c *Config) LocalInvFreq() []float64 {
	return defaultInvFreq(c.Gemma.RopeLocalBaseFreq, c.HeadDim)
}

// LayerMasks are the keys each query may attend to, [B,S,Sk] bool, per kind of layer: Full for
// full-attention layers, Sliding for sliding-window ones (nil when the config has none).
type LayerMasks struct{ Full, Sliding *Node }

// SelfAttentionMasks are the masks of S queries attending to the same S columns (no cache):
// allowed [B,S,S], and for a config with sliding layers allowed ∧ (k > q − sliding_window).
func SelfAttentionMasks(cfg *Config, allowed *Node) LayerMasks {
	masks := LayerMasks{Full: allowed}
	if !cfg.HasSlidingLayers() {
		return masks
	}
	s, sk := allowed.Shape().Dim(1), allowed.Shape().Dim(2)
	if s != sk {
		panic(fmt.Errorf("gemma3_text: sliding-window layers need the query columns: %d queries against %d keys (use DecoderMasks)", s, sk))
	}
	g := allowed.Graph()
	q := Iota(g, shapes.Make(dtypes.Int32, s, 1), 0) // [S,1]: the query's column
	k := Iota(g, shapes.Make(dtypes.Int32, 1, s), 1) // [1,S]: the key's column
	masks.Sliding = LogicalAnd(allowed, BroadcastToDims(ExpandAxes(WindowMask(cfg, q, k), 0), allowed.Shape().Dimensions...))
	return masks
}

// WindowMask is the sliding window over columns: k > q − sliding_window, for int32 query and key
// columns q and k of broadcastable shapes.
func WindowMask(cfg *Config, q, k *Node) *Node {
	return GreaterThan(k, AddScalar(q, float64(-cfg.Gemma.SlidingWindow)))
}

// scaleEmbeddings multiplies Gemma 3's embeddings x [B,S,D] by √hidden_size: the Python float
// rounded to float32 (torch.tensor), then to x's dtype, as Gemma3TextScaledWordEmbedding does.
// The other families' x is returned as is.
func scaleEmbeddings(cfg *Config, x *Node) *Node {
	if cfg.Gemma == nil || cfg.Gemma.drop.embedScale {
		return x
	}
	scale := float64(float32(math.Sqrt(float64(cfg.HiddenSize))))
	return Mul(x, Scalar(x.Graph(), x.DType(), scale))
}

// gemmaRMSNorm is Gemma3RMSNorm: x / sqrt(mean(x²) + eps) · (1 + w) in float32, then cast to x's
// dtype.
func gemmaRMSNorm(ctx *context.Context, cfg *Config, x *Node) *Node {
	xf := ConvertDType(x, dtypes.Float32)
	xf = Mul(xf, Rsqrt(AddScalar(ReduceAndKeep(Square(xf), ReduceMean, -1), cfg.RMSNormEps)))
	w := ConvertDType(weight(ctx, x.Graph(), "weight", x.DType(), x.Shape().Dim(-1)), dtypes.Float32)
	if !cfg.Gemma.drop.onePlusW {
		w = AddScalar(w, 1)
	}
	return ConvertDType(Mul(xf, ExpandLeftToRank(w, x.Rank())), x.DType())
}

// activation is the MLP's: SiLU, or for Gemma 3 torch's gelu(approximate="tanh"),
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), computed in float32 for narrower dtypes and then
// rounded.
func activation(cfg *Config, x *Node) *Node {
	if cfg.Gemma == nil {
		return Mul(x, Sigmoid(x))
	}
	xf := x
	if x.DType() != dtypes.Float64 {
		xf = ConvertDType(x, dtypes.Float32)
	}
	inner := MulScalar(Add(xf, MulScalar(Mul(Mul(xf, xf), xf), 0.044715)), math.Sqrt(2/math.Pi))
	return ConvertDType(Mul(MulScalar(xf, 0.5), AddScalar(Tanh(inner), 1)), x.DType())
}

// scoreScale is the factor of the attention scores q·k: head_dim^-0.5, Gemma 3's
// query_pre_attn_scalar^-0.5.
func scoreScale(cfg *Config) float64 {
	if cfg.Gemma != nil {
		return math.Pow(cfg.Gemma.QueryPreAttnScalar, -0.5)
	}
	return 1 / math.Sqrt(float64(cfg.HeadDim))
}

// gemmaLayer is one Gemma 3 decoder layer: norms before and after attention and MLP
// (Gemma3DecoderLayer); a sliding layer takes the local RoPE and the sliding mask.
func gemmaLayer(ctx *context.Context, cfg *Config, layer int, x *Node, masks LayerMasks, global, local [2]*Node, kv KVFunc) *Node {
	rope, allowed := global, masks.Full
	if cfg.Sliding(layer) {
		rope, allowed = local, masks.Sliding
	}
	post := func(name string, h *Node) *Node {
		if cfg.Gemma.drop.postNorms {
			return h
		}
		return rmsNorm(ctx.In(name), cfg, h)
	}
	h := attention(ctx.In("self_attn"), cfg, layer, rmsNorm(ctx.In("input_layernorm"), cfg, x), rope[0], rope[1], allowed, kv)
	x = Add(x, post("post_attention_layernorm", h))
	h = mlp(ctx.In("mlp"), cfg, rmsNorm(ctx.In("pre_feedforward_layernorm"), cfg, x))
	return Add(x, post("post_feedforward_layernorm", h))
}

// softcapLogits is cap·tanh(logits/cap) in the logits' dtype when final_logit_softcapping is set
// (Gemma3ForCausalLM); the logits unchanged otherwise.
func softcapLogits(cfg *Config, logits *Node) *Node {
	if cfg.Gemma == nil || cfg.Gemma.FinalLogitSoftcapping == 0 {
		return logits
	}
	c := cfg.Gemma.FinalLogitSoftcapping
	return MulScalar(Tanh(DivScalar(logits, c)), c)
}

// gemma3ConfigJSON sets the gemma3_text keys of config.json as Gemma3TextConfig (transformers
// 4.55) writes them: hidden_activation instead of hidden_act, layer_types, the window, the local
// RoPE base, the soft-capping fields (null when unset).
func gemma3ConfigJSON(m map[string]any, cfg *Config) {
	g := cfg.Gemma
	delete(m, "hidden_act")
	softcap := func(v float64) any {
		if v == 0 {
			return nil
		}
		return v
	}
	for k, v := range map[string]any{
		"attention_bias": cfg.AttentionBias, "head_dim": cfg.HeadDim, "hidden_activation": g.HiddenActivation,
		"query_pre_attn_scalar": g.QueryPreAttnScalar, "sliding_window": g.SlidingWindow,
		"rope_local_base_freq": g.RopeLocalBaseFreq, "final_logit_softcapping": softcap(g.FinalLogitSoftcapping),
		"attn_logit_softcapping": softcap(g.AttnLogitSoftcapping), "layer_types": cfg.LayerTypes,
		"use_bidirectional_attention": g.UseBidirectionalAttention,
	} {
		m[k] = v
	}
	if _, ok := m["pad_token_id"]; !ok {
		m["pad_token_id"] = 0
	}
}

// gemma3Preset is the gemma-3-270m shape (real) or gemma-3-tiny's (see Preset).
func gemma3Preset(real bool) Config {
	id := func(v int) *int { return &v }
	cfg := Config{ModelType: "gemma3_text", HiddenAct: "silu", RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true,
		MaxPositionEmbeddings: 32768, InitializerRange: 0.02, TorchDType: "float32",
		Gemma: &Gemma3{HiddenActivation: "gelu_pytorch_tanh", RopeLocalBaseFreq: 10000}}
	if real {
		cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 262144, 640, 2048, 18
		cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim = 4, 1, 256
		cfg.Gemma.QueryPreAttnScalar, cfg.Gemma.SlidingWindow = 256, 512
		cfg.LayerTypes = PatternLayerTypes(18, DefaultSlidingWindowPattern)
		cfg.BOSTokenID, cfg.EOSTokenIDs = id(2), []int{1}
		return cfg
	}
	cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 512, 64, 128, 2
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim = 4, 2, 32
	cfg.Gemma.QueryPreAttnScalar, cfg.Gemma.SlidingWindow = 32, 4
	cfg.LayerTypes = []string{"sliding_attention", "full_attention"}
	cfg.BOSTokenID, cfg.EOSTokenIDs = id(509), []int{511}
	return cfg
}
