package gguf

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/models/safetensors"
)

// hfGolden is testdata/hf/<name>.json: what transformers' GGUF loader makes of the file
// (scripts/reference/gguf_hf_golden.py, transformers 4.57.6, gguf-py 0.19.0).
type hfGolden struct {
	File       string         `json:"file"`
	FileSHA256 string         `json:"file_sha256"`
	Config     map[string]any `json:"config"`
	Texts      []struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	} `json:"texts"`
	ChatTemplate string            `json:"chat_template"`
	Rendered     string            `json:"rendered"`
	LoadError    string            `json:"load_error"`
	Tensors      map[string]string `json:"tensors"`
}

func readHFGolden(t *testing.T, name string) *hfGolden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "hf", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var g hfGolden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// float32SHA256 is the sha256 of a tensor's float32 little-endian bytes, as the golden has it.
func float32SHA256(t *testing.T, tn *safetensors.Tensor) string {
	t.Helper()
	v, err := tn.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checkAgainstHF converts the GGUF at path to float32 and compares the checkpoint with
// transformers' loading of the same file: every tensor bit for bit, the config's sizes, ids and
// eps (eps as float32: transformers keeps the stored float32, convert the shortest decimal), the
// ids of the golden texts, the chat template byte for byte and its rendering. wantIDs says
// whether transformers' tokenizer is expected to agree (not for SentencePiece: see
// TestConvert_RealGemma3). It returns the output directory.
func checkAgainstHF(t *testing.T, path, golden string, wantIDs bool) string {
	t.Helper()
	g := readHFGolden(t, golden)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s := sha256.Sum256(data); hex.EncodeToString(s[:]) != g.FileSHA256 {
		t.Fatalf("%s is not the file the golden was made from (sha256 %s)", path, g.FileSHA256)
	}
	dir := filepath.Join(t.TempDir(), "out")
	if _, err := Convert(path, dir, ConvertOptions{WrittenBy: "test"}); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil || json.Unmarshal(raw, &cfg) != nil {
		t.Fatalf("config.json: %v", err)
	}
	for _, k := range []string{"model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
		"num_attention_heads", "num_key_value_heads", "rope_theta", "max_position_embeddings", "tie_word_embeddings",
		"bos_token_id", "eos_token_id", "sliding_window", "query_pre_attn_scalar", "rope_local_base_freq", "layer_types"} {
		want, ok := g.Config[k]
		if !ok || cfg["model_type"] != "gemma3_text" && slices.Contains([]string{"sliding_window", "layer_types"}, k) {
			continue // Qwen's sliding window is off (use_sliding_window false) whatever its size says
		}
		if gotJ, _ := json.Marshal(cfg[k]); string(gotJ) != string(must(json.Marshal(want))) {
			t.Errorf("config %s = %s, transformers %s", k, gotJ, must(json.Marshal(want)))
		}
	}
	if eps, ok := g.Config["rms_norm_eps"].(float64); !ok || float32(eps) != float32(cfg["rms_norm_eps"].(float64)) {
		t.Errorf("rms_norm_eps %v, transformers %v", cfg["rms_norm_eps"], g.Config["rms_norm_eps"])
	}
	text, err := encode.Load(dir, encode.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// transformers' GPT-2-style GGUF tokenizer sets unk_token, so a byte the vocabulary lacks
	// becomes unk; the rebuilt one drops it, as the original tokenizer.json (unk_token null) does.
	unk := -1
	if f, err := Open(path); err == nil {
		id, err := f.Int("tokenizer.ggml.unknown_token_id")
		if model, _ := f.String("tokenizer.ggml.model"); err == nil && model == "gpt2" {
			unk = int(id)
		}
		f.Close()
	}
	same := 0
	for _, c := range g.Texts {
		got := text.Tokenizer.Encode(c.Text)
		noUnk := slices.DeleteFunc(slices.Clone(c.IDs), func(id int) bool { return id == unk })
		if slices.Equal(got, c.IDs) || unk >= 0 && slices.Equal(got, noUnk) {
			same++
		} else if wantIDs {
			t.Errorf("Encode(%+q) = %v, transformers %v", c.Text, got, c.IDs)
		}
	}
	t.Logf("%s: %d/%d texts tokenised as transformers does", golden, same, len(g.Texts))
	if got := text.Tokenizer.Config().ChatTemplate; got != g.ChatTemplate {
		t.Errorf("chat template differs from transformers' (%d and %d bytes)", len(got), len(g.ChatTemplate))
	}
	if g.ChatTemplate != "" {
		got, err := text.RenderPrompt([]chat.Message{{Role: "user", Content: "What is the capital of France?"}})
		if err != nil || got != g.Rendered {
			t.Errorf("rendered %+q (%v), transformers %+q", got, err, g.Rendered)
		}
	}
	if g.LoadError != "" {
		t.Logf("%s: transformers 4.57.6 cannot load the model (%s); tensors not compared", golden, g.LoadError)
		return dir
	}
	weights, err := safetensors.ReadModelDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(weights) != len(g.Tensors) {
		t.Errorf("%d tensors, transformers %d", len(weights), len(g.Tensors))
	}
	for name, want := range g.Tensors {
		w, ok := weights[name]
		if !ok {
			t.Errorf("tensor %s missing", name)
			continue
		}
		if got := float32SHA256(t, w); got != want {
			t.Errorf("tensor %s differs from transformers' (sha256 %s, want %s)", name, got, want)
		}
	}
	return dir
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestConvert_TinyMatchesHF: the tiny Qwen2/Qwen3 GGUFs written by gguf-py the way llama.cpp's
// converter writes them (scripts/reference/gguf_tiny.py) convert to what transformers' GGUF
// loader makes of them, and back to their source checkpoints in models/testdata: exactly for the
// F32 tensors, to float16 rounding for the F16 ones, within Q8_0's error for the Q8_0 ones.
func TestConvert_TinyMatchesHF(t *testing.T) {
	for _, name := range []string{"qwen2-tiny", "qwen3-tiny"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("..", "testdata", "gguf", name+".gguf")
			dir := checkAgainstHF(t, path, name, true)
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := safetensors.ReadModelDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			src, err := safetensors.ReadModelDir(filepath.Join("..", "testdata", name, "model"))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(src) {
				t.Fatalf("%d tensors, the source checkpoint %d", len(got), len(src))
			}
			_, a, _ := archOf(f)
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				hf := a.hfName(ti.Name)
				x, err := src[hf].Float32s()
				if err != nil {
					t.Fatal(err)
				}
				y, err := got[hf].Float32s()
				if err != nil {
					t.Fatal(err)
				}
				for j := range x {
					var ok bool
					switch ti.Type {
					case F32:
						ok = y[j] == x[j]
					case F16:
						ok = y[j] == safetensors.F16ToFloat32(safetensors.Float32ToF16(x[j]))
					case Q8_0: // d = f16(amax/127), q = round(x·127/amax): |y − x| ≤ d/2 + 127·|d − amax/127|
						block := x[j/32*32 : j/32*32+32]
						amax := float32(0)
						for _, b := range block {
							amax = max(amax, float32(math.Abs(float64(b))))
						}
						ok = math.Abs(float64(y[j]-x[j])) <= float64(amax)/127*(0.5+127.0/2048)
					default:
						t.Fatalf("%s: type %s", ti.Name, ti.Type)
					}
					if !ok {
						t.Fatalf("%s (%s) element %d: %g, source %g", hf, ti.Type, j, y[j], x[j])
					}
				}
			}
		})
	}
}
