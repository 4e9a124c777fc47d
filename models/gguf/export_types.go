package gguf

import (
	"strings"

	"github.com/posttrain/posttrain/models/decoder"
)

// mix chooses each tensor's ggml type for an export type. Tensors come in file order (token_embd,
// the blocks in layer order, output_norm, output), which is the order llama-quantize counts
// attn_v and ffn_down in.
type mix struct {
	typ              string
	nLayers, nAttnV  int
	iAttnV, iFFNDown int
	tiedEmbeddings   bool
}

func newMix(typ string, cfg *decoder.Config) *mix {
	return &mix{typ: typ, nLayers: cfg.NumHiddenLayers, nAttnV: cfg.NumHiddenLayers, tiedEmbeddings: cfg.TieWordEmbeddings}
}

// quantizable is convert_hf_to_gguf.py's and llama-quantize's (tensor_allows_quantization) rule
// for the architectures exported: 2-D tensors named *.weight, norms excepted; the others are F32.
func quantizable(name string, dims []int64) bool {
	return len(dims) >= 2 && strings.HasSuffix(name, ".weight") && !strings.HasSuffix(name, "_norm.weight")
}

// useMoreBits is llama_tensor_get_type_impl's use_more_bits: the first and last eighth of the
// layers and every third one between.
func useMoreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

// typeOf is the type of tensor name with ggml dims (dims[0] the row length), and whether the row
// length forced llama.cpp's fallback to a type of smaller blocks:
//   - f16, bf16: F16, BF16 (convert_hf_to_gguf.py --outtype f16/bf16);
//   - q8_0: Q8_0, F16 when a row is not whole 32-blocks (the converter's QuantError fallback);
//   - q4_k_m: llama-quantize's Q4_K_M mix (llama_tensor_get_type_impl, LLAMA_FTYPE_MOSTLY_Q4_K_M,
//     a dense model): Q4_K for most; Q6_K for output.weight (token_embd.weight when the
//     embeddings are tied), Q8_0 instead when its rows are not whole 256-blocks; Q6_K for the
//     attn_v and ffn_down of the layers useMoreBits picks; then tensor_type_fallback: a row that
//     is not whole 256-blocks takes Q5_0 for Q4_K and Q8_0 for Q6_K, and F16 when not whole 32s.
func (m *mix) typeOf(name string, dims []int64) (Type, bool) {
	if !quantizable(name, dims) {
		return F32, false
	}
	ne0 := dims[0]
	switch m.typ {
	case "f16":
		return F16, false
	case "bf16":
		return BF16, false
	case "q8_0":
		if ne0%Q8_0.BlockSize() != 0 {
			return F16, true
		}
		return Q8_0, false
	}
	t := Q4_K
	switch {
	case name == "output.weight" || (m.tiedEmbeddings && name == "token_embd.weight"):
		t = Q6_K
		if ne0%Q4_K.BlockSize() != 0 {
			t = Q8_0
		}
	case strings.Contains(name, "attn_v.weight"):
		if useMoreBits(m.iAttnV, m.nAttnV) {
			t = Q6_K
		}
		m.iAttnV++
	case strings.Contains(name, "ffn_down"):
		if useMoreBits(m.iFFNDown, m.nLayers) {
			t = Q6_K
		}
		m.iFFNDown++
	}
	if ne0%t.BlockSize() == 0 {
		return t, false
	}
	switch t {
	case Q4_K:
		t = Q5_0
	case Q6_K:
		t = Q8_0
	}
	if ne0%t.BlockSize() != 0 {
		t = F16
	}
	return t, true
}
