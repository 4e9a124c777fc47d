package decoder

import (
	"slices"
	"strings"
	"testing"
)

// google/gemma-3-1b's config.json form (transformers 4.50: sliding_window_pattern, no
// layer_types) gives transformers' layer types, and Gemma3TextConfig's defaults fill what a
// config leaves out.
func TestParseConfig_Gemma3PatternAndDefaults(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"model_type": "gemma3_text", "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
		"num_hidden_layers": 13, "num_attention_heads": 4, "sliding_window_pattern": 6, "sliding_window": 512}`))
	if err != nil {
		t.Fatal(err)
	}
	var full []int
	for i := range cfg.NumHiddenLayers {
		if !cfg.Sliding(i) {
			full = append(full, i)
		}
	}
	g := cfg.Gemma
	if !slices.Equal(full, []int{5, 11}) || cfg.HeadDim != 256 || cfg.NumKeyValueHeads != 4 || !cfg.TieWordEmbeddings ||
		cfg.RopeTheta != 1e6 || g.QueryPreAttnScalar != 256 || g.RopeLocalBaseFreq != 10000 || g.HiddenActivation != "gelu_pytorch_tanh" ||
		g.FinalLogitSoftcapping != 0 || g.SlidingWindow != 512 {
		t.Errorf("parsed %+v %+v (full-attention layers %v)", cfg, g, full)
	}
	if n := len(cfg.Tensors()); n != 1+13*13+1 { // per layer: 4 projections, q/k norms, 4 layer norms, 3 MLP
		t.Errorf("%d tensors, want %d", n, 1+13*13+1)
	}
	// The gemma-3-4b text config's linear RoPE scaling applies to the full-attention layers only:
	// rope_theta's frequencies divided by factor; the sliding layers keep rope_local_base_freq's.
	cfg, err = ParseConfig([]byte(`{"model_type": "gemma3_text", "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
		"num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
		"rope_scaling": {"factor": 8.0, "rope_type": "linear"}}`))
	if err != nil {
		t.Fatal(err)
	}
	global, local := cfg.InvFreq(), cfg.LocalInvFreq()
	if cfg.Rope.Type != "linear" || global[1] != defaultInvFreq(1e6, 8)[1]/8 || local[1] != defaultInvFreq(1e4, 8)[1] {
		t.Errorf("linear rope %+v: global %v, local %v", cfg.Rope, global, local)
	}
}

// transformers 5 writes one rope_parameters per layer type; they read as 4.55's fields.
func TestParseConfig_Gemma3RopeParametersPerLayerType(t *testing.T) {
	base := strings.Replace(fixtureConfigJSON(t, "gemma3-tiny"), `"rope_scaling": {`, `"rope_parameters": {"full_attention": {"rope_theta": 500000.0, `, 1)
	base = strings.Replace(base, `"rope_type": "linear"`, `"rope_type": "linear"}, "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0}`, 1)
	cfg, err := ParseConfig([]byte(base))
	if err != nil || cfg.RopeTheta != 500000 || cfg.Rope != (Rope{Type: "linear", Factor: 8}) || cfg.Gemma.RopeLocalBaseFreq != 20000 {
		t.Fatalf("got %+v, %v", cfg, err)
	}
	for from, want := range map[string]string{
		`"rope_type": "default", "rope_theta": 20000.0`: `config field rope_parameters.sliding_attention.rope_type: "linear" is not supported (supported: "default")`,
		`"sliding_attention": {`:                        `config field rope_parameters.chunked_attention: not a layer type`,
	} {
		to := map[string]string{`"rope_type": "default", "rope_theta": 20000.0`: `"rope_type": "linear", "factor": 2.0, "rope_theta": 20000.0`,
			`"sliding_attention": {`: `"chunked_attention": {`}[from]
		if _, err := ParseConfig([]byte(strings.Replace(base, from, to, 1))); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want an error containing %q, got %v", to, want, err)
		}
	}
}

// Gemma 3 options this implementation does not have are errors naming the field.
func TestParseConfig_Gemma3Refusals(t *testing.T) {
	base := fixtureConfigJSON(t, "gemma3-tiny")
	for _, c := range []struct{ from, to, want string }{
		{`"attn_logit_softcapping": null`, `"attn_logit_softcapping": 50.0`, `config field attn_logit_softcapping: 50 is not supported (only null`},
		{`"use_bidirectional_attention": false`, `"use_bidirectional_attention": true`, `config field use_bidirectional_attention`},
		{`"hidden_activation": "gelu_pytorch_tanh"`, `"hidden_activation": "gelu"`, `config field hidden_activation: "gelu" is not supported`},
		{`"sliding_window": 4`, `"sliding_window": null`, `config field sliding_window`},
		{`"full_attention"`, `"chunked_attention"`, `config field layer_types: layer 1 is "chunked_attention"; supported: "full_attention", "sliding_attention"`},
		{`"rope_type": "linear"`, `"rope_type": "yarn"`, `config field rope_scaling.rope_type: "yarn" is not supported (supported: "default", "linear")`},
		{`"rope_type": "linear"`, `"rope_type": "llama3"`, `"llama3" is not supported`},
		{`"factor": 8.0`, `"factor": 0.5`, `config field rope_scaling.factor: must be ≥ 1`},
		{`"final_logit_softcapping": 5.0`, `"final_logit_softcapping": -1`, `config field final_logit_softcapping`},
		{`"attention_bias": false`, `"attention_bias": false, "mlp_bias": true`, `config field mlp_bias`},
		{`"layer_types": [`, `"sliding_window_pattern": 2, "_sliding_window_pattern": 3, "unused": [`, `config field _sliding_window_pattern: 3 differs`},
	} {
		if !strings.Contains(base, c.from) {
			t.Fatalf("fixture config lacks %s", c.from)
		}
		_, err := ParseConfig([]byte(strings.Replace(base, c.from, c.to, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error containing %q, got %v", c.to, c.want, err)
		}
	}
	// Another family's config cannot ask for sliding layers, nor a Gemma config lack its fields.
	cfg, _ := Preset("gemma-3-tiny")
	cfg.Gemma = nil
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "config field model_type") {
		t.Errorf("gemma3_text without Gemma: %v", err)
	}
}
