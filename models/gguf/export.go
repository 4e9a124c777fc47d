package gguf

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/safetensors"
)

// ExportTypes are the --type values of Export and their general.file_type (llama.cpp's
// llama_ftype: MOSTLY_F16 1, MOSTLY_Q8_0 7, MOSTLY_Q4_K_M 15, MOSTLY_BF16 32).
var ExportTypes = map[string]uint32{"f16": 1, "bf16": 32, "q8_0": 7, "q4_k_m": 15}

// ExportTypeNames lists ExportTypes in the order the docs give them.
var ExportTypeNames = []string{"f16", "bf16", "q8_0", "q4_k_m"}

// ExportOptions say what Export writes.
type ExportOptions struct {
	// Type is one of ExportTypes.
	Type string
	// TokenizerDir holds tokenizer.json and tokenizer_config.json (and chat_template.jinja).
	TokenizerDir string
	// Name is general.name.
	Name string
}

// Exported is what Export wrote.
type Exported struct {
	Arch      string
	Tensors   int
	Types     map[Type]int // tensors per ggml type
	Fallbacks []string     // tensors whose row length forced a smaller block (llama.cpp's fallback)
	Template  string       // tokenizer.chat_template, "" when none
	Stops     []string     // the end-of-turn and eos tokens (the Modelfile's stop lines)
}

// exportArchs maps a model_type to its GGUF architecture.
var exportArchs = map[string]string{"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma3_text": "gemma3"}

// ExportArch returns the GGUF architecture of cfg, refusing what llama.cpp's format cannot carry
// for it (naming the config field): a model_type other than llama, qwen2, qwen3, gemma3_text;
// RoPE scaling other than llama3 (llama) and linear (gemma3); Gemma 3's query_pre_attn_scalar
// other than head_dim (llama.cpp scales by key_length^-½) or layer_types that are not one
// sliding-window pattern.
func ExportArch(cfg *decoder.Config) (string, error) {
	name, ok := exportArchs[cfg.ModelType]
	if !ok {
		return "", fmt.Errorf("model_type %q cannot be exported to GGUF (supported: %s)", cfg.ModelType, strings.Join(slices.Sorted(maps.Keys(exportArchs)), ", "))
	}
	switch rt := cfg.Rope.Type; {
	case rt == "" || rt == "default":
	case rt == "llama3" && name == "llama":
	case rt == "linear" && name == "gemma3":
	default:
		return "", fmt.Errorf("rope_scaling %q cannot be exported for %s", rt, cfg.ModelType)
	}
	if name == "gemma3" {
		scalar := float64(cfg.HeadDim)
		if cfg.NumHiddenLayers == 62 {
			scalar = float64(cfg.HiddenSize / cfg.NumAttentionHeads)
		}
		if cfg.Gemma.QueryPreAttnScalar != scalar {
			return "", fmt.Errorf("query_pre_attn_scalar %g cannot be exported: llama.cpp's gemma3 scales the scores by %g^-1/2 (head_dim)", cfg.Gemma.QueryPreAttnScalar, scalar)
		}
		if _, err := slidingPattern(cfg.LayerTypes); err != nil {
			return "", err
		}
	}
	return name, nil
}

// slidingPattern is the p of llama.cpp's set_swa_pattern for layer_types (layer i full attention
// iff i % p == p − 1): 0 when every layer is full attention.
func slidingPattern(types []string) (int, error) {
	first := slices.Index(types, "full_attention")
	if !slices.Contains(types, "sliding_attention") {
		return 0, nil
	}
	p := first + 1
	if first < 0 {
		p = len(types) + 1
	}
	if want := decoder.PatternLayerTypes(len(types), p); !slices.Equal(types, want) {
		return 0, fmt.Errorf("layer_types %v cannot be exported: llama.cpp's gemma3 takes one sliding-window pattern (every p-th layer full attention)", types)
	}
	return p, nil
}

// exportName maps an HF tensor name to its GGUF name for architecture a.
func (a arch) exportName(hf string) (string, bool) {
	switch hf {
	case "model.embed_tokens.weight":
		return "token_embd.weight", true
	case "model.norm.weight":
		return "output_norm.weight", true
	case "lm_head.weight":
		return "output.weight", true
	}
	rest, ok := strings.CutPrefix(hf, "model.layers.")
	if !ok {
		return "", false
	}
	layer, suffix, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	for g, h := range a.names {
		if h == suffix {
			return "blk." + layer + "." + g, true
		}
	}
	return "", false
}

