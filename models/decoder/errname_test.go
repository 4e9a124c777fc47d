package decoder

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/safetensors"
)

// Errors about a model start with its model_type, not the package's name: a Llama's missing
// tensor says "llama", a SmolLM3's bad config.json "smollm3", an unsupported model_type names
// itself, and errors before any config is read start with "model".
func TestErrors_NameTheModelType(t *testing.T) {
	stored, err := safetensors.ReadModelDir("../testdata/llama-tiny/model")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ReadConfig("../testdata/llama-tiny/model")
	if err != nil {
		t.Fatal(err)
	}
	delete(stored, "model.norm.weight")
	if err := SetWeights(context.New(), cfg, stored, dtypes.Float32, "llama-tiny"); err == nil || !strings.HasPrefix(err.Error(), `llama llama-tiny: tensor "model.norm.weight" is missing`) {
		t.Errorf("missing tensor: %v", err)
	}
	if err := SetWeights(context.New(), cfg, stored, dtypes.Float16, "llama-tiny"); err == nil || !strings.HasPrefix(err.Error(), "llama: compute dtype") {
		t.Errorf("compute dtype: %v", err)
	}
	if err := Save(t.TempDir(), context.New(), cfg, SaveOptions{DType: "int8"}); err == nil || !strings.HasPrefix(err.Error(), "llama save: ") {
		t.Errorf("save dtype: %v", err)
	}
	dir := t.TempDir()
	for name, conf := range map[string]string{
		"smollm3":     `{"model_type": "smollm3", "vocab_size": 8, "hidden_size": 4, "intermediate_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "no_rope_layers": [1]}`,
		"gemma3_text": `{"model_type": "gemma3_text"}`,
		"model":       `{"vocab_size": 8}`,
	} {
		sub := filepath.Join(dir, name)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, ConfigFileName), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadConfig(sub); err == nil || !strings.HasPrefix(err.Error(), name+" "+filepath.Join(sub, ConfigFileName)+": config field") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ReadConfig(filepath.Join(dir, "none")); err == nil || !strings.HasPrefix(err.Error(), "model: ") {
		t.Errorf("no config.json: %v", err)
	}
	if _, err := Preset("qwen4"); err == nil || !strings.HasPrefix(err.Error(), `model: unknown preset "qwen4"`) {
		t.Errorf("unknown preset: %v", err)
	}
}
