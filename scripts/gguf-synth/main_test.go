package main

import (
	"path/filepath"
	"testing"

	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/gguf"
)

// The llama3-8b shape has Meta-Llama-3-8B's 8,030,261,248 parameters.
func TestLlama3_8BShape(t *testing.T) {
	var n int64
	for _, tt := range plan(shapes["llama3-8b"]) {
		e := int64(1)
		for _, d := range tt.Dims {
			e *= d
		}
		n += e
	}
	if n != 8030261248 {
		t.Fatalf("%d parameters, want 8030261248", n)
	}
}

// The tiny file is a GGUF posttrain converts to the shape it was written with.
func TestTinyConverts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	if err := write(path, shapes["tiny"]); err != nil {
		t.Fatal(err)
	}
	res, err := gguf.Convert(path, filepath.Join(dir, "out"), gguf.ConvertOptions{DType: "bfloat16"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := decoder.ReadConfig(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	s := shapes["tiny"]
	if res.Tensors != 21 || cfg.NumHiddenLayers != s.layers || cfg.HiddenSize != s.hidden || cfg.IntermediateSize != s.ffn ||
		cfg.NumKeyValueHeads != s.kvHeads || cfg.VocabSize != s.vocab || cfg.TieWordEmbeddings {
		t.Fatalf("converted to %+v (%d tensors)", cfg, res.Tensors)
	}
}
