package gguf

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/tokenizer"
	"github.com/posttrain/posttrain/internal/tinymodel"
	"github.com/posttrain/posttrain/models/qwen2"
	"github.com/posttrain/posttrain/models/safetensors"
)

// exportFixtures are the tiny checkpoints of models/testdata that llama.cpp's format can carry
// (gemma3-tiny's query_pre_attn_scalar and smollm3-tiny's family cannot: TestExport_Refusals).
var exportFixtures = []string{"qwen2-tiny", "qwen3-tiny", "llama-tiny", "smollm2-tiny", "gemma3-bf16-tiny"}

// exportFixture copies models/testdata/NAME/model with internal/tinymodel's tokenizer beside it.
func exportFixture(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "testdata", name, "model"))); err != nil {
		t.Fatal(err)
	}
	if err := tinymodel.WriteTokenizer(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// exportDir exports the checkpoint in dir as typ and returns the file, its config and weights.
func exportDir(t *testing.T, dir, typ string) (string, *qwen2.Config, map[string]*safetensors.Tensor, *Exported) {
	t.Helper()
	cfg, err := qwen2.ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := safetensors.ReadModelDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var weights []*safetensors.Tensor
	for _, s := range cfg.Tensors() {
		weights = append(weights, stored[s.Name])
	}
	path := filepath.Join(t.TempDir(), filepath.Base(dir)+"."+typ+".gguf")
	res, err := Export(path, cfg, weights, ExportOptions{Type: typ, TokenizerDir: dir, Name: filepath.Base(dir)})
	if err != nil {
		t.Fatalf("export %s: %v", typ, err)
	}
	return path, cfg, stored, res
}

// errBound is how far a dequantised element may be from the original x, for the ggml type its
// tensor was stored as, amax being the largest |x| of its block (d the block's scale, d16 its
// float16 rounding, |d − d16| ≤ d·2^-11):
//   - F32 exact, F16 and BF16 half an ulp of their format (relative 2^-11, 2^-8);
//   - Q8_0: d = amax/127, |x − q·d16| ≤ d/2 + 127·|d − d16| ≤ 0.57·d;
//   - Q5_0: d = amax/16, the clip of q = 32 at 31 gives up to d, plus 16·|d − d16|: 1.01·d.
func errBound(typ Type, x, amax float64) float64 {
	switch typ {
	case F32:
		return 0
	case F16:
		return math.Max(math.Abs(x)*math.Pow(2, -11), math.Pow(2, -25))
	case BF16:
		return math.Abs(x) * math.Pow(2, -8)
	case Q8_0:
		return 0.57 * amax / 127
	case Q5_0:
		return 1.01 * amax / 16
	}
	return math.Inf(1)
}

// Every tiny fixture exported at every type and read back by the importer (Config, Tensors,
// Tokenizer) gives its config, its weights (exactly for F32 and to F16/BF16 rounding; Q8_0 and
// Q5_0 within errBound, block by block) and its tokenizer (same ids on a few strings, same chat
// template and special ids) back. llama-tiny's Llama 3 RoPE scaling travels as rope_freqs.weight,
// which Config cannot invert: the round trip passes it the source config, and the factors are
// checked against the formula.
func TestExport_RoundTrip(t *testing.T) {
	texts := []string{"Hello, world!", "  two  spaces and 123456 digits\n", "<|im_start|>user\nhi<|im_end|>", "naïve café — ok"}
	for _, fx := range exportFixtures {
		dir := exportFixture(t, fx)
		orig, err := tokenizer.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range ExportTypeNames {
			t.Run(fx+"/"+typ, func(t *testing.T) {
				path, cfg, stored, _ := exportDir(t, dir, typ)
				f, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				got, err := Config(f)
				if cfg.Rope.Type == "llama3" {
					if err == nil || !strings.Contains(err.Error(), "rope_freqs") {
						t.Fatalf("Config of a Llama 3 RoPE export: %v, want the rope_freqs refusal", err)
					}
					checkRopeFreqs(t, f, cfg)
					got = cfg
				} else if err != nil {
					t.Fatal(err)
				}
				checkSameConfig(t, got, cfg)
				checkWeights(t, f, cfg, stored)
				checkTokenizer(t, f, orig, texts, *cfg.BOSTokenID)
			})
		}
	}
}

func checkSameConfig(t *testing.T, got, want *qwen2.Config) {
	t.Helper()
	type sizes struct {
		Type                                    string
		Vocab, Hidden, Inter, Layers, Heads, KV int
		HeadDim, MaxPos                         int
		Eps, Theta                              float32
		Tied, AttnBias, MLPBias                 bool
		Layers2                                 string
	}
	of := func(c *qwen2.Config) sizes {
		return sizes{c.ModelType, c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers, c.NumAttentionHeads,
			c.NumKeyValueHeads, c.HeadDim, c.MaxPositionEmbeddings, float32(c.RMSNormEps), float32(c.RopeTheta),
			c.TieWordEmbeddings, c.AttentionBias, c.MLPBias, strings.Join(c.LayerTypes, ",")}
	}
	if g, w := of(got), of(want); g != w {
		t.Errorf("config read back %+v, want %+v", g, w)
	}
	if got.Rope != want.Rope {
		t.Errorf("rope %+v, want %+v", got.Rope, want.Rope)
	}
	if want.Gemma != nil {
		g, w := *got.Gemma, *want.Gemma
		if g.QueryPreAttnScalar != w.QueryPreAttnScalar || g.SlidingWindow != w.SlidingWindow ||
			g.RopeLocalBaseFreq != w.RopeLocalBaseFreq || g.FinalLogitSoftcapping != w.FinalLogitSoftcapping {
			t.Errorf("gemma3 fields %+v, want %+v", g, w)
		}
	}
}

// checkWeights reads every tensor back (Tensors, with cfg) and holds it to errBound of the type it
// was stored as; Gemma's norms, stored as w + 1 in F32, come back within 2^-24 of w.
func checkWeights(t *testing.T, f *File, cfg *qwen2.Config, stored map[string]*safetensors.Tensor) {
	t.Helper()
	back, err := Tensors(f, cfg, "F32")
	if err != nil {
		t.Fatal(err)
	}
	_, a, _ := archOf(f)
	for _, b := range back {
		gname, _ := a.exportName(b.Name)
		info, _ := f.Tensor(gname)
		got, _ := b.Float32s()
		want, err := stored[b.Name].Float32s()
		if err != nil {
			t.Fatal(err)
		}
		row, bs := b.Shape[len(b.Shape)-1], int(info.Type.BlockSize())
		var worst float64
		for i := range want {
			start := i / bs * bs
			if start/row != (start+bs-1)/row {
				t.Fatalf("%s: block crosses a row", b.Name)
			}
			var amax float64
			for _, v := range want[start : start+bs] {
				amax = math.Max(amax, math.Abs(float64(v)))
			}
			bound := errBound(info.Type, float64(want[i]), amax)
			if a.normPlusOne && strings.HasSuffix(b.Name, "norm.weight") {
				bound = math.Pow(2, -24)
			}
			d := math.Abs(float64(got[i]) - float64(want[i]))
			worst = math.Max(worst, d)
			if d > bound {
				t.Fatalf("%s (%s) [%d] = %v, want %v within %.3g", b.Name, info.Type, i, got[i], want[i], bound)
			}
		}
		if info.Type == Q8_0 || info.Type == Q5_0 {
			if worst == 0 {
				t.Errorf("%s (%s): no quantisation error at all", b.Name, info.Type)
			}
		}
	}
}

// checkRopeFreqs compares rope_freqs.weight with transformers' _compute_llama3_parameters: the
// ratio of the unscaled to the scaled inverse frequencies (qwen2.Config.InvFreq).
func checkRopeFreqs(t *testing.T, f *File, cfg *qwen2.Config) {
	t.Helper()
	info, ok := f.Tensor("rope_freqs.weight")
	if !ok {
		t.Fatal("no rope_freqs.weight")
	}
	got, err := f.Float32(info)
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.HeadDim
	r := cfg.Rope
	for k, g := range got {
		freq := math.Pow(cfg.RopeTheta, -float64(2*k)/float64(d))
		wavelen := 2 * math.Pi / freq
		want := 1.0
		lowW, highW := float64(r.OriginalMaxPositionEmbeddings)/r.LowFreqFactor, float64(r.OriginalMaxPositionEmbeddings)/r.HighFreqFactor
		switch {
		case wavelen > lowW:
			want = r.Factor
		case wavelen >= highW:
			s := (float64(r.OriginalMaxPositionEmbeddings)/wavelen - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
			want = 1 / ((1-s)/r.Factor + s)
		}
		if math.Abs(float64(g)-want) > 1e-5*want {
			t.Errorf("rope_freqs[%d] = %v, want %v", k, g, want)
		}
	}
	if !slices.Contains(got, float32(r.Factor)) || !slices.Contains(got, 1) {
		t.Errorf("rope_freqs %v has no kept and no fully scaled pair: the fixture does not exercise the formula", got)
	}
}

// checkTokenizer rebuilds tokenizer.json from the metadata (Tokenizer) and checks that it gives
// the original's ids on texts, and that the chat template and special ids came through.
// The ids are SpecialVocab's: eos and pad from tokenizer_config.json (<|im_end|> 511,
// <|endoftext|> 509), bos from config.json (tokenizer_config.json has none).
func checkTokenizer(t *testing.T, f *File, orig *tokenizer.BPE, texts []string, bos int) {
	t.Helper()
	tj, tc, err := Tokenizer(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": tc} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	back, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range texts {
		if got, want := back.Encode(s), orig.Encode(s); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v after the round trip, want %v", s, got, want)
		}
	}
	if got, want := back.Config().ChatTemplate, tinymodel.ChatTemplate; got != want {
		t.Errorf("chat template %q, want %q", got, want)
	}
	for key, want := range map[string]int64{"tokenizer.ggml.eos_token_id": 511, "tokenizer.ggml.padding_token_id": 509, "tokenizer.ggml.bos_token_id": int64(bos)} {
		if got, err := f.Int(key); err != nil || got != want {
			t.Errorf("%s = %d (%v), want %d", key, got, err, want)
		}
	}
}

// converterGolden is testdata/export/convert_hf_to_gguf.json (scripts/reference/
// gguf_convert_golden.py): what llama.cpp's convert_hf_to_gguf.py writes for the tiny fixtures.
type converterGolden struct {
	Files map[string]struct {
		Metadata []struct {
			Key, Type, SHA256 string
			Value             any
		}
		Tensors []struct {
			Name, Type, SHA256 string
			NE                 []int64
		}
	}
}

// converterOnly are metadata keys llama.cpp's converter derives from the directory name (and a
// size estimate), not from the checkpoint; posttrain writes general.name from --model.
var converterOnly = []string{"general.name", "general.size_label", "general.basename", "general.finetune"}

// Exported f16, bf16 and q8_0, every tiny fixture is what llama.cpp's own converter writes for it:
// the same metadata entries in the same order, byte for byte (but the names of converterOnly, and
// Gemma 3's attention.sliding_window_pattern, which llama.cpp's loader reads and its converter does
// not write: without it llama.cpp would treat gemma3-bf16-tiny's full-attention layer 1 as a
// sliding one), and the same tensors byte for byte (Q/K permutation, Gemma's norm + 1, Llama 3's
// rope_freqs, the Q8_0 quantiser and its F16 fallback included).
func TestExport_MatchesLlamaCppConverter(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "export", "convert_hf_to_gguf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g converterGolden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Files) != len(exportFixtures)*3 {
		t.Fatalf("golden has %d files, want %d", len(g.Files), len(exportFixtures)*3)
	}
	for _, fx := range exportFixtures {
		dir := exportFixture(t, fx)
		for _, typ := range []string{"f16", "bf16", "q8_0"} {
			want, ok := g.Files[fx+"."+typ]
			if !ok {
				t.Fatalf("golden has no %s.%s", fx, typ)
			}
			path, _, _, _ := exportDir(t, dir, typ)
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, kv := range f.Metadata {
				if slices.Contains(converterOnly, kv.Key) || kv.Key == "gemma3.attention.sliding_window_pattern" {
					continue
				}
				got = append(got, kv.Key+" "+kv.Type.String()+" "+kvSHA256(t, kv))
			}
			var wantKV []string
			for _, kv := range want.Metadata {
				if !slices.Contains(converterOnly, kv.Key) {
					wantKV = append(wantKV, kv.Key+" "+strings.ToLower(kv.Type)+" "+kv.SHA256)
				}
			}
			if !slices.Equal(got, wantKV) {
				t.Errorf("%s.%s metadata:\n got %q\nwant %q", fx, typ, got, wantKV)
			}
			tensors := map[string]string{}
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				raw, err := f.Raw(ti)
				if err != nil {
					t.Fatal(err)
				}
				s := sha256.Sum256(raw)
				tensors[ti.Name] = fmt.Sprintf("%s %v %s", ti.Type, ti.Dims, hex.EncodeToString(s[:]))
			}
			if len(tensors) != len(want.Tensors) {
				t.Errorf("%s.%s: %d tensors, the converter %d", fx, typ, len(tensors), len(want.Tensors))
			}
			for _, w := range want.Tensors {
				if got, want := tensors[w.Name], fmt.Sprintf("%s %v %s", w.Type, w.NE, w.SHA256); got != want {
					t.Errorf("%s.%s tensor %s: %s, the converter %s", fx, typ, w.Name, got, want)
				}
			}
			f.Close()
		}
	}
}

