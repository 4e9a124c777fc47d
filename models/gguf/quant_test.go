package gguf

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// quantGolden is testdata/quant/manifest.json (scripts/reference/gguf_quant_golden.py).
type quantGolden struct {
	Rows    int               `json:"rows"`
	NPerRow int               `json:"n_per_row"`
	SHA256  map[string]string `json:"sha256"`
}

// The Export quantisers are byte for byte llama.cpp's: on 32 rows of 256 drawn to reach every
// branch (zero and sub-GROUP_MAX_EPS blocks, all-positive and all-negative blocks, outliers,
// constant blocks, rounding midpoints), Quantize gives what ggml_quantize_chunk (libggml of
// llama-cpp-python 0.3.36: quantize_row_q8_0/q5_0/q4_K/q6_K_ref, and F16/BF16) gives, and for
// Q8_0, Q5_0, F16 and BF16 also what gguf-py 0.19.0's gguf.quants.quantize gives.
func TestExport_QuantizeMatchesGGML(t *testing.T) {
	dir := filepath.Join("testdata", "quant")
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g quantGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	in, err := os.ReadFile(filepath.Join(dir, "input.f32"))
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, len(in)/4)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(in[4*i:]))
	}
	for _, typ := range []Type{F16, BF16, Q8_0, Q5_0, Q4_K, Q6_K} {
		want, err := os.ReadFile(filepath.Join(dir, "ggml."+typ.String()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Quantize(typ, x)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(want)
		if hex.EncodeToString(s[:]) != g.SHA256["ggml."+typ.String()] {
			t.Fatalf("testdata ggml.%s does not match its manifest", typ)
		}
		if !bytes.Equal(got, want) {
			bb := int(typ.BlockBytes())
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("%s differs from ggml's first in block %d (byte %d of %d): got % x, want % x", typ, i/bb, i%bb, bb, got[i/bb*bb:(i/bb+1)*bb], want[i/bb*bb:(i/bb+1)*bb])
					break
				}
			}
			continue
		}
		if py, ok := g.SHA256["gguf-py."+typ.String()]; ok && py != g.SHA256["ggml."+typ.String()] {
			t.Errorf("%s: gguf-py's quantiser differs from ggml's (sha256 %s): posttrain's equals ggml's only", typ, py)
		}
		back, err := Dequantize(typ, got, int64(len(x)))
		if err != nil {
			t.Fatal(err)
		}
		var worst float64
		for i := range x {
			worst = math.Max(worst, math.Abs(float64(back[i]-x[i])))
		}
		t.Logf("%s: %d bytes equal to ggml's; max |dequantised − x| = %.3g", typ, len(got), worst)
	}
}

// The Q4_K_M mix on an 18-layer Gemma 3 270M (hidden 640, so every K-quant but ffn_down's falls
// back) is the one in the released gemma-3-270m-q4_k_m.gguf that llama-quantize wrote: attn_v
// Q8_0 (Q6_K's fallback) in layers 0, 1, 4, 7, 10, 13, 15, 16, 17 and Q5_0 elsewhere; ffn_down Q6_K
// in those layers and Q4_K elsewhere; attn_q/k, ffn_gate/up Q5_0, attn_output Q4_K (1024-wide
// rows); token_embd Q8_0 (tied: the output's type, 640 not whole 256s). On a 30-layer model with
// whole-256 rows the picks are Q6_K and Q4_K themselves, and an untied output is Q6_K.
func TestExport_Q4KMMix(t *testing.T) {
	more := map[int]bool{0: true, 1: true, 4: true, 7: true, 10: true, 13: true, 15: true, 16: true, 17: true}
	m := &mix{typ: "q4_k_m", nLayers: 18, nAttnV: 18, tiedEmbeddings: true}
	if got, _ := m.typeOf("token_embd.weight", []int64{640, 262144}); got != Q8_0 {
		t.Errorf("token_embd %s, want Q8_0", got)
	}
	for i := range 18 {
		want := map[string]Type{"attn_q": Q5_0, "attn_k": Q5_0, "attn_v": Q5_0, "attn_output": Q4_K, "ffn_gate": Q5_0, "ffn_up": Q5_0, "ffn_down": Q4_K}
		if more[i] {
			want["attn_v"], want["ffn_down"] = Q8_0, Q6_K
		}
		dims := map[string][]int64{"attn_q": {640, 1024}, "attn_k": {640, 256}, "attn_v": {640, 256}, "attn_output": {1024, 640},
			"ffn_gate": {640, 2048}, "ffn_up": {640, 2048}, "ffn_down": {2048, 640}}
		for _, name := range []string{"attn_k", "attn_output", "attn_q", "attn_v", "ffn_down", "ffn_gate", "ffn_up"} {
			if got, _ := m.typeOf("blk."+strconv.Itoa(i)+"."+name+".weight", dims[name]); got != want[name] {
				t.Errorf("layer %d %s: %s, want %s", i, name, got, want[name])
			}
		}
		if got, _ := m.typeOf("blk."+strconv.Itoa(i)+".attn_norm.weight", []int64{640}); got != F32 {
			t.Errorf("layer %d attn_norm %s, want F32", i, got)
		}
	}
	m = &mix{typ: "q4_k_m", nLayers: 30, nAttnV: 30}
	var v6 []int
	for i := range 30 {
		if got, _ := m.typeOf("blk."+strconv.Itoa(i)+".attn_v.weight", []int64{4096, 1024}); got == Q6_K {
			v6 = append(v6, i)
		} else if got != Q4_K {
			t.Errorf("layer %d attn_v %s", i, got)
		}
	}
	// use_more_bits(i, 30): i < 3, i ≥ 26, (i − 3) % 3 == 2
	if want := []int{0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29}; !slices.Equal(v6, want) {
		t.Errorf("Q6_K attn_v layers %v, want %v", v6, want)
	}
	if got, _ := m.typeOf("output.weight", []int64{4096, 32000}); got != Q6_K {
		t.Errorf("untied output %s, want Q6_K", got)
	}
	if got, _ := m.typeOf("token_embd.weight", []int64{4096, 32000}); got != Q4_K {
		t.Errorf("untied token_embd %s, want Q4_K", got)
	}
	if got, fb := m.typeOf("blk.0.ffn_gate.weight", []int64{48, 128}); got != F16 || !fb {
		t.Errorf("a 48-wide row: %s (fallback %v), want F16", got, fb)
	}
}
