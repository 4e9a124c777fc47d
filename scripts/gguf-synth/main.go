// Command gguf-synth writes a synthetic GGUF of a real model's shape, tensor by tensor, for
// measuring what converting a file of that size takes (docs/gguf.md): Llama 3 8B's shape in
// Q4_K (norms F32), with random quantised blocks and a byte-level BPE vocabulary of its size. The
// weights mean nothing; the file is one llama.cpp and posttrain read.
//
//	go run ./scripts/gguf-synth -shape llama3-8b -out /tmp/llama3-8b-synthetic.gguf
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/posttrain/posttrain/data/tokenizer"
	"github.com/posttrain/posttrain/models/gguf"
	"github.com/posttrain/posttrain/models/safetensors"
)

// shape is a llama-architecture model's size.
type shape struct {
	layers, hidden, ffn, heads, kvHeads, vocab int
}

var shapes = map[string]shape{
	// meta-llama/Meta-Llama-3-8B's config.json.
	"llama3-8b": {layers: 32, hidden: 4096, ffn: 14336, heads: 32, kvHeads: 8, vocab: 128256},
	// A few megabytes, for the test.
	"tiny": {layers: 2, hidden: 256, ffn: 512, heads: 4, kvHeads: 2, vocab: 1024},
}

func main() {
	out := flag.String("out", "", "GGUF file to write")
	name := flag.String("shape", "llama3-8b", "model shape: llama3-8b or tiny")
	flag.Parse()
	s, ok := shapes[*name]
	if *out == "" || !ok {
		fmt.Fprintln(os.Stderr, "usage: gguf-synth -shape llama3-8b|tiny -out FILE.gguf")
		os.Exit(2)
	}
	if err := write(*out, s); err != nil {
		fmt.Fprintln(os.Stderr, "gguf-synth:", err)
		os.Exit(1)
	}
}

// write writes the synthetic model of shape s to path.
func write(path string, s shape) error {
	kvs := []gguf.KV{
		{Key: "general.architecture", Type: gguf.TypeString, Value: "llama"},
		{Key: "general.name", Type: gguf.TypeString, Value: "synthetic"},
		{Key: "general.file_type", Type: gguf.TypeUint32, Value: uint32(15)},
		{Key: "llama.block_count", Type: gguf.TypeUint32, Value: uint32(s.layers)},
		{Key: "llama.context_length", Type: gguf.TypeUint32, Value: uint32(8192)},
		{Key: "llama.embedding_length", Type: gguf.TypeUint32, Value: uint32(s.hidden)},
		{Key: "llama.feed_forward_length", Type: gguf.TypeUint32, Value: uint32(s.ffn)},
		{Key: "llama.attention.head_count", Type: gguf.TypeUint32, Value: uint32(s.heads)},
		{Key: "llama.attention.head_count_kv", Type: gguf.TypeUint32, Value: uint32(s.kvHeads)},
		{Key: "llama.rope.freq_base", Type: gguf.TypeFloat32, Value: float32(500000)},
		{Key: "llama.rope.dimension_count", Type: gguf.TypeUint32, Value: uint32(s.hidden / s.heads)},
		{Key: "llama.attention.layer_norm_rms_epsilon", Type: gguf.TypeFloat32, Value: float32(1e-5)},
		{Key: "general.quantization_version", Type: gguf.TypeUint32, Value: uint32(2)},
	}
	kvs = append(kvs, vocabulary(s.vocab)...)
	return gguf.WriteFile(path, kvs, plan(s))
}