// Export writes cfg's model (weights under HF names, any stored dtype) as a GGUF file at path, as
// llama.cpp's convert_hf_to_gguf.py (and, for q4_k_m, llama-quantize after it) would: the metadata
// (exportMetadata), the tokenizer of opts.TokenizerDir (readExportTokenizer), the tensors under
// gguf-py's names with the converter's changes (ggufTensor; Llama 3's rope_freqs), 1-D tensors and
// norms F32, the others as opts.Type says (mix.typeOf).
// Nothing is left at path on an error (WriteFile).
func Export(path string, cfg *decoder.Config, weights []*safetensors.Tensor, opts ExportOptions) (*Exported, error) {
	ftype, ok := ExportTypes[opts.Type]
	if !ok {
		return nil, fmt.Errorf("--type %q is not supported (valid: %s)", opts.Type, strings.Join(ExportTypeNames, ", "))
	}
	name, err := ExportArch(cfg)
	if err != nil {
		return nil, err
	}
	a := archs[name]
	tok, err := readExportTokenizer(opts.TokenizerDir, cfg, name)
	if err != nil {
		return nil, err
	}
	kvs, err := exportMetadata(cfg, name, opts.Name, ftype)
	if err != nil {
		return nil, err
	}
	kvs = append(kvs, KV{"general.quantization_version", TypeUint32, uint32(2)})
	kvs = append(kvs, tok.kvs...)
	byName := map[string]*safetensors.Tensor{}
	for _, w := range weights {
		byName[w.Name] = w
	}
	var out []OutTensor
	if cfg.Rope.Type == "llama3" {
		out = append(out, f32Tensor("rope_freqs.weight", []int64{int64(cfg.HeadDim / 2)}, llama3RopeFactors(cfg)))
	}
	res := &Exported{Arch: name, Types: map[Type]int{}, Template: tok.template, Stops: tok.stops}
	mix := newMix(opts.Type, cfg)
	for _, s := range cfg.Tensors() {
		gname, dims, values, err := ggufTensor(a, name, cfg, tok.n, s, byName[s.Name])
		if err != nil {
			return nil, err
		}
		t, fellBack := mix.typeOf(gname, dims)
		if fellBack {
			res.Fallbacks = append(res.Fallbacks, gname)
		}
		load := func() ([]byte, error) { // when WriteFile reaches it: one tensor in memory at a time
			v, err := values()
			if err != nil {
				return nil, err
			}
			return Quantize(t, v)
		}
		out = append(out, OutTensor{Name: gname, Dims: dims, Type: t, Load: load})
	}
	for _, t := range out {
		res.Types[t.Type]++
	}
	res.Tensors = len(out)
	if err := WriteFile(path, kvs, out); err != nil {
		return nil, err
	}
	return res, nil
}

// ggufTensor is the HF tensor w (spec s) as architecture a's converter writes it: its GGUF name,
// its ggml dims, and a function giving its float32 values with the converter's changes (called
// when the tensor is written): llama's Q/K rows permuted (permuteRows), Gemma's norms + 1,
// Gemma's embedding cut to the tokenizer's nTokens rows (Gemma3Model.modify_tensors).
func ggufTensor(a arch, name string, cfg *decoder.Config, nTokens int, s decoder.TensorSpec, w *safetensors.Tensor) (string, []int64, func() ([]float32, error), error) {
	if w == nil {
		return "", nil, nil, fmt.Errorf("no tensor %s", s.Name)
	}
	if !slices.Equal(w.Shape, s.Shape) {
		return "", nil, nil, fmt.Errorf("tensor %s has shape %v, config.json implies %v", s.Name, w.Shape, s.Shape)
	}
	gname, ok := a.exportName(s.Name)
	if !ok {
		return "", nil, nil, fmt.Errorf("tensor %s has no GGUF name in architecture %s", s.Name, name)
	}
	shape := slices.Clone(s.Shape)
	cut := name == "gemma3" && gname == "token_embd.weight" && nTokens < shape[0]
	if cut {
		shape[0] = nTokens
	}
	values := func() ([]float32, error) {
		v, err := w.Float32s()
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", s.Name, err)
		}
		switch {
		case a.permuteQK && blockSuffix(gname, "attn_q.weight", "attn_q.bias"):
			v = permuteRows(v, s.Shape[0], cfg.NumAttentionHeads)
		case a.permuteQK && blockSuffix(gname, "attn_k.weight", "attn_k.bias"):
			v = permuteRows(v, s.Shape[0], cfg.NumKeyValueHeads)
		case a.normPlusOne && strings.HasSuffix(gname, "norm.weight"):
			for i := range v {
				v[i]++
			}
		case cut:
			v = v[:nTokens*shape[1]]
		}
		return v, nil
	}
	dims := make([]int64, len(shape))
	for i, d := range shape {
		dims[len(shape)-1-i] = int64(d)
	}
	return gname, dims, values, nil
}

func f32Tensor(name string, dims []int64, v []float32) OutTensor {
	data, _ := Quantize(F32, v)
	return OutTensor{Name: name, Dims: dims, Type: F32, Data: data}
}

// llama3RopeFactors is LlamaModel.generate_extra_tensors' rope_freqs.weight: for each rotary
// frequency f_k = base^(−2k/d), 1 when its wavelength 2π/f_k is below original/high_freq_factor,
// factor above original/low_freq_factor, and 1/((1 − s)/factor + s) in between with
// s = (original/wavelength − low)/(high − low); llama.cpp divides f_k by it. The arithmetic is
// the converter's torch float32 (a scalar divided by a tensor is the tensor's reciprocal times
// the scalar, Tensor.__rtruediv__), so the factors are the bits llama.cpp's converter writes.
func llama3RopeFactors(cfg *decoder.Config) []float32 {
	r, d := cfg.Rope, cfg.HeadDim
	old := float32(r.OriginalMaxPositionEmbeddings)
	lowW := float32(float64(r.OriginalMaxPositionEmbeddings) / r.LowFreqFactor)
	highW := float32(float64(r.OriginalMaxPositionEmbeddings) / r.HighFreqFactor)
	out := make([]float32, d/2)
	for k := range out {
		e := float32(2*k) / float32(d)
		freq := 1 / float32(math.Pow(cfg.RopeTheta, float64(e)))
		wavelen := float32((1 / freq) * float32(2*math.Pi))
		switch {
		case wavelen < highW:
			out[k] = 1
		case wavelen > lowW:
			out[k] = float32(r.Factor)
		default:
			s := (float32((1/wavelen)*old) - float32(r.LowFreqFactor)) / float32(r.HighFreqFactor-r.LowFreqFactor)
			out[k] = 1 / (float32((1-s)/float32(r.Factor)) + s)
		}
	}
	return out
}

// permuteRows is convert_hf_to_gguf.py's LlamaModel.permute (the inverse of unpermuteRows).
func permuteRows(v []float32, rows, nHeads int) []float32 {
	return llamaPermutation(v, rows, nHeads, true)
}
