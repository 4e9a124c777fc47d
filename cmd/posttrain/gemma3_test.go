package main

import (
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/posttrain/posttrain/models/decoder"
)

// Every trainer runs on a Gemma 3-shaped tiny checkpoint (sliding window 4, shorter than every
// sequence) with Gemma 3's real tokenizer (262,145 ids) and chat template (which writes the BOS),
// as for Llama; each trained checkpoint keeps the Gemma config and loads back.
func TestTrainers_Gemma3WithItsTokenizer(t *testing.T) {
	dir := trainersWithTokenizer(t, "gemma-3-tiny", filepath.Join("..", "..", "data", "tokenizer", "testdata", "gemma3"), "gemma3_text", false)
	base, err := decoder.ReadConfig(filepath.Join(dir, "model"))
	if err != nil {
		t.Fatal(err)
	}
	if base.ModelType != "gemma3_text" || base.VocabSize != 262145 || base.BOSTokenID == nil || *base.BOSTokenID != 2 {
		t.Fatalf("init config %+v", base)
	}
	for _, run := range []string{"sft", "dpo", "kto", "grpo"} {
		cfg, err := decoder.ReadConfig(filepath.Join(dir, run))
		if err != nil {
			t.Fatalf("%s: %v", run, err)
		}
		if cfg.ModelType != base.ModelType || !reflect.DeepEqual(cfg.Gemma, base.Gemma) || !slices.Equal(cfg.LayerTypes, base.LayerTypes) ||
			cfg.HeadDim != base.HeadDim || cfg.TieWordEmbeddings != base.TieWordEmbeddings {
			t.Errorf("%s: saved config %+v %+v, want %+v %+v", run, cfg, cfg.Gemma, base, base.Gemma)
		}
	}
}
