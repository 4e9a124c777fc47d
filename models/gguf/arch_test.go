package gguf

import (
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/data/tokenizer"
	"github.com/posttrain/posttrain/models/decoder"
)

// numpyPermute is convert_hf_to_gguf.py's LlamaModel.permute, written from its numpy (the export's
// permuteRows is checked against it):
// w.reshape(n_head, 2, rows/n_head/2, cols).swapaxes(1, 2).reshape(rows, cols).
func numpyPermute(v []float32, rows, nHeads int) []float32 {
	cols, d := len(v)/rows, rows/nHeads
	out := make([]float32, 0, len(v))
	for h := range nHeads {
		for i := range d / 2 {
			for s := range 2 {
				r := h*d + s*d/2 + i
				out = append(out, v[r*cols:(r+1)*cols]...)
			}
		}
	}
	return out
}

// Hand check: one head of 4 rows is stored as rows 0, 2, 1, 3 (the two rotary halves
// interleaved); unpermuteRows undoes it, and undoes numpyPermute for 3 heads of 8 rows × 2.
func TestPermuteRows(t *testing.T) {
	if got := numpyPermute([]float32{0, 1, 2, 3}, 4, 1); !slices.Equal(got, []float32{0, 2, 1, 3}) {
		t.Errorf("permute = %v, want [0 2 1 3]", got)
	}
	if got := unpermuteRows([]float32{0, 2, 1, 3}, 4, 1); !slices.Equal(got, []float32{0, 1, 2, 3}) {
		t.Errorf("unpermute = %v, want [0 1 2 3]", got)
	}
	v := make([]float32, 24*2)
	for i := range v {
		v[i] = float32(i)
	}
	if got := unpermuteRows(numpyPermute(v, 24, 3), 24, 3); !slices.Equal(got, v) {
		t.Errorf("unpermute(permute(v)) = %v", got)
	}
	if got, want := permuteRows(v, 24, 3), numpyPermute(v, 24, 3); !slices.Equal(got, want) {
		t.Errorf("permuteRows = %v, want numpy's %v", got, want)
	}
}

// tinyLlama is a 1-layer llama GGUF (hidden 8, 2 heads / 1 KV head, head_dim 4, FFN 16, vocab
// 258: the 256 byte tokens, a merge and one control token) with F32 weights v(name)[i] = seed + i.
func tinyLlama(t testing.TB) (data []byte, weight func(name string) []float32) {
	t.Helper()
	return tinyLlamaMerges(t, []string{"a b"})
}

// tinyLlamaMerges is tinyLlama with the given BPE merges.
func tinyLlamaMerges(t testing.TB, merges []string) (data []byte, weight func(name string) []float32) {
	t.Helper()
	b := newBuilder().str("general.architecture", "llama").u32("llama.block_count", 1).
		u32("llama.embedding_length", 8).u32("llama.feed_forward_length", 16).
		u32("llama.attention.head_count", 2).u32("llama.attention.head_count_kv", 1).
		f32("llama.rope.freq_base", 10000).f32("llama.attention.layer_norm_rms_epsilon", 1e-5).
		u32("llama.context_length", 64).u32("llama.rope.dimension_count", 4)
	var tokens []string
	var types []int32
	for _, r := range byteLevelAlphabet() {
		tokens, types = append(tokens, string(r)), append(types, 1)
	}
	tokens, types = append(tokens, "ab", "<|end|>"), append(types, 1, tokenControl)
	b.str("tokenizer.ggml.model", "gpt2").str("tokenizer.ggml.pre", "smollm").strs("tokenizer.ggml.tokens", tokens).
		i32s("tokenizer.ggml.token_type", types).strs("tokenizer.ggml.merges", merges).
		u32("tokenizer.ggml.eos_token_id", 257).u32("tokenizer.ggml.bos_token_id", 257).
		str("tokenizer.chat_template", "{{ messages[0]['content'] }}")
	seed := float32(0)
	vals := map[string][]float32{}
	add := func(name string, ne ...int64) {
		n := int64(1)
		for _, d := range ne {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = seed + float32(i)/1024
		}
		seed++
		vals[name] = v
		b.f32Tensor(name, ne, v)
	}
	add("token_embd.weight", 8, 258)
	add("blk.0.attn_norm.weight", 8)
	add("blk.0.attn_q.weight", 8, 8)
	add("blk.0.attn_k.weight", 8, 4)
	add("blk.0.attn_v.weight", 8, 4)
	add("blk.0.attn_output.weight", 8, 8)
	add("blk.0.ffn_norm.weight", 8)
	add("blk.0.ffn_gate.weight", 8, 16)
	add("blk.0.ffn_up.weight", 8, 16)
	add("blk.0.ffn_down.weight", 16, 8)
	add("output_norm.weight", 8)
	return b.bytes(), func(name string) []float32 { return vals[name] }
}

