package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/models/qwen2"
)

// init without a tokenizer writes the preset as is; init --dtype bfloat16 stores bf16.
func TestInit_CLI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if _, err := runCLI(t, "init", "--preset", "tiny", "--dtype", "bfloat16", "--out", dir); err != nil {
		t.Fatal(err)
	}
	cfg, err := qwen2.ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.VocabSize != 1024 || cfg.TorchDType != "bfloat16" || !slices.Equal(cfg.EOSTokenIDs, []int{1023}) {
		t.Errorf("config %+v", cfg)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"init", "--preset", "gpt2", "--out", dir}, "valid: tiny, qwen2.5-0.5b"},
		{[]string{"init", "--preset", "tiny", "--dtype", "int4", "--out", dir}, "valid: float32, bfloat16, float16"},
		{[]string{"init", "--preset", "tiny", "--tokenizer", t.TempDir(), "--out", dir}, "tokenizer.json"},
	} {
		if _, err := runCLI(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error containing %q", c.args, err, c.want)
		}
	}
}
