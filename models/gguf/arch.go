package gguf

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/safetensors"
)

// arch is what a GGUF general.architecture means for the HF checkpoint: the model_type, the
// names of a block's tensors (gguf-py's tensor_mapping.py for that MODEL_ARCH; "blk.N." becomes
// "model.layers.N."), and what llama.cpp's convert_hf_to_gguf.py changed in the weights.
type arch struct {
	modelType string
	names     map[string]string
	// permuteQK: LlamaModel.permute interleaved each head's rotary halves of attn_q/attn_k
	// (undone by unpermuteRows).
	permuteQK bool
	// normPlusOne: Gemma3Model.modify_tensors stored every "*norm.weight" as w + 1 (HF's
	// Gemma3RMSNorm computes x̂·(1 + w), llama.cpp's x̂·w); undone by subtracting 1.
	normPlusOne bool
}

// llamaBlock are the block tensors of llama, qwen2 and qwen3 (MODEL_TENSOR.ATTN_NORM … FFN_DOWN).
var llamaBlock = map[string]string{
	"attn_norm.weight":   "input_layernorm.weight",
	"ffn_norm.weight":    "post_attention_layernorm.weight",
	"attn_q.weight":      "self_attn.q_proj.weight",
	"attn_k.weight":      "self_attn.k_proj.weight",
	"attn_v.weight":      "self_attn.v_proj.weight",
	"attn_output.weight": "self_attn.o_proj.weight",
	"attn_q.bias":        "self_attn.q_proj.bias",
	"attn_k.bias":        "self_attn.k_proj.bias",
	"attn_v.bias":        "self_attn.v_proj.bias",
	"attn_output.bias":   "self_attn.o_proj.bias",
	"ffn_gate.weight":    "mlp.gate_proj.weight",
	"ffn_up.weight":      "mlp.up_proj.weight",
	"ffn_down.weight":    "mlp.down_proj.weight",
	"ffn_gate.bias":      "mlp.gate_proj.bias",
	"ffn_up.bias":        "mlp.up_proj.bias",
	"ffn_down.bias":      "mlp.down_proj.bias",
}

// qkNorm are Qwen3's and Gemma 3's per-head q/k norms (MODEL_TENSOR.ATTN_Q_NORM, ATTN_K_NORM).
var qkNorm = map[string]string{
	"attn_q_norm.weight": "self_attn.q_norm.weight",
	"attn_k_norm.weight": "self_attn.k_norm.weight",
}

