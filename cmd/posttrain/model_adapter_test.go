package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// A LoRA output directory is a --model: its base (adapter_config.json's base_model_name_or_path)
// with the adapter folded in, merged once into the cache; the weights are posttrain merge's.
func TestModel_LoRADirectory(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("POSTTRAIN_GGUF_CACHE", filepath.Join(dir, "cache"))
	base := looptest.Model(t)
	data := multData(t, dir, "sft", "8")
	adapter := filepath.Join(dir, "adapter")
	common := []string{"--dataset", data, "--max-steps", "2", "--per-device-train-batch-size", "2", "--learning-rate", "5e-2"}
	if _, err := runCLI(t, append([]string{"sft", "--model", base, "--output-dir", adapter, "--use-peft", "--lora-r", "4"}, common...)...); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, append([]string{"sft", "--model", adapter, "--output-dir", filepath.Join(dir, "more")}, common...)...); err != nil {
		t.Fatalf("training on the adapter directory: %v", err)
	}
	merged := filepath.Join(dir, "merged")
	if _, err := runCLI(t, "merge", "--model", base, "--adapter", adapter, "--output-dir", merged); err != nil {
		t.Fatal(err)
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "cache", "lora-*"))
	if len(entries) != 1 {
		t.Fatalf("cache holds %v, want one merged model", entries)
	}
	want, _, err := safetensors.ReadFile(filepath.Join(merged, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := safetensors.ReadFile(filepath.Join(entries[0], "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) == 0 {
		t.Fatalf("%d tensors, merge wrote %d", len(got), len(want))
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || string(g.Data) != string(w.Data) {
			t.Errorf("tensor %s differs from posttrain merge's", name)
		}
	}
	// An adapter whose base is missing is one line naming both.
	raw, _ := os.ReadFile(filepath.Join(adapter, "adapter_config.json"))
	bad := filepath.Join(dir, "bad")
	os.MkdirAll(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "adapter_config.json"), []byte(strings.Replace(string(raw), base, filepath.Join(dir, "gone"), 1)), 0o644)
	_, err = runCLI(t, append([]string{"sft", "--model", bad, "--output-dir", filepath.Join(dir, "o")}, common...)...)
	if err == nil || !strings.Contains(err.Error(), "model "+bad+": its base:") || strings.Contains(err.Error(), "\n") {
		t.Errorf("missing base: %v", err)
	}
}
