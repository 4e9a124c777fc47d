package decoder

import (
	"encoding/json"
)

// SmolLM3 (model_type smollm3, transformers' modeling_smollm3.py and configuration_smollm3.py) is
// a Llama (attention_bias on q/k/v/o, mlp_bias, head_dim = hidden/heads unless config.json sets
// it) whose attention skips RoPE on the NoPE layers: no_rope_layers[i] is 1 where layer i
// rotates its queries and keys and 0 where it does not. SmolLM3Config derives the list when
// config.json has none: int((i+1) % no_rope_layer_interval != 0) for each layer (interval 4 by
// default: every fourth layer is NoPE). Its other defaults differ from Llama's: tied embeddings,
// rope_theta 2e6, 4 key/value heads, pad_token_id 128004.
var _ = register("smollm3", Family{Name: "SmolLM3", Architecture: "SmolLM3ForCausalLM", AttentionBiasField: true, MLPBiasField: true, DefaultPadTokenID: intPtr(128004),
	ConfigJSON: smolLM3ConfigJSON, Defaults: (*Config).smolLM3Defaults, Validate: (*Config).validateSmolLM3})

// SmolLM3 configuration defaults (SmolLM3Config's __init__ / class fields).
const (
	smolLM3DefaultInterval  = 4
	smolLM3DefaultRopeTheta = 2000000.0
	smolLM3DefaultKVHeads   = 4
)

// SmolLM3NoRopeLayers is SmolLM3Config's no_rope_layers for n layers and no_rope_layer_interval
// k: 1 (RoPE) everywhere except every k-th layer (layers k-1, 2k-1, ...), which is 0 (NoPE).
func SmolLM3NoRopeLayers(n, k int) []int {
	out := make([]int, n)
	for i := range out {
		if (i+1)%k != 0 {
			out[i] = 1
		}
	}
	return out
}

// UsesRope reports whether layer applies rotary embeddings to its queries and keys: always,
// except on SmolLM3's NoPE layers (no_rope_layers[layer] = 0).
func (c *Config) UsesRope(layer int) bool {
	if c.ModelType != "smollm3" {
		return true
	}
	return layer >= len(c.NoRopeLayers) || c.NoRopeLayers[layer] != 0
}

// smolLM3Defaults fills what SmolLM3Config sets when config.json (data) lacks the key:
// tie_word_embeddings true, rope_theta 2e6 (unless rope_parameters gave one), num_key_value_heads
// 4, no_rope_layer_interval 4 and no_rope_layers derived from it (Family.Defaults).
func (c *Config) smolLM3Defaults(data []byte, ropeThetaSet bool) {
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(data, &keys) // already known to be a JSON object
	if _, ok := keys["tie_word_embeddings"]; !ok {
		c.TieWordEmbeddings = true
	}
	if _, ok := keys["rope_theta"]; !ok && !ropeThetaSet {
		c.RopeTheta = smolLM3DefaultRopeTheta
	}
	if raw, ok := keys["num_key_value_heads"]; !ok || string(raw) == "null" {
		c.NumKeyValueHeads = smolLM3DefaultKVHeads
	}
	if raw, ok := keys["no_rope_layer_interval"]; !ok || string(raw) == "null" {
		c.NoRopeLayerInterval = smolLM3DefaultInterval
	}
	if c.NoRopeLayers == nil && c.NoRopeLayerInterval > 0 && c.NumHiddenLayers > 0 && c.NumHiddenLayers <= MaxLayers {
		c.NoRopeLayers = SmolLM3NoRopeLayers(c.NumHiddenLayers, c.NoRopeLayerInterval)
	}
}

// validateSmolLM3 refuses the SmolLM3 settings this implementation does not have or that
// transformers would reject: a no_rope_layers entry other than 0 or 1, a list shorter than the
// layers (SmolLM3Attention indexes it by layer), no list and a non-positive
// no_rope_layer_interval to derive it from (with a list, SmolLM3Config never reads the interval).
// (use_sliding_window and layer_types other than full_attention are refused by Validate for
// every family.)
func (c *Config) validateSmolLM3(bad func(field, format string, args ...any)) {
	if c.NoRopeLayers == nil && c.NoRopeLayerInterval <= 0 {
		bad("no_rope_layer_interval", "must be positive to derive no_rope_layers, got %d", c.NoRopeLayerInterval)
		return
	}
	if len(c.NoRopeLayers) < c.NumHiddenLayers {
		bad("no_rope_layers", "has %d entries for %d layers (one per layer: 1 = RoPE, 0 = NoPE)", len(c.NoRopeLayers), c.NumHiddenLayers)
	}
	for i, v := range c.NoRopeLayers {
		if v != 0 && v != 1 {
			bad("no_rope_layers", "entry %d is %d; only 1 (RoPE) and 0 (NoPE) are supported", i, v)
			break
		}
	}
}

// smolLM3ConfigJSON sets the SmolLM3Config keys of config.json (familyConfigJSON).
func smolLM3ConfigJSON(m map[string]any, cfg *Config) {
	m["attention_bias"], m["mlp_bias"] = cfg.AttentionBias, cfg.MLPBias
	m["no_rope_layers"], m["no_rope_layer_interval"] = cfg.NoRopeLayers, cfg.NoRopeLayerInterval
	m["use_sliding_window"] = false
	if _, ok := m["sliding_window"]; !ok {
		m["sliding_window"] = nil
	}
	types := make([]string, cfg.NumHiddenLayers)
	for i := range types {
		types[i] = "full_attention"
	}
	m["layer_types"] = types
	// SmolLM3Config has no head_dim: LlamaAttention reads it when config.json has it, else
	// hidden_size / num_attention_heads.
	delete(m, "head_dim")
	if cfg.HeadDim != cfg.HiddenSize/cfg.NumAttentionHeads {
		m["head_dim"] = cfg.HeadDim
	}
}
