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
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/models/tinymodel"
)

// exportFixtures are the tiny checkpoints of models/testdata that llama.cpp's format can carry
// (gemma3-tiny's query_pre_attn_scalar and smollm3-tiny's family cannot: TestExport_Refusals).
var exportFixtures = []string{"qwen2-tiny", "qwen3-tiny", "llama-tiny", "smollm2-tiny", "gemma3-bf16-tiny"}

// exportFixture copies models/testdata/NAME/model with models/tinymodel's tokenizer beside it.
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
func exportDir(t *testing.T, dir, typ string) (string, *decoder.Config, map[string]*safetensors.Tensor, *Exported) {
	t.Helper()
	cfg, err := decoder.ReadConfig(dir)
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

func checkSameConfig(t *testing.T, got, want *decoder.Config) {
	t.Helper()
	type sizes struct {
		Type                                    string
		Vocab, Hidden, Inter, Layers, Heads, KV int
		HeadDim, MaxPos                         int
		Eps, Theta                              float32
		Tied, AttnBias, MLPBias                 bool
		Layers2                                 string
	}
	of := func(c *decoder.Config) sizes {
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
func checkWeights(t *testing.T, f *File, cfg *decoder.Config, stored map[string]*safetensors.Tensor) {
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
// ratio of the unscaled to the scaled inverse frequencies (decoder.Config.InvFreq).
func checkRopeFreqs(t *testing.T, f *File, cfg *decoder.Config) {
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

// tokenizer.ggml.pre of the families' own tokenizer.json files: Llama 3's is llama-bpe, the Qwen
// one qwen2.
func TestExport_TokenizerPre(t *testing.T) {
	llama3 := readTokenizerJSON(t, filepath.Join("..", "..", "data", "tokenizer", "testdata", "llama3", "tokenizer.json.gz"))
	if pre, err := tokenizerPre(llama3); err != nil || pre != "llama-bpe" {
		t.Errorf("Llama 3: %q, %v; want llama-bpe", pre, err)
	}
	qwen := readTokenizerJSON(t, filepath.Join("..", "..", "data", "tokenizer", "testdata", "tokenizer.json.gz"))
	if pre, err := tokenizerPre(qwen); err != nil || pre != "qwen2" {
		t.Errorf("Qwen: %q, %v; want qwen2", pre, err)
	}
}

// Gemma 3's own tokenizer.json (SentencePiece-style BPE with byte fallback) exported as
// tokenizer.ggml.model llama and read back by the importer gives the same tokenizer: the same
// vocabulary, all 514,906 merges in order (spmMerges from the exported scores), the same ids on
// 479 texts of data/tokenizer/testdata/gemma3/golden.json.gz (the 480th has <image_soft_token>);
// and the tokens are those of the released gemma-3-270m-q4_k_m.gguf, with its scores for every
// piece a merge makes and its types but for <start_of_image>/<end_of_image> (special in
// tokenizer.json, so CONTROL; tokenizer.model, which llama.cpp read, has them USER_DEFINED), when
// scripts/real-models.sh has fetched it.
func TestExport_SentencePieceTokenizer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: rebuilds 514,906 merges")
	}
	src := filepath.Join("..", "..", "data", "tokenizer", "testdata", "gemma3")
	dir := t.TempDir()
	var tjAny any
	readGzipJSON(t, filepath.Join(src, "tokenizer.json.gz"), &tjAny)
	tjRaw, err := json.Marshal(tjAny)
	if err != nil {
		t.Fatal(err)
	}
	tcRaw, err := os.ReadFile(filepath.Join(src, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tokenizer.json": tjRaw, "tokenizer_config.json": tcRaw} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := readExportTokenizer(dir, &decoder.Config{VocabSize: 262144}, "gemma3")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tok.gguf")
	kvs := append([]KV{{"general.architecture", TypeString, "gemma3"}}, tok.kvs...)
	if err := WriteFile(path, kvs, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gotJSON, gotCfg, err := Tokenizer(f)
	if err != nil {
		t.Fatal(err)
	}
	var orig, back struct {
		Model struct {
			Vocab  map[string]int    `json:"vocab"`
			Merges []json.RawMessage `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(tjRaw, &orig); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(gotJSON, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Model.Vocab) != len(orig.Model.Vocab) {
		t.Errorf("vocabulary %d, want %d", len(back.Model.Vocab), len(orig.Model.Vocab))
	}
	for s, id := range orig.Model.Vocab {
		if back.Model.Vocab[s] != id {
			t.Fatalf("token %q is %d, want %d", s, back.Model.Vocab[s], id)
		}
	}
	if len(back.Model.Merges) != len(orig.Model.Merges) {
		t.Fatalf("%d merges, want %d", len(back.Model.Merges), len(orig.Model.Merges))
	}
	for i := range orig.Model.Merges {
		var a, b []string
		_ = json.Unmarshal(orig.Model.Merges[i], &a)
		_ = json.Unmarshal(back.Model.Merges[i], &b)
		if !slices.Equal(a, b) {
			t.Fatalf("merge %d is %q, want %q", i, b, a)
		}
	}
	checkGemmaIDs(t, gotJSON, gotCfg)
	checkAgainstRealGemma(t, f)
}

// checkGemmaIDs loads the rebuilt tokenizer and compares its ids with HF tokenizers' on the
// golden texts.
func checkGemmaIDs(t *testing.T, tj, tc []byte) {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": tc} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []struct {
			Text       string `json:"text"`
			IDs        []int  `json:"ids"`
			IDsPlain   []int  `json:"ids_plain"`
			IDsSpecial []int  `json:"ids_special"`
			Decoded    string `json:"decoded"`
		} `json:"cases"`
	}
	readGzipJSON(t, filepath.Join("..", "..", "data", "tokenizer", "testdata", "gemma3", "golden.json.gz"), &g)
	checked, bad := 0, 0
	for _, c := range g.Cases {
		if slices.Contains(c.IDs, 262144) {
			continue // <image_soft_token>, past the embedding's 262144 rows: dropped, as llama.cpp drops it
		}
		checked++
		if !slices.Equal(tok.Encode(c.Text), c.IDs) || !slices.Equal(tok.EncodePlain(c.Text), c.IDsPlain) ||
			!slices.Equal(tok.EncodeSpecial(c.Text), c.IDsSpecial) || tok.Decode(c.IDs, false) != c.Decoded {
			if bad++; bad <= 3 {
				t.Errorf("golden text %+q: ids %v, HF %v", c.Text, tok.Encode(c.Text), c.IDs)
			}
		}
	}
	if checked < 479 || bad > 0 {
		t.Errorf("%d of %d golden texts differ from HF tokenizers'", bad, checked)
	}
}

// checkAgainstRealGemma compares tokens, types and the merged pieces' scores with the released
// Gemma 3 270M GGUF, when present.
func checkAgainstRealGemma(t *testing.T, f *File) {
	t.Helper()
	path := filepath.Join(realModels, "gemma-3-270m-q4_k_m.gguf")
	r, err := Open(path)
	if err != nil {
		t.Logf("%s is absent (scripts/real-models.sh fetches it): tokens not compared with it", path)
		return
	}
	defer r.Close()
	for _, key := range []string{"tokenizer.ggml.tokens"} {
		a, _ := f.Strings(key)
		b, _ := r.Strings(key)
		if !slices.Equal(a, b) {
			t.Errorf("%s differs from the released GGUF's (%d and %d)", key, len(a), len(b))
		}
	}
	ta, _ := f.Ints("tokenizer.ggml.token_type")
	tb, _ := r.Ints("tokenizer.ggml.token_type")
	sa, _ := f.Float32s("tokenizer.ggml.scores")
	sb, _ := r.Float32s("tokenizer.ggml.scores")
	toks, _ := r.Strings("tokenizer.ggml.tokens")
	var types []string
	scores := 0
	for i := range tb {
		if i >= len(ta) || ta[i] != tb[i] {
			types = append(types, fmt.Sprintf("%q %d (released %d)", toks[i], ta[i], tb[i]))
		}
		if i < len(sa) && sa[i] != sb[i] && len([]rune(toks[i])) > 1 {
			scores++
		}
	}
	t.Logf("vs the released GGUF: token types differ for %v; %d multi-character scores differ", types, scores)
	if scores > 0 || len(types) > 2 {
		t.Errorf("the exported vocabulary differs from the released GGUF's beyond the two image tokens")
	}
}
