package decoder

// Qwen2 (transformers' modeling_qwen2.py; Qwen2.5 too): the shared decoder with biases on the q, k
// and v projections always (config.json has no attention_bias field; o_proj has none) and plain
// RoPE; the config's rope_scaling may still be llama3's (RopeTypes). Nothing else differs, so
// this file is the registration and what Qwen2Config writes.
var _ = register("qwen2", Family{Name: "Qwen2", Architecture: "Qwen2ForCausalLM", QKVBias: true, ConfigJSON: qwen2ConfigJSON})

// qwen2ConfigJSON is what Qwen2Config writes beyond the shared keys: no sliding window, head_dim
// only when it is not hidden_size/num_attention_heads.
func qwen2ConfigJSON(m map[string]any, cfg *Config) {
	m["use_sliding_window"] = false
	setDefault(m, "max_window_layers", cfg.NumHiddenLayers)
	setDefault(m, "sliding_window", cfg.MaxPositionEmbeddings)
	delete(m, "head_dim")
	if cfg.HeadDim != cfg.HiddenSize/cfg.NumAttentionHeads {
		m["head_dim"] = cfg.HeadDim
	}
}
