package gguf

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/posttrain/posttrain/models/qwen2"
	"github.com/posttrain/posttrain/models/safetensors"
)

// llamaNames maps llama.cpp's tensor names (its gguf-py tensor_mapping.py, MODEL_ARCH.LLAMA) to
// HF transformers' LlamaForCausalLM names; "blk.N." becomes "model.layers.N.".
var llamaNames = map[string]string{
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

var blockName = regexp.MustCompile(`^blk\.(\d+)\.(.+)$`)

// llamaHFName is the HF name of a llama GGUF tensor, or "" when it has none.
func llamaHFName(name string) string {
	switch name {
	case "token_embd.weight":
		return "model.embed_tokens.weight"
	case "output_norm.weight":
		return "model.norm.weight"
	case "output.weight":
		return "lm_head.weight"
	}
	if m := blockName.FindStringSubmatch(name); m != nil {
		if hf, ok := llamaNames[m[2]]; ok {
			return "model.layers." + m[1] + "." + hf
		}
	}
	return ""
}

// LlamaConfig builds the HF config of a GGUF of architecture llama from its metadata (the keys
// llama.cpp's convert_hf_to_gguf.py writes from config.json), parsed by qwen2.ParseConfig so it
// gets the defaults a config.json would. Features this conversion does not handle are refused:
// RoPE scaling (rope_freqs.weight, llama.rope.scaling.*) and a rotary dimension other than head_dim.
func LlamaConfig(f *File) (*qwen2.Config, error) {
	arch, err := f.String("general.architecture")
	if err != nil {
		return nil, err
	}
	if arch != "llama" {
		return nil, fmt.Errorf("gguf: architecture %q is not supported (only \"llama\")", arch)
	}
	need := func(key string) int64 {
		v, e := f.Int(key)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	hidden, layers, heads := need("llama.embedding_length"), need("llama.block_count"), need("llama.attention.head_count")
	inter := need("llama.feed_forward_length")
	if err != nil {
		return nil, err
	}
	if heads <= 0 {
		return nil, fmt.Errorf("gguf: metadata llama.attention.head_count is %d", heads)
	}
	m := map[string]any{"model_type": "llama", "architectures": []string{"LlamaForCausalLM"},
		"hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
		"intermediate_size": inter, "hidden_act": "silu"}
	kv := heads
	if v, e := f.Int("llama.attention.head_count_kv"); e == nil {
		kv = v
	}
	m["num_key_value_heads"] = kv
	headDim := hidden / heads
	if v, e := f.Int("llama.attention.key_length"); e == nil {
		headDim = v
		m["head_dim"] = v
	}
	if v, e := f.Int("llama.rope.dimension_count"); e == nil && v != headDim {
		return nil, fmt.Errorf("gguf: llama.rope.dimension_count %d differs from head_dim %d (partial rotary is not supported)", v, headDim)
	}
	for key, field := range map[string]string{"llama.rope.freq_base": "rope_theta",
		"llama.attention.layer_norm_rms_epsilon": "rms_norm_eps"} {
		if v, e := floatMeta(f, key); e == nil {
			m[field] = v
		}
	}
	if v, e := f.Int("llama.context_length"); e == nil {
		m["max_position_embeddings"] = v
	}
	if err := llamaRefusals(f); err != nil {
		return nil, err
	}
	vocab, err := llamaVocabSize(f)
	if err != nil {
		return nil, err
	}
	m["vocab_size"] = vocab
	_, untied := f.Tensor("output.weight")
	m["tie_word_embeddings"] = !untied
	_, qBias := f.Tensor("blk.0.attn_q.bias")
	_, mlpBias := f.Tensor("blk.0.ffn_gate.bias")
	m["attention_bias"], m["mlp_bias"] = qBias, mlpBias
	for key, field := range map[string]string{"tokenizer.ggml.bos_token_id": "bos_token_id",
		"tokenizer.ggml.eos_token_id": "eos_token_id"} {
		if v, e := f.Int(key); e == nil {
			m[field] = v
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	cfg, err := qwen2.ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("gguf: the config from the metadata: %w", err)
	}
	return cfg, nil
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

func llamaRefusals(f *File) error {
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		return fmt.Errorf("gguf: tensor rope_freqs.weight (Llama 3 RoPE scaling) is not supported yet")
	}
	for _, kv := range f.Metadata {
		if len(kv.Key) > len("llama.rope.scaling.") && kv.Key[:len("llama.rope.scaling.")] == "llama.rope.scaling." {
			if kv.Key == "llama.rope.scaling.type" && kv.Value == "none" {
				continue
			}
			return fmt.Errorf("gguf: metadata %s: RoPE scaling is not supported yet", kv.Key)
		}
	}
	return nil
}

// llamaVocabSize is llama.vocab_size, else the number of tokens, else token_embd's rows.
func llamaVocabSize(f *File) (int64, error) {
	if v, err := f.Int("llama.vocab_size"); err == nil {
		return v, nil
	}
	if kv, ok := f.Get("tokenizer.ggml.tokens"); ok {
		if a, ok := kv.Value.(Array); ok {
			return int64(len(a.Values)), nil
		}
	}
	if t, ok := f.Tensor("token_embd.weight"); ok && len(t.Dims) == 2 {
		return t.Dims[1], nil
	}
	return 0, fmt.Errorf("gguf: no vocabulary size (llama.vocab_size, tokenizer.ggml.tokens or token_embd.weight)")
}

// LlamaTensors dequantises every tensor of a llama GGUF to float32 and returns them under their
// HF names and PyTorch shapes, stored as dtype ("F32", "BF16", "F16"), in cfg.Tensors' order:
// attn_q and attn_k get llama.cpp's row permutation undone (see unpermuteRows). A tensor without
// an HF name, a missing one or a shape other than cfg implies is an error.
func LlamaTensors(f *File, cfg *qwen2.Config, dtype string) ([]*safetensors.Tensor, error) {
	byHF := map[string]*TensorInfo{}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		hf := llamaHFName(t.Name)
		if hf == "" {
			return nil, fmt.Errorf("gguf: tensor %q has no HF llama name", t.Name)
		}
		byHF[hf] = t
	}
	specs := cfg.Tensors()
	if len(byHF) != len(specs) {
		var extra []string
		for hf := range byHF {
			if !slices.ContainsFunc(specs, func(s qwen2.TensorSpec) bool { return s.Name == hf }) {
				extra = append(extra, byHF[hf].Name)
			}
		}
		slices.Sort(extra)
		return nil, fmt.Errorf("gguf: %d tensors for the %d a %d-layer llama has (not in it: %q)", len(byHF), len(specs), cfg.NumHiddenLayers, extra)
	}
	out := make([]*safetensors.Tensor, 0, len(specs))
	for _, s := range specs {
		t := byHF[s.Name]
		if t == nil {
			return nil, fmt.Errorf("gguf: tensor for %s is missing", s.Name)
		}
		if shape := t.Shape(); !slices.Equal(shape, s.Shape) {
			return nil, fmt.Errorf("gguf: tensor %q (%s) has shape %v, the config implies %v", t.Name, s.Name, shape, s.Shape)
		}
		v, err := f.Float32(t)
		if err != nil {
			return nil, err
		}
		switch {
		case blockSuffix(t.Name, "attn_q.weight", "attn_q.bias"):
			v = unpermuteRows(v, s.Shape[0], cfg.NumAttentionHeads)
		case blockSuffix(t.Name, "attn_k.weight", "attn_k.bias"):
			v = unpermuteRows(v, s.Shape[0], cfg.NumKeyValueHeads)
		}
		out = append(out, safetensors.FromFloat32s(s.Name, s.Shape, v, dtype))
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
	cols := len(v) / rows
	d := rows / nHeads
	out := make([]float32, len(v))
	for h := range nHeads {
		for s := range 2 {
			for i := range d / 2 {
				hf, gg := h*d+s*d/2+i, h*d+2*i+s
				copy(out[hf*cols:(hf+1)*cols], v[gg*cols:(gg+1)*cols])
			}
		}
	}
	return out
}