// plan is the model's tensors, each made when it is written.
func plan(s shape) []gguf.OutTensor {
	var tensors []gguf.OutTensor
	add := func(name string, dims ...int64) {
		seed := uint64(len(tensors))
		t := gguf.OutTensor{Name: name, Dims: dims, Type: gguf.Q4_K}
		if len(dims) == 1 {
			t.Type = gguf.F32
		}
		t.Load = func() ([]byte, error) { return synthetic(t.Type, dims, seed) }
		tensors = append(tensors, t)
	}
	h, f, kv := int64(s.hidden), int64(s.ffn), int64(s.hidden/s.heads*s.kvHeads)
	add("token_embd.weight", h, int64(s.vocab))
	for l := range s.layers {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", h)
		add(p+"attn_q.weight", h, h)
		add(p+"attn_k.weight", h, kv)
		add(p+"attn_v.weight", h, kv)
		add(p+"attn_output.weight", h, h)
		add(p+"ffn_norm.weight", h)
		add(p+"ffn_gate.weight", h, f)
		add(p+"ffn_up.weight", h, f)
		add(p+"ffn_down.weight", f, h)
	}
	add("output_norm.weight", h)
	add("output.weight", h, int64(s.vocab))
	return tensors
}

// synthetic is a tensor's data: norms near 1 (F32), Q4_K blocks with small scales and random
// quants (values within ±0.03).
func synthetic(t gguf.Type, dims []int64, seed uint64) ([]byte, error) {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	if t == gguf.F32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1 + float32(r.NormFloat64())*0.01
		}
		return gguf.Quantize(gguf.F32, v)
	}
	const block, blockBytes = 256, 144
	data := make([]byte, n/block*blockBytes)
	d, dmin := safetensors.Float32ToF16(0.0005), safetensors.Float32ToF16(0.0002)
	for b := 0; b < len(data); b += blockBytes {
		x := data[b : b+blockBytes]
		binary.LittleEndian.PutUint16(x, d)
		binary.LittleEndian.PutUint16(x[2:], dmin)
		for i := 4; i < blockBytes; i += 4 { // 6-bit scales and mins, 4-bit quants
			binary.LittleEndian.PutUint32(x[i:], r.Uint32())
		}
	}
	return data, nil
}

// vocabulary is a byte-level BPE tokenizer of n tokens (Llama 3's pre-tokenizer): the 256 byte
// symbols, lowercase words, and <|begin_of_text|> / <|end_of_text|> as its last two.
func vocabulary(n int) []gguf.KV {
	var tokens, merges []any
	var types []any
	for b := range 256 {
		tokens, types = append(tokens, tokenizer.ByteLevel(string([]byte{byte(b)}))), append(types, int32(1))
	}
	seen := map[string]bool{}
	for _, t := range tokens {
		seen[t.(string)] = true
	}
	for i := 0; len(tokens) < n-2; i++ {
		var w strings.Builder
		for j := i; ; j /= 26 {
			w.WriteByte(byte('a' + j%26))
			if j < 26 {
				break
			}
		}
		if seen[w.String()] {
			continue
		}
		seen[w.String()] = true
		tokens, types = append(tokens, w.String()), append(types, int32(1))
		if w.Len() == 2 {
			merges = append(merges, w.String()[:1]+" "+w.String()[1:])
		}
	}
	tokens, types = append(tokens, "<|begin_of_text|>", "<|end_of_text|>"), append(types, int32(3), int32(3))
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Type: gguf.TypeString, Value: "gpt2"},
		{Key: "tokenizer.ggml.pre", Type: gguf.TypeString, Value: "llama-bpe"},
		{Key: "tokenizer.ggml.tokens", Type: gguf.TypeArray, Value: gguf.Array{Elem: gguf.TypeString, Values: tokens}},
		{Key: "tokenizer.ggml.token_type", Type: gguf.TypeArray, Value: gguf.Array{Elem: gguf.TypeInt32, Values: types}},
		{Key: "tokenizer.ggml.merges", Type: gguf.TypeArray, Value: gguf.Array{Elem: gguf.TypeString, Values: merges}},
		{Key: "tokenizer.ggml.bos_token_id", Type: gguf.TypeUint32, Value: uint32(n - 2)},
		{Key: "tokenizer.ggml.eos_token_id", Type: gguf.TypeUint32, Value: uint32(n - 1)},
	}
}
