package gguf

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/models/safetensors"
)

// wideLlama is a 4-layer llama GGUF whose feed-forward matrices are 1M elements each (Q8_0), so
// that holding every tensor at once and holding one differ by tens of megabytes.
func wideLlama(t testing.TB) []byte {
	t.Helper()
	const hidden, ffn, layers = 256, 4096, 4
	b := newBuilder().str("general.architecture", "llama").u32("llama.block_count", layers).
		u32("llama.embedding_length", hidden).u32("llama.feed_forward_length", ffn).
		u32("llama.attention.head_count", 4).u32("llama.attention.head_count_kv", 2).
		f32("llama.rope.freq_base", 10000).f32("llama.attention.layer_norm_rms_epsilon", 1e-5).
		u32("llama.context_length", 64).u32("llama.rope.dimension_count", 64)
	var tokens []string
	var types []int32
	for _, r := range byteLevelAlphabet() {
		tokens, types = append(tokens, string(r)), append(types, 1)
	}
	tokens, types = append(tokens, "ab", "<|end|>"), append(types, 1, tokenControl)
	b.str("tokenizer.ggml.model", "gpt2").str("tokenizer.ggml.pre", "smollm").strs("tokenizer.ggml.tokens", tokens).
		i32s("tokenizer.ggml.token_type", types).strs("tokenizer.ggml.merges", []string{"a b"}).
		u32("tokenizer.ggml.eos_token_id", 257).u32("tokenizer.ggml.bos_token_id", 257)
	seed := 0
	add := func(name string, ne ...int64) {
		n := ne[0]
		if len(ne) > 1 {
			n *= ne[1]
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32((i*7+seed)%201-100) / 400
		}
		seed++
		if len(ne) == 1 {
			b.f32Tensor(name, ne, v)
			return
		}
		q, err := Quantize(Q8_0, v)
		if err != nil {
			t.Fatal(err)
		}
		b.tensor(name, Q8_0, ne, q)
	}
	add("token_embd.weight", hidden, int64(len(tokens)))
	for l := range layers {
		p := "blk." + string(rune('0'+l)) + "."
		add(p+"attn_norm.weight", hidden)
		add(p+"attn_q.weight", hidden, hidden)
		add(p+"attn_k.weight", hidden, hidden/2)
		add(p+"attn_v.weight", hidden, hidden/2)
		add(p+"attn_output.weight", hidden, hidden)
		add(p+"ffn_norm.weight", hidden)
		add(p+"ffn_gate.weight", hidden, ffn)
		add(p+"ffn_up.weight", hidden, ffn)
		add(p+"ffn_down.weight", ffn, hidden)
	}
	add("output_norm.weight", hidden)
	return b.bytes()
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// Converting streams: Tensors reads nothing (every tensor lazy), each tensor is dequantised and
// written a piece at a time, and what earlier pieces and tensors held has been let go: the live
// heap stays within a piece or two of where it started, where holding every tensor would add the
// whole model (~54 MB in float32) and holding one whole tensor 4 MB or more.
func TestConvert_HoldsOneTensorAtATime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wide.gguf")
	if err := os.WriteFile(path, wideLlama(t), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := Config(f)
	if err != nil {
		t.Fatal(err)
	}
	weights, err := Tensors(f, cfg, "F32")
	if err != nil {
		t.Fatal(err)
	}
	var total, largest int64
	for _, w := range weights {
		if w.Data != nil || w.Stream == nil {
			t.Fatalf("tensor %s was read before it was written", w.Name)
		}
		n, _ := w.ByteSize()
		total += n
		largest = max(largest, n)
	}
	base := heapInUse()
	var peak int64
	for _, w := range weights {
		stream := w.Stream
		w.Stream = func(out io.Writer) error {
			peak = max(peak, heapInUse()-base)
			return stream(writerFunc(func(p []byte) (int, error) {
				peak = max(peak, heapInUse()-base)
				return out.Write(p)
			}))
		}
	}
	if err := safetensors.WriteModelDir(filepath.Join(t.TempDir(), "out"), weights, 0); err != nil {
		t.Fatal(err)
	}
	peak = max(peak, heapInUse()-base)
	// A million-element piece in float32 and encoded, the writer's 1 MB buffer, and slack: less
	// than the largest tensor, and far less than all of them.
	if limit := int64(8+1+2) << 20; peak > limit || total < 4*limit || largest < 4<<20 {
		t.Fatalf("live heap grew by %d bytes while writing %d bytes of tensors (largest %d): want at most %d", peak, total, largest, limit)
	}
}

// writerFunc is a function as an io.Writer.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A conversion that would not fit the disk is refused before anything is dequantised or written,
// naming the GGUF, what it needs and what is free.
func TestConvert_RefusesWhatWouldNotFitTheDisk(t *testing.T) {
	data, _ := tinyLlama(t)
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	defer func(f func(string) (int64, bool)) { freeSpace = f }(freeSpace)
	freeSpace = func(string) (int64, bool) { return 1000, true }
	out := filepath.Join(t.TempDir(), "out")
	_, err := Convert(path, out, ConvertOptions{DType: "bfloat16"})
	if err == nil || !strings.Contains(err.Error(), path+": its conversion to bfloat16 needs ") || !strings.Contains(err.Error(), "has 0.00 GB free") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the output directory was written")
	}
	freeSpace = func(string) (int64, bool) { return 1 << 40, true }
	if _, err := Convert(path, out, ConvertOptions{DType: "bfloat16"}); err != nil {
		t.Fatal(err)
	}
}

// A tensor whose data comes from Load is written with the same bytes as one given whole, and a
// Load that fails leaves nothing at the path.
func TestWrite_LazyTensors(t *testing.T) {
	v := []float32{1, -2, 3.5, 0.25}
	eager := []OutTensor{f32Tensor("a.weight", []int64{4}, v)}
	lazy := []OutTensor{{Name: "a.weight", Dims: []int64{4}, Type: F32, Load: func() ([]byte, error) { return Quantize(F32, v) }}}
	var want, got bytes.Buffer
	if err := Write(&want, nil, eager); err != nil {
		t.Fatal(err)
	}
	if err := Write(&got, nil, lazy); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatal("a lazy tensor was written differently")
	}
	short := []OutTensor{{Name: "a.weight", Dims: []int64{4}, Type: F32, Load: func() ([]byte, error) { return make([]byte, 8), nil }}}
	path := filepath.Join(t.TempDir(), "x.gguf")
	if err := WriteFile(path, nil, short); err == nil || !strings.Contains(err.Error(), `tensor "a.weight": 8 bytes of data, F32 [4] needs 16`) {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("a failed write left a file")
	}
}
