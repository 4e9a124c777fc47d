package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/models/decoder"
)

// init without a tokenizer writes the preset as is; init --dtype bfloat16 stores bf16.
func TestInit_CLI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if _, err := runCLI(t, "init", "--preset", "tiny", "--dtype", "bfloat16", "--out", dir); err != nil {
		t.Fatal(err)
	}
	cfg, err := decoder.ReadConfig(dir)
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

// init --preset llama-3.2-tiny --tokenizer DIR takes the family tokenizer (a directory with
// tokenizer.json.gz and tokenizer_config.json): the vocabulary, bos and eos follow it and its
// files are copied in. (Gemma 3's: TestTrainers_Gemma3WithItsTokenizer.)
func TestInit_FamilyPresetWithTokenizer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	tokDir := filepath.Join("..", "..", "data", "tokenizer", "testdata", "llama3")
	if _, err := runCLI(t, "init", "--preset", "llama-3.2-tiny", "--tokenizer", tokDir, "--dtype", "bfloat16", "--out", dir); err != nil {
		t.Fatal(err)
	}
	cfg, err := decoder.ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Llama 3.1's tokenizer: 128256 ids, <|begin_of_text|> 128000, <|eot_id|> 128009.
	if cfg.ModelType != "llama" || cfg.Rope.Type != "llama3" || cfg.VocabSize != 128256 || cfg.BOSTokenID == nil ||
		*cfg.BOSTokenID != 128000 || !slices.Equal(cfg.EOSTokenIDs, []int{128009}) {
		t.Errorf("config %+v", cfg)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		if !fileExists(filepath.Join(dir, name)) {
			t.Errorf("%s not copied", name)
		}
	}
}
