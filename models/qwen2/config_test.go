package qwen2

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
		{`"model_type": "qwen2"`, `"model_type": "llama"`, "model_type"},
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