// byteLevelAlphabet is GPT-2's bytes_to_unicode in byte order.
func byteLevelAlphabet() []rune {
	var out []rune
	n := 0
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xa1 && b <= 0xac || b >= 0xae {
			out = append(out, rune(b))
		} else {
			out = append(out, rune(256+n))
			n++
		}
	}
	return out
}

// TestConvert_Tiny: the converted checkpoint loads with decoder.Load; its weights are the
// GGUF's under HF names (q and k with the permutation undone), config and tokenizer as the
// metadata says.
func TestConvert_Tiny(t *testing.T) {
	data, weight := tinyLlama(t)
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	if _, err := Convert(path, dir, ConvertOptions{WrittenBy: "test"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := decoder.ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ModelType != "llama" || cfg.HiddenSize != 8 || cfg.NumKeyValueHeads != 1 || cfg.HeadDim != 4 ||
		cfg.RMSNormEps != 1e-5 || cfg.MaxPositionEmbeddings != 64 || !cfg.TieWordEmbeddings || cfg.VocabSize != 258 {
		t.Errorf("config %+v", cfg)
	}
	ctx, _, err := decoder.Load(dir, dtypes.Float32)
	if err != nil {
		t.Fatal(err)
	}
	for gg, hf := range map[string]string{"blk.0.attn_v.weight": "model.layers.0.self_attn.v_proj.weight",
		"token_embd.weight": "model.embed_tokens.weight", "blk.0.ffn_norm.weight": "model.layers.0.post_attention_layernorm.weight"} {
		if got := variable(t, ctx, hf); !slices.Equal(got, weight(gg)) {
			t.Errorf("%s differs from %s", hf, gg)
		}
	}
	// q: 2 heads of 4 rows × 8; HF row 1 (head 0, first half, i = 1) is GGUF row 2.
	q, gq := variable(t, ctx, "model.layers.0.self_attn.q_proj.weight"), weight("blk.0.attn_q.weight")
	if !slices.Equal(q[8:16], gq[16:24]) || !slices.Equal(q, unpermuteRows(gq, 8, 2)) {
		t.Errorf("q_proj rows not unpermuted")
	}
	k, gk := variable(t, ctx, "model.layers.0.self_attn.k_proj.weight"), weight("blk.0.attn_k.weight")
	if !slices.Equal(k, unpermuteRows(gk, 4, 1)) || slices.Equal(k, gk) {
		t.Errorf("k_proj rows not unpermuted with the KV head count")
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("ab<|end|>b"); !slices.Equal(got, []int{256, 257, 'b'}) {
		t.Errorf("Encode = %v", got)
	}
	if tc := tok.Config(); tc.EOSToken != "<|end|>" || !strings.Contains(tc.ChatTemplate, "messages") {
		t.Errorf("tokenizer config %+v", tc)
	}
}

func TestConvert_Refusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(b *builder)
		want string
	}{
		{"architecture", func(b *builder) { b.str("general.architecture", "falcon") }, `general.architecture: "falcon" is not supported`},
		{"rope scaling", func(b *builder) {
			small(b).str("llama.rope.scaling.type", "linear")
		}, "llama.rope.scaling.type: RoPE scaling is not supported yet"},
		{"missing", func(b *builder) { b.u32("llama.block_count", 1) }, "llama.embedding_length is missing"},
		// A known key of the wrong type, a value out of its range: an error naming the key,
		// never a default in its place (nor an allocation sized by it).
		{"string rope base", func(b *builder) { small(b).str("llama.rope.freq_base", "10000") }, "llama.rope.freq_base is string, not a number"},
		{"string eps", func(b *builder) { small(b).str("llama.attention.layer_norm_rms_epsilon", "1e-5") }, "llama.attention.layer_norm_rms_epsilon is string, not a number"},
		{"NaN eps", func(b *builder) { small(b).f32("llama.attention.layer_norm_rms_epsilon", float32(math.NaN())) }, "llama.attention.layer_norm_rms_epsilon is NaN"},
		{"string eos", func(b *builder) { small(b).str("tokenizer.ggml.eos_token_id", "2") }, "tokenizer.ggml.eos_token_id is string, not an integer"},
		{"eos past the vocabulary", func(b *builder) { small(b).u32("tokenizer.ggml.eos_token_id", 99) }, "tokenizer.ggml.eos_token_id is 99: it must be in [0, 31]"},
		{"integer rope type", func(b *builder) { small(b).u32("llama.rope.scaling.type", 1) }, "llama.rope.scaling.type is uint32, not string"},
		{"huge block_count", func(b *builder) { small(b, "llama.block_count", uint32(4_000_000_000)) }, "llama.block_count is 4000000000: it must be in [1, 1] (the file has 1 tensors)"},
		{"zero heads", func(b *builder) { small(b, "llama.attention.head_count", uint32(0)) }, "llama.attention.head_count is 0: it must be in [1, 8]"},
		{"heads past the width", func(b *builder) { small(b, "llama.attention.head_count", uint32(1000)) }, "llama.attention.head_count is 1000: it must be in [1, 8]"},
		{"kv heads past the heads", func(b *builder) { small(b).u32("llama.attention.head_count_kv", 3) }, "llama.attention.head_count_kv is 3: it must be in [1, 2]"},
		{"zero context", func(b *builder) { small(b).u32("llama.context_length", 0) }, "llama.context_length is 0: it must be in [1,"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder()
			tc.edit(b)
			if tc.name != "architecture" {
				b.str("general.architecture", "llama")
			}
			f, err := parseBytes(b.bytes())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Config(f); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// small sets a one-layer llama's required metadata and one tensor (a layer has tensors of its
// own: block_count is bounded by the tensor count), vocabulary 32.
func small(b *builder, over ...any) *builder {
	meta := map[string]uint32{"llama.block_count": 1, "llama.embedding_length": 8, "llama.feed_forward_length": 16,
		"llama.attention.head_count": 2, "llama.vocab_size": 32}
	for i := 0; i+1 < len(over); i += 2 {
		meta[over[i].(string)] = over[i+1].(uint32)
	}
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		b.u32(k, meta[k])
	}
	return b.f32Tensor("blk.0.attn_norm.weight", []int64{8}, make([]float32, 8))
}

// variable is the float32 value of the variable of HF name hf.
func variable(t *testing.T, ctx *context.Context, hf string) []float32 {
	t.Helper()
	scope, name := decoder.VarScope(hf)
	v := ctx.GetVariableByScopeAndName(scope, name)
	if v == nil {
		t.Fatalf("variable %s missing", hf)
	}
	f, err := decoder.Float32s(v.MustValue())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The output follows checkpoint.WriteModel: a second conversion needs Overwrite, and a directory
// holding files posttrain did not write is refused even with it.
func TestConvert_OutputRules(t *testing.T) {
	data, _ := tinyLlama(t)
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	opts := ConvertOptions{DType: "bfloat16", WrittenBy: "test"}
	if _, err := Convert(path, dir, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := Convert(path, dir, opts); err == nil {
		t.Error("a second conversion into the same directory without Overwrite succeeded")
	}
	opts.Overwrite = true
	if _, err := Convert(path, dir, opts); err != nil {
		t.Errorf("Overwrite of its own output: %v", err)
	}
	if cfg, err := decoder.ReadConfig(dir); err != nil || cfg.TorchDType != "bfloat16" {
		t.Errorf("torch_dtype %q, %v", cfg.TorchDType, err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Convert(path, other, opts); err == nil {
		t.Error("converted into a directory posttrain did not write")
	}
}

// The tokenizer's metadata is typed too: an integer chat template or a string add_bos_token is an
// error naming the key, not a tokenizer written without them.
func TestTokenizer_TypedMetadata(t *testing.T) {
	for _, c := range []struct {
		edit func(b *builder)
		want string
	}{
		{func(b *builder) { b.u32("tokenizer.chat_template", 5) }, "tokenizer.chat_template is uint32, not string"},
		{func(b *builder) { b.str("tokenizer.ggml.add_bos_token", "yes") }, "tokenizer.ggml.add_bos_token is string, not an integer"},
		{func(b *builder) { b.u32("tokenizer.ggml.pre", 1) }, "tokenizer.ggml.pre is uint32, not string"},
		{func(b *builder) { b.str("tokenizer.ggml.padding_token_id", "0") }, "tokenizer.ggml.padding_token_id is string, not an integer"},
		{func(b *builder) {}, "tokenizer.ggml.tokens: token 256 is 2000 bytes long; at most 1024 are accepted"},
	} {
		var tokens []string
		var types []int32
		for _, r := range byteLevelAlphabet() {
			tokens, types = append(tokens, string(r)), append(types, 1)
		}
		if strings.Contains(c.want, "bytes long") {
			tokens, types = append(tokens, strings.Repeat("a", 2000)), append(types, 1)
		}
		b := newBuilder().str("general.architecture", "llama").str("tokenizer.ggml.model", "gpt2").
			strs("tokenizer.ggml.tokens", tokens).i32s("tokenizer.ggml.token_type", types).strs("tokenizer.ggml.merges", []string{"a b"})
		c.edit(b)
		f, err := parseBytes(b.bytes())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := Tokenizer(f); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// A tokenizer that posttrain would refuse to load (a merge of tokens the vocabulary lacks) fails
// the conversion, naming the GGUF, and writes nothing.
func TestConvert_RefusesATokenizerItCannotLoad(t *testing.T) {
	data, _ := tinyLlamaMerges(t, []string{"a b", "q zz"})
	path := filepath.Join(t.TempDir(), "bad.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	_, err := Convert(path, out, ConvertOptions{})
	if err == nil || !strings.Contains(err.Error(), path+": the tokenizer rebuilt from its tokenizer.* metadata does not load") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the output directory was written")
	}
}
