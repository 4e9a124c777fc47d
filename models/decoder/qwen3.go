package decoder

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Qwen3 dense (transformers' modeling_qwen3.py): attention_bias (q/k/v/o alike), a head_dim of 128
// when config.json has none, and a per-head RMSNorm of the queries and keys (q_norm, k_norm over
// head_dim) before RoPE — QKNorm, which Gemma 3 shares.
var _ = register("qwen3", Family{Name: "Qwen3", Architecture: "Qwen3ForCausalLM", AttentionBiasField: true, QKNorm: true, DefaultHeadDim: 128,
	ConfigJSON: qwen3ConfigJSON})

// qwen3ConfigJSON is what Qwen3Config writes beyond the shared keys.
func qwen3ConfigJSON(m map[string]any, cfg *Config) {
	m["use_sliding_window"], m["attention_bias"], m["head_dim"] = false, cfg.AttentionBias, cfg.HeadDim
	setDefault(m, "max_window_layers", cfg.NumHiddenLayers)
	setDefault(m, "sliding_window", nil) // Qwen3Config: None unless use_sliding_window
}

// qkNorm is Qwen3's q_norm/k_norm: each query and key head [B,S,N,hd] normalised over hd by the
// family's RMSNorm (Gemma 3's x·(1+w) there), before RoPE; q and k unchanged for a family without
// QKNorm.
func qkNorm(ctx *context.Context, cfg *Config, q, k *Node) (*Node, *Node) {
	if !cfg.Family().QKNorm {
		return q, k
	}
	return rmsNorm(ctx.In("q_norm"), cfg, q), rmsNorm(ctx.In("k_norm"), cfg, k)
}

// qkNormTensors are qkNorm's weights of the layer whose names start with p.
func qkNormTensors(cfg *Config, p string, add func(name string, shape ...int)) {
	if cfg.Family().QKNorm {
		add(p+"self_attn.q_norm.weight", cfg.HeadDim)
		add(p+"self_attn.k_norm.weight", cfg.HeadDim)
	}
}