// kvSHA256 is the sha256 of a metadata entry as the file encodes it (key, type, value).
func kvSHA256(t *testing.T, kv KV) string {
	t.Helper()
	var b bytes.Buffer
	e := &encoder{w: bufio.NewWriter(&b)}
	e.str(kv.Key)
	e.u32(uint32(kv.Type))
	if err := e.value(kv.Type, kv.Value, kv.Key); err != nil {
		t.Fatal(err)
	}
	if err := e.w.Flush(); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(s[:])
}

// readTokenizerJSON reads a (gzipped) tokenizer.json into the export's view of it.
func readTokenizerJSON(t *testing.T, path string) *hfTokenizerJSON {
	t.Helper()
	var tj hfTokenizerJSON
	readGzipJSON(t, path, &tj)
	return &tj
}

// tokenizer.ggml.pre of the families' own tokenizer.json files: Llama 3's is llama-bpe, the tiny
// Qwen one qwen2; Gemma 3's SentencePiece-style BPE (byte_fallback) is refused by name.
func TestExport_TokenizerPre(t *testing.T) {
	llama3 := readTokenizerJSON(t, filepath.Join("..", "..", "data", "tokenizer", "testdata", "llama3", "tokenizer.json.gz"))
	if pre, err := tokenizerPre(llama3); err != nil || pre != "llama-bpe" {
		t.Errorf("Llama 3: %q, %v; want llama-bpe", pre, err)
	}
	qwen := readTokenizerJSON(t, filepath.Join("..", "..", "data", "tokenizer", "testdata", "tokenizer.json.gz"))
	if pre, err := tokenizerPre(qwen); err != nil || pre != "qwen2" {
		t.Errorf("Qwen: %q, %v; want qwen2", pre, err)
	}
	dir := t.TempDir()
	gemma := filepath.Join("..", "..", "data", "tokenizer", "testdata", "gemma3")
	for _, name := range []string{"tokenizer.json.gz", "tokenizer_config.json"} {
		data, err := os.ReadFile(filepath.Join(gemma, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "tokenizer.json.gz" {
			var v any
			readGzipJSON(t, filepath.Join(gemma, name), &v)
			if data, err = json.Marshal(v); err != nil {
				t.Fatal(err)
			}
			name = "tokenizer.json"
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := readExportTokenizer(dir, &qwen2.Config{VocabSize: 262144}, "gemma3")
	if err == nil || !strings.Contains(err.Error(), "only byte-level BPE tokenizers can be exported") || !strings.Contains(err.Error(), "byte_fallback true") {
		t.Errorf("Gemma 3's tokenizer: %v, want the byte_fallback refusal", err)
	}
}
