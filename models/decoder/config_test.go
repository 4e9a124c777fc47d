package decoder

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func tinyConfigJSON(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(tinyDir, "model", ConfigFileName))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestParseConfig_Tiny(t *testing.T) {
	cfg, err := ParseConfig([]byte(tinyConfigJSON(t)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HeadDim != 16 || cfg.NumGroups() != 2 || !cfg.TieWordEmbeddings || cfg.RopeTheta != 1e6 || cfg.RMSNormEps != 1e-6 ||
		cfg.BOSTokenID == nil || *cfg.BOSTokenID != 1022 || len(cfg.EOSTokenIDs) != 1 || cfg.EOSTokenIDs[0] != 1023 || cfg.TorchDType != "float32" {
		t.Errorf("parsed %+v", cfg)
	}
	if got, want := len(cfg.Tensors()), 1+2*12+1; got != want {
		t.Errorf("%d tensors, want %d", got, want)
	}
}

func TestParseConfig_RefusesUnsupported(t *testing.T) {
	base := tinyConfigJSON(t)
	for _, c := range []struct{ from, to, field string }{
		{`"rope_scaling": null`, `"rope_scaling": {"type": "yarn", "factor": 4.0}`, "rope_scaling"},
		{`"use_sliding_window": false`, `"use_sliding_window": true`, "use_sliding_window"},
		{`"hidden_act": "silu"`, `"hidden_act": "gelu"`, "hidden_act"},
		{`"model_type": "qwen2"`, `"model_type": "gemma2"`, "model_type"},
		{`"num_key_value_heads": 2`, `"num_key_value_heads": 3`, "num_key_value_heads"},
		{`"hidden_size": 64`, `"hidden_size": 0`, "hidden_size"},
		{`"attention_dropout": 0.0`, `"attention_dropout": 0.1`, "attention_dropout"},
		{`"num_hidden_layers": 2`, `"num_hidden_layers": 1000000000`, "num_hidden_layers"}, // exhausted memory listing weights
	} {
		if !strings.Contains(base, c.from) {
			t.Fatalf("fixture config lacks %s", c.from)
		}
		_, err := ParseConfig([]byte(strings.Replace(base, c.from, c.to, 1)))
		if err == nil || !strings.Contains(err.Error(), "config field "+c.field) {
			t.Errorf("%s: want an error naming the field, got %v", c.to, err)
		}
	}
}

func TestParseConfig_EOSListAndDefaults(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"model_type": "qwen2", "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
		"num_hidden_layers": 1, "num_attention_heads": 2, "eos_token_id": [3, 5], "tie_word_embeddings": false}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NumKeyValueHeads != 2 || cfg.HeadDim != 4 || cfg.BOSTokenID != nil || len(cfg.EOSTokenIDs) != 2 || cfg.RopeTheta != 10000 {
		t.Errorf("parsed %+v", cfg)
	}
	if specs := cfg.Tensors(); specs[len(specs)-1].Name != "lm_head.weight" {
		t.Errorf("untied head: last tensor %q, want lm_head.weight", specs[len(specs)-1].Name)
	}
}

// transformers ≥ 5 writes rope_parameters instead of rope_theta/rope_scaling.
func TestParseConfig_RopeParameters(t *testing.T) {
	base := strings.Replace(tinyConfigJSON(t), `"rope_theta": 1000000.0,`, `"rope_parameters": {"rope_type": "default", "rope_theta": 5000.0},`, 1)
	cfg, err := ParseConfig([]byte(base))
	if err != nil || cfg.RopeTheta != 5000 {
		t.Fatalf("got %v, %v; want rope_theta 5000", cfg, err)
	}
	_, err = ParseConfig([]byte(strings.Replace(base, `"rope_type": "default"`, `"rope_type": "yarn"`, 1)))
	if err == nil || !strings.Contains(err.Error(), "rope_parameters.rope_type") {
		t.Fatalf("want a rope_type error, got %v", err)
	}
}

func fixtureConfigJSON(t *testing.T, fixture string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../testdata", fixture, "model", ConfigFileName))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestParseConfig_Families(t *testing.T) {
	qwen3, err := ParseConfig([]byte(fixtureConfigJSON(t, "qwen3-tiny")))
	if err != nil {
		t.Fatal(err)
	}
	if qwen3.HeadDim != 32 || !qwen3.Family().QKNorm || qwen3.QKVBias() || qwen3.OBias() || len(qwen3.Tensors()) != 1+2*11+1 {
		t.Errorf("qwen3: %+v, %d tensors", qwen3, len(qwen3.Tensors()))
	}
	llama, err := ParseConfig([]byte(fixtureConfigJSON(t, "llama-tiny")))
	if err != nil {
		t.Fatal(err)
	}
	want := Rope{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}
	if llama.Rope != want || !llama.QKVBias() || !llama.OBias() || !llama.MLPBias || len(llama.Tensors()) != 1+2*16+2 {
		t.Errorf("llama: %+v, %d tensors", llama, len(llama.Tensors()))
	}
	// Qwen3Config's head_dim defaults to 128, Llama's to hidden/heads.
	for typ, hd := range map[string]int{"qwen3": 128, "llama": 4} {
		cfg, err := ParseConfig([]byte(`{"model_type": "` + typ + `", "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
			"num_hidden_layers": 1, "num_attention_heads": 2}`))
		if err != nil || cfg.HeadDim != hd {
			t.Errorf("%s default head_dim: %v, %v; want %d", typ, cfg, err, hd)
		}
	}
}

// Unsupported model types, rope types and options of the new families are errors naming the
// field and what is supported.
func TestParseConfig_FamilyRefusals(t *testing.T) {
	llama := fixtureConfigJSON(t, "llama-tiny")
	qwen3 := fixtureConfigJSON(t, "qwen3-tiny")
	for _, c := range []struct{ base, from, to, want string }{
		{llama, `"model_type": "llama"`, `"model_type": "gemma2"`, `config field model_type: "gemma2" is not supported (supported: "gemma3_text", "llama", "qwen2", "qwen3", "smollm3")`},
		{llama, `"rope_type": "llama3"`, `"rope_type": "yarn"`, `config field rope_scaling.rope_type: "yarn" is not supported (supported: "default", "llama3")`},
		{llama, `"rope_type": "llama3"`, `"rope_type": "dynamic"`, `"dynamic" is not supported`},
		{llama, `"rope_type": "llama3"`, `"type": "linear"`, `"linear" is not supported`},
		{llama, `"factor": 32.0`, `"factor": 32.0, "attention_factor": 2`, `config field rope_scaling.attention_factor: not supported with rope_type "llama3"`},
		{llama, `"factor": 32.0,`, ``, `config field rope_scaling.factor`},
		{llama, `"high_freq_factor": 4.0`, `"high_freq_factor": 1.0`, `low_freq_factor < high_freq_factor`},
		{qwen3, `"use_sliding_window": false`, `"use_sliding_window": true`, `config field use_sliding_window`},
		{qwen3, `"attention_bias": false`, `"attention_bias": false, "mlp_bias": true`, `config field mlp_bias`},
		{qwen3, `"max_window_layers": 2`, `"max_window_layers": 2, "layer_types": ["full_attention", "sliding_attention"]`, `layer 1 is "sliding_attention"`},
		{qwen3, `"rope_scaling": null`, `"rope_parameters": {"rope_type": "yarn", "factor": 4.0}`, `config field rope_parameters.rope_type: "yarn"`},
	} {
		if !strings.Contains(c.base, c.from) {
			t.Fatalf("fixture config lacks %s", c.from)
		}
		_, err := ParseConfig([]byte(strings.Replace(c.base, c.from, c.to, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error containing %q, got %v", c.to, c.want, err)
		}
	}
	// The default RoPE written either way is accepted; transformers ≥ 5's rope_parameters carry llama3 too.
	for _, rope := range []string{`"rope_scaling": {"rope_type": "default"}`, `"rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}`} {
		if _, err := ParseConfig([]byte(strings.Replace(qwen3, `"rope_scaling": null`, rope, 1))); err != nil {
			t.Errorf("%s: %v", rope, err)
		}
	}
	v5 := strings.Replace(llama, `"rope_scaling": {`, `"rope_parameters": {"rope_theta": 500000.0, `, 1)
	cfg, err := ParseConfig([]byte(v5))
	if err != nil || cfg.Rope.Type != "llama3" || cfg.Rope.Factor != 32 {
		t.Errorf("rope_parameters with llama3: %+v, %v", cfg, err)
	}
}

// Every registered family has a name, and the help text lists them all in model_type order.
func TestFamilyNames(t *testing.T) {
	for _, mt := range ModelTypes() {
		if Families[mt].Name == "" {
			t.Errorf("model_type %s has no Name", mt)
		}
	}
	if got, want := FamilyNames(), "Gemma 3, Llama, Qwen2, Qwen3 or SmolLM3"; got != want {
		t.Errorf("FamilyNames() = %q, want %q", got, want)
	}
}