func union(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// archs are the supported GGUF architectures.
var archs = map[string]arch{
	"llama": {modelType: "llama", names: llamaBlock, permuteQK: true},
	"qwen2": {modelType: "qwen2", names: llamaBlock},
	"qwen3": {modelType: "qwen3", names: union(llamaBlock, qkNorm)},
	// Gemma 3: four norms a block (MODEL_TENSOR.ATTN_NORM, ATTN_POST_NORM, FFN_NORM, FFN_POST_NORM).
	"gemma3": {modelType: "gemma3_text", normPlusOne: true, names: union(llamaBlock, qkNorm, map[string]string{
		"attn_norm.weight":           "input_layernorm.weight",
		"post_attention_norm.weight": "post_attention_layernorm.weight",
		"ffn_norm.weight":            "pre_feedforward_layernorm.weight",
		"post_ffw_norm.weight":       "post_feedforward_layernorm.weight",
	})},
}

// Architectures lists the supported general.architecture values, sorted.
func Architectures() []string { return slices.Sorted(maps.Keys(archs)) }

var blockName = regexp.MustCompile(`^blk\.(\d+)\.(.+)$`)

// hfName is the HF name of a GGUF tensor of architecture a, or "" when it has none.
func (a arch) hfName(name string) string {
	switch name {
	case "token_embd.weight":
		return "model.embed_tokens.weight"
	case "output_norm.weight":
		return "model.norm.weight"
	case "output.weight":
		return "lm_head.weight"
	}
	if m := blockName.FindStringSubmatch(name); m != nil {
		if hf, ok := a.names[m[2]]; ok {
			return "model.layers." + m[1] + "." + hf
		}
	}
	return ""
}

// archOf returns the file's architecture and its spec, refusing an unsupported one.
func archOf(f *File) (string, arch, error) {
	name, err := f.String("general.architecture")
	if err != nil {
		return "", arch{}, err
	}
	a, ok := archs[name]
	if !ok {
		return "", arch{}, fmt.Errorf("gguf: metadata general.architecture: %q is not supported (supported: %s)", name, strings.Join(Architectures(), ", "))
	}
	return name, a, nil
}

// Config builds the HF config of a GGUF from its metadata (the keys llama.cpp's
// convert_hf_to_gguf.py writes from config.json, under the architecture's prefix), parsed by
// decoder.ParseConfig so it gets the defaults and checks a config.json would. Features the
// conversion does not handle are refused naming the key: RoPE scaling other than Gemma 3's
// linear, partial rotary, a key length llama.cpp's layout cannot carry.
//
// Gemma 3 takes what llama.cpp's loader fixes for architecture gemma3 (llama-model.cpp,
// LLM_ARCH_GEMMA3): with attention.sliding_window set, every layer but each sixth slides, with
// RoPE base 10000; without it, every layer is full attention; the attention scale is
// key_length^-0.5 except in the 62-layer 27B, (embedding_length/head_count)^-0.5.
func Config(f *File) (*decoder.Config, error) {
	name, a, err := archOf(f)
	if err != nil {
		return nil, err
	}
	key := func(k string) string { return name + "." + k }
	need := func(k string) int64 {
		v, e := f.Int(key(k))
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	hidden, layers, heads := need("embedding_length"), need("block_count"), need("attention.head_count")
	inter := need("feed_forward_length")
	if err != nil {
		return nil, err
	}
	// Bounds before anything is sized by them: every layer has tensors of its own, so a file has
	// at least as many tensors as layers; a head is at least one element of the hidden state.
	for _, c := range []struct {
		k      string
		v, max int64
		why    string
	}{
		{"block_count", layers, int64(len(f.Tensors)), fmt.Sprintf("the file has %d tensors", len(f.Tensors))},
		{"embedding_length", hidden, 1 << 20, "at most 2^20"},
		{"attention.head_count", heads, max(hidden, 1), "at most embedding_length"},
		{"feed_forward_length", inter, 1 << 22, "at most 2^22"},
	} {
		if err := inRange(key(c.k), c.v, 1, c.max, c.why); err != nil {
			return nil, err
		}
	}
	m := map[string]any{"model_type": a.modelType, "architectures": []string{decoder.Families[a.modelType].Architecture},
		"hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
		"intermediate_size": inter}
	kv := heads
	if v, ok, e := optInt(f, key("attention.head_count_kv")); e != nil {
		return nil, e
	} else if ok {
		if err := inRange(key("attention.head_count_kv"), v, 1, heads, "at most attention.head_count"); err != nil {
			return nil, err
		}
		kv = v
	}
	m["num_key_value_heads"] = kv
	headDim := hidden / heads
	if v, ok, e := optInt(f, key("attention.key_length")); e != nil {
		return nil, e
	} else if ok {
		if err := inRange(key("attention.key_length"), v, 1, 1<<16, "at most 2^16"); err != nil {
			return nil, err
		}
		headDim = v
	}
	if v, ok, e := optInt(f, key("attention.value_length")); e != nil {
		return nil, e
	} else if ok && v != headDim {
		return nil, fmt.Errorf("gguf: metadata %s %d differs from the key length %d", key("attention.value_length"), v, headDim)
	}
	m["head_dim"] = headDim
	if v, ok, e := optInt(f, key("rope.dimension_count")); e != nil {
		return nil, e
	} else if ok && v != headDim {
		return nil, fmt.Errorf("gguf: metadata %s %d differs from head_dim %d (partial rotary is not supported)", key("rope.dimension_count"), v, headDim)
	}
	for _, k := range []struct{ meta, field string }{{"rope.freq_base", "rope_theta"}, {"attention.layer_norm_rms_epsilon", "rms_norm_eps"}} {
		v, ok, e := optFloat(f, key(k.meta))
		if e != nil {
			return nil, e
		}
		if ok && v <= 0 {
			return nil, fmt.Errorf("gguf: metadata %s is %v: it must be positive", key(k.meta), v)
		}
		if ok {
			m[k.field] = v
		}
	}
	if v, ok, e := optInt(f, key("context_length")); e != nil {
		return nil, e
	} else if ok {
		if err := inRange(key("context_length"), v, 1, 1<<30, "at most 2^30"); err != nil {
			return nil, err
		}
		m["max_position_embeddings"] = v
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		return nil, fmt.Errorf("gguf: tensor rope_freqs.weight (Llama 3 RoPE scaling) is not supported yet")
	}
	if err := ropeScaling(f, name, a, m); err != nil {
		return nil, err
	}
	vocab, err := vocabSize(f, name)
	if err != nil {
		return nil, err
	}
	m["vocab_size"] = vocab
	_, untied := f.Tensor("output.weight")
	m["tie_word_embeddings"] = !untied
	_, qBias := f.Tensor("blk.0.attn_q.bias")
	_, oBias := f.Tensor("blk.0.attn_output.bias")
	_, mlpBias := f.Tensor("blk.0.ffn_gate.bias")
	switch name {
	case "llama":
		m["hidden_act"] = "silu"
		m["attention_bias"], m["mlp_bias"] = qBias, mlpBias
	case "qwen2":
		m["hidden_act"] = "silu"
		if oBias || mlpBias {
			return nil, fmt.Errorf("gguf: tensor blk.0.attn_output.bias or blk.0.ffn_gate.bias: Qwen2 has no o_proj or MLP biases")
		}
	case "qwen3":
		m["hidden_act"] = "silu"
		m["attention_bias"] = qBias
	case "gemma3":
		m["attention_bias"] = qBias
		m["hidden_activation"] = "gelu_pytorch_tanh"
		m["query_pre_attn_scalar"] = headDim
		if layers == 62 {
			m["query_pre_attn_scalar"] = hidden / heads
		}
		m["rope_local_base_freq"] = 10000.0
		if v, ok, e := optFloat(f, key("rope.freq_base_swa")); e != nil {
			return nil, e
		} else if ok {
			m["rope_local_base_freq"] = v
		}
		m["layer_types"] = decoder.PatternLayerTypes(int(layers), 1)
		w, _, e := optInt(f, key("attention.sliding_window"))
		if e != nil {
			return nil, e
		}
		if w > 0 {
			m["sliding_window"] = w
			pattern := int64(decoder.DefaultSlidingWindowPattern)
			if p, e := f.Int(key("attention.sliding_window_pattern")); e == nil { // an array is refused below
				pattern = p
			} else if _, ok := f.Get(key("attention.sliding_window_pattern")); ok {
				return nil, fmt.Errorf("gguf: metadata %s: only a uint32 pattern is supported, not a per-layer array", key("attention.sliding_window_pattern"))
			}
			if pattern <= 0 {
				return nil, fmt.Errorf("gguf: metadata %s is %d", key("attention.sliding_window_pattern"), pattern)
			}
			m["layer_types"] = decoder.PatternLayerTypes(int(layers), int(pattern))
		}
		m["final_logit_softcapping"] = nil
		if v, ok, e := optFloat(f, key("final_logit_softcapping")); e != nil {
			return nil, e
		} else if ok {
			m["final_logit_softcapping"] = v
		}
		if _, ok := f.Get(key("attn_logit_softcapping")); ok {
			return nil, fmt.Errorf("gguf: metadata %s: attention logit soft-capping is not supported (Gemma 3 has none)", key("attn_logit_softcapping"))
		}
	}
	for k, field := range map[string]string{"tokenizer.ggml.bos_token_id": "bos_token_id",
		"tokenizer.ggml.eos_token_id": "eos_token_id", "tokenizer.ggml.padding_token_id": "pad_token_id"} {
		v, ok, e := optInt(f, k)
		if e != nil {
			return nil, e
		}
		if ok {
			if err := inRange(k, v, 0, vocab-1, fmt.Sprintf("a token of the %d-token vocabulary", vocab)); err != nil {
				return nil, err
			}
			m[field] = v
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	cfg, err := decoder.ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("gguf: the config from the metadata: %w", err)
	}
	return cfg, nil
}

// optInt is the integer at key: ok false when the key is absent, an error naming the key, its type
// and the type expected when it holds something else (a string rope.freq_base must not be
// ignored for a default).
func optInt(f *File, key string) (v int64, ok bool, err error) {
	if _, present := f.Get(key); !present {
		return 0, false, nil
	}
	v, err = f.Int(key)
	return v, err == nil, err
}

// optString is optInt for a string.
func optString(f *File, key string) (v string, ok bool, err error) {
	if _, present := f.Get(key); !present {
		return "", false, nil
	}
	v, err = f.String(key)
	return v, err == nil, err
}

// optFloat is optInt for a number (floatMeta's reading), refusing NaN and ±Inf.
func optFloat(f *File, key string) (v float64, ok bool, err error) {
	if _, present := f.Get(key); !present {
		return 0, false, nil
	}
	if v, err = floatMeta(f, key); err != nil {
		return 0, false, err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false, fmt.Errorf("gguf: metadata %s is %v", key, v)
	}
	return v, true, nil
}

// inRange refuses v outside [lo, hi], naming key and why the bound holds.
func inRange(key string, v, lo, hi int64, why string) error {
	if v < lo || v > hi {
		return fmt.Errorf("gguf: metadata %s is %d: it must be in [%d, %d] (%s)", key, v, lo, hi, why)
	}
	return nil
}

// floatMeta reads a float, spelling a float32 as the shortest decimal that round-trips: the
// converter wrote config.json's decimal (1e-05) as float32, whose exact value is 9.99999974e-06.
func floatMeta(f *File, key string) (float64, error) {
	kv, ok := f.Get(key)
	if ok {
		if v, isF32 := kv.Value.(float32); isF32 {
			return strconv.ParseFloat(strconv.FormatFloat(float64(v), 'g', -1, 32), 64)
		}
	}
	return f.Float(key)
}

// ropeScaling reads <arch>.rope.scaling.*: none, or (Gemma 3) linear with its factor, which HF
// applies to the full-attention layers only, as llama.cpp does (the sliding layers' fixed base).
func ropeScaling(f *File, name string, a arch, m map[string]any) error {
	prefix := name + ".rope.scaling."
	typ, _, err := optString(f, prefix+"type")
	if err != nil {
		return err
	}
	for _, kv := range f.Metadata {
		if !strings.HasPrefix(kv.Key, prefix) {
			continue
		}
		switch {
		case kv.Key == prefix+"type" && typ == "none":
		case a.modelType == "gemma3_text" && typ == "linear" && (kv.Key == prefix+"type" || kv.Key == prefix+"factor"):
		default:
			return fmt.Errorf("gguf: metadata %s: RoPE scaling is not supported yet", kv.Key)
		}
	}
	if typ == "linear" && a.modelType == "gemma3_text" {
		factor, err := floatMeta(f, prefix+"factor")
		if err != nil {
			return err
		}
		m["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": factor}
	}
	return nil
}

// vocabSize is <arch>.vocab_size, else the number of tokens, else token_embd's rows.
func vocabSize(f *File, name string) (int64, error) {
	if v, ok, err := optInt(f, name+".vocab_size"); err != nil {
		return 0, err
	} else if ok {
		return v, inRange(name+".vocab_size", v, 1, 1<<24, "at most 2^24")
	}
	if kv, ok := f.Get("tokenizer.ggml.tokens"); ok {
		if a, ok := kv.Value.(Array); ok {
			return int64(len(a.Values)), nil
		}
	}
	if t, ok := f.Tensor("token_embd.weight"); ok && len(t.Dims) == 2 {
		return t.Dims[1], nil
	}
	return 0, fmt.Errorf("gguf: no vocabulary size (%s.vocab_size, tokenizer.ggml.tokens or token_embd.weight)", name)
}

// Tensors returns every tensor of a GGUF under its HF name and PyTorch shape, stored as dtype
// ("F32", "BF16", "F16"), in cfg.Tensors' order. Each is lazy (safetensors.Tensor.Stream): its
// data is read, dequantised to float32 and encoded only when a writer reaches it, a million
// elements at a time (File.Float32Pieces), with what llama.cpp's converter changed undone: the
// Q/K row permutation (llama; those tensors whole), the +1 of the norms (gemma3). So a conversion
// holds a few megabytes of tensor data at a time, whatever the file's size. A tensor without an
// HF name, a missing one or a shape other than cfg implies is an error naming it, before anything
// is read; rope_freqs.weight is skipped when cfg has Llama 3's rope_scaling (which Config cannot
// rebuild from the factors, so the caller gives it).
func Tensors(f *File, cfg *decoder.Config, dtype string) ([]*safetensors.Tensor, error) {
	name, a, err := archOf(f)
	if err != nil {
		return nil, err
	}
	if dtype != "F32" && dtype != "BF16" && dtype != "F16" {
		return nil, fmt.Errorf("gguf: dtype %q is not F32, BF16 or F16", dtype)
	}
	byHF := map[string]*TensorInfo{}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Name == "rope_freqs.weight" && cfg.Rope.Type == "llama3" {
			continue // Llama 3's RoPE factors, which cfg's rope_scaling gives
		}
		hf := a.hfName(t.Name)
		if hf == "" {
			return nil, fmt.Errorf("gguf: tensor %q has no HF name in architecture %s", t.Name, name)
		}
		byHF[hf] = t
	}
	specs := cfg.Tensors()
	var extra []string
	for hf, t := range byHF {
		if !slices.ContainsFunc(specs, func(s decoder.TensorSpec) bool { return s.Name == hf }) {
			extra = append(extra, t.Name)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		return nil, fmt.Errorf("gguf: tensor %q is not in the %d-layer %s the metadata describes", extra[0], cfg.NumHiddenLayers, name)
	}
	out := make([]*safetensors.Tensor, 0, len(specs))
	for _, s := range specs {
		t := byHF[s.Name]
		if t == nil {
			return nil, fmt.Errorf("gguf: no tensor for %s", s.Name)
		}
		if shape := t.Shape(); !slices.Equal(shape, s.Shape) {
			return nil, fmt.Errorf("gguf: tensor %q (%s) has shape %v, the metadata implies %v", t.Name, s.Name, shape, s.Shape)
		}
		if !CanDequantize(t.Type) {
			_, err := Dequantize(t.Type, nil, 0)
			return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
		}
		stream := func(w io.Writer) error {
			var heads int
			switch {
			case a.permuteQK && blockSuffix(t.Name, "attn_q.weight", "attn_q.bias"):
				heads = cfg.NumAttentionHeads
			case a.permuteQK && blockSuffix(t.Name, "attn_k.weight", "attn_k.bias"):
				heads = cfg.NumKeyValueHeads
			}
			if heads > 0 { // the permutation moves whole rows across the tensor: read it whole
				v, err := f.Float32(t)
				if err != nil {
					return err
				}
				_, err = w.Write(safetensors.AppendFloat32s(nil, unpermuteRows(v, s.Shape[0], heads), dtype))
				return err
			}
			minusOne := a.normPlusOne && strings.HasSuffix(t.Name, "norm.weight")
			var buf []byte
			return f.Float32Pieces(t, func(v []float32) error {
				if minusOne {
					for i := range v {
						v[i]--
					}
				}
				buf = safetensors.AppendFloat32s(buf[:0], v, dtype)
				_, err := w.Write(buf)
				return err
			})
		}
		out = append(out, &safetensors.Tensor{Name: s.Name, DType: dtype, Shape: slices.Clone(s.Shape), Stream: stream})
	}
	return out, nil
}

func blockSuffix(name string, suffixes ...string) bool {
	m := blockName.FindStringSubmatch(name)
	return m != nil && slices.Contains(suffixes, m[2])
}

// unpermuteRows undoes convert_hf_to_gguf.py's LlamaModel.permute on a [rows, cols] matrix (or a
// bias, cols = 1): llama.cpp stores HF row h·d + s·d/2 + i (head h of nHeads, half s, i < d/2,
// d = rows/nHeads) at row h·d + 2i + s, interleaving each head's two rotary halves (GGML's RoPE
// rotates adjacent pairs, HF's rotate_half the two halves). transformers' GGUF loader undoes it
// the same way (reverse_permute_weights: reshape(n_head, d/2, 2, …).swapaxes(1, 2)).
func unpermuteRows(v []float32, rows, nHeads int) []float32 {
	return llamaPermutation(v, rows, nHeads, false)
}

// llamaPermutation moves the rows of a [rows, cols] matrix between HF's order (row h·d + s·d/2 + i)
// and llama.cpp's (row h·d + 2i + s): toGGUF is permuteRows, else unpermuteRows.
func llamaPermutation(v []float32, rows, nHeads int, toGGUF bool) []float32 {
	cols := len(v) / rows
	d := rows / nHeads
	out := make([]float32, len(v))
	for h := range nHeads {
		for s := range 2 {
			for i := range d / 2 {
				from, to := h*d+2*i+s, h*d+s*d/2+i
				if toGGUF {
					from, to = to, from
				}
				copy(out[to*cols:(to+1)*cols], v[from*cols:(from+1)*cols])
			}
		}
	}
	return out
}
