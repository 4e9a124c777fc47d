package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/models/lora"
	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// handAdapterConfig is adapter_config.json as PEFT 0.17's LoraConfig.save_pretrained writes it
// for a CAUSAL_LM adapter with rsLoRA, r 2, α 6 and model.norm trained in full (keys posttrain does
// not use included).
const handAdapterConfig = `{
  "alpha_pattern": {}, "auto_mapping": null, "base_model_name_or_path": "Qwen/Qwen2.5-0.5B", "bias": "none",
  "corda_config": null, "eva_config": null, "exclude_modules": null, "fan_in_fan_out": false, "inference_mode": true,
  "init_lora_weights": true, "layer_replication": null, "layers_pattern": null, "layers_to_transform": null,
  "loftq_config": {}, "lora_alpha": 6, "lora_bias": false, "lora_dropout": 0.05, "megatron_config": null,
  "megatron_core": "megatron.core", "modules_to_save": ["model.norm"], "peft_type": "LORA", "qalora_group_size": 16,
  "r": 2, "rank_pattern": {}, "revision": null, "target_modules": ["v_proj", "q_proj", "down_proj"],
  "task_type": "CAUSAL_LM", "trainable_token_indices": null, "use_dora": false, "use_qalora": false, "use_rslora": true
}`

// writeHandAdapter writes a PEFT adapter for the qwen2-tiny fixture (hidden 64, kv 2×16,
// intermediate 176, 2 layers) with random A and B (B stored bf16, as a bf16 PEFT run saves it)
// and returns the directory and the tensors as float32.
func writeHandAdapter(t *testing.T) (string, map[string][]float32) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "adapter")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, lora.ConfigName), []byte(handAdapterConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	vals := map[string][]float32{}
	var ts []*safetensors.Tensor
	add := func(name, dtype string, shape ...int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		f := make([]float32, n)
		for i := range f {
			f[i] = float32(rng.NormFloat64() * 0.1)
			if dtype == "BF16" {
				f[i] = safetensors.BF16ToFloat32(safetensors.Float32ToBF16(f[i]))
			}
		}
		vals[name] = f
		ts = append(ts, safetensors.FromFloat32s(name, shape, f, dtype))
	}
	for l := range 2 {
		for _, m := range []struct {
			name    string
			out, in int
		}{{"self_attn.q_proj", 64, 64}, {"self_attn.v_proj", 32, 64}, {"mlp.down_proj", 64, 176}} {
			p := fmt.Sprintf("base_model.model.model.layers.%d.%s.", l, m.name)
			add(p+"lora_A.weight", "F32", 2, m.in)
			add(p+"lora_B.weight", "BF16", m.out, 2)
		}
	}
	add("base_model.model.model.norm.weight", "F32", 64)
	for i := range vals["base_model.model.model.norm.weight"] {
		vals["base_model.model.model.norm.weight"][i] += 1
	}
	ts[len(ts)-1] = safetensors.FromFloat32s("base_model.model.model.norm.weight", []int{64}, vals["base_model.model.model.norm.weight"], "F32")
	if err := safetensors.WriteFile(filepath.Join(dir, lora.WeightsName), ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	return dir, vals
}

// expectedMerge writes the base checkpoint with W + (α/√r)·B·A (float64, computed here, not by
// models/lora) and model.norm replaced: the adapted model as a plain checkpoint.
func expectedMerge(t *testing.T, base string, vals map[string][]float32) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "expected")
	if err := os.CopyFS(dir, os.DirFS(base)); err != nil {
		t.Fatal(err)
	}
	stored, _, err := safetensors.ReadFile(filepath.Join(base, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	s := 6 / math.Sqrt(2)
	var out []*safetensors.Tensor
	for name, st := range stored {
		w, err := st.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		if a, ok := vals["base_model.model."+strings.TrimSuffix(name, ".weight")+".lora_A.weight"]; ok {
			b := vals["base_model.model."+strings.TrimSuffix(name, ".weight")+".lora_B.weight"]
			o, in := st.Shape[0], st.Shape[1]
			for i := range o {
				for j := range in {
					d := float64(b[2*i])*float64(a[j]) + float64(b[2*i+1])*float64(a[in+j])
					w[i*in+j] = float32(float64(w[i*in+j]) + s*d)
				}
			}
		}
		if name == "model.norm.weight" {
			w = vals["base_model.model.model.norm.weight"]
		}
		out = append(out, safetensors.FromFloat32s(name, st.Shape, w, "F32"))
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), out, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func scoreLogProbs(t *testing.T, args ...string) []float64 {
	t.Helper()
	got, err := runCLI(t, append([]string{"score", "--input", "../../models/testdata/qwen2-tiny/inputs/left_pad.json"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		TokenLogProbs [][]float64 `json:"token_logprobs"`
	}
	if err := json.Unmarshal([]byte(got), &rep); err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, row := range rep.TokenLogProbs {
		out = append(out, row...)
	}
	return out
}

// A hand-written adapter in PEFT's layout (rsLoRA, bf16 B, modules_to_save) applied with
// `score --adapter` gives the log-probs of the base with W + (α/√r)·B·A computed independently,
// and so does the checkpoint `posttrain merge` writes (≤ 1e-5, float32); `generate --adapter`
// runs with it; an adapter that does not fit the base is refused naming the tensor or module.
func TestPEFT_HandWrittenAdapterAndMerge(t *testing.T) {
	base := looptest.Fixture(t, "qwen2-tiny")
	adapter, vals := writeHandAdapter(t)
	want := scoreLogProbs(t, "--model", expectedMerge(t, base, vals))
	plain := scoreLogProbs(t, "--model", base)
	adapted := scoreLogProbs(t, "--model", base, "--adapter", adapter)
	merged := filepath.Join(t.TempDir(), "merged")
	if _, err := runCLI(t, "merge", "--model", base, "--adapter", adapter, "--output-dir", merged); err != nil {
		t.Fatal(err)
	}
	fromMerged := scoreLogProbs(t, "--model", merged)
	maxDiff := func(a, b []float64) float64 {
		if len(a) != len(b) {
			t.Fatalf("%d and %d log-probs", len(a), len(b))
		}
		d := 0.0
		for i := range a {
			d = math.Max(d, math.Abs(a[i]-b[i]))
		}
		return d
	}
	t.Logf("max |Δ log-prob|: score --adapter %.3g, merged checkpoint %.3g, base without adapter %.3g",
		maxDiff(adapted, want), maxDiff(fromMerged, want), maxDiff(plain, want))
	if d := maxDiff(adapted, want); d > 1e-5 {
		t.Errorf("score --adapter differs from the independently merged base by %g", d)
	}
	if d := maxDiff(fromMerged, want); d > 1e-5 {
		t.Errorf("posttrain merge's checkpoint differs from the independently merged base by %g", d)
	}
	if d := maxDiff(plain, want); d < 1e-3 {
		t.Fatalf("the adapter changes the log-probs by only %g: the test cannot tell", d)
	}
	if _, err := runCLI(t, "generate", "--model", base, "--adapter", adapter, "--prompt", "hi", "--max-new-tokens", "2"); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "eval", "mult", "--model", base, "--adapter", adapter, "--n", "2", "--max-new-tokens", "2"); err != nil {
		t.Fatal(err)
	}
	other := looptest.Fixture(t, "qwen3-tiny")
	for _, c := range []struct{ model, edit, want string }{
		{looptest.Model(t), "", "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight has shape [2 64]"},
		{other, "", "q_proj.lora_B.weight has shape [64 2], want [128 2] (the model's layer; an adapter of another base model?)"},
		{base, `"target_modules": ["c_attn"]`, `"c_attn" is not a linear layer of the qwen2 model`},
		{base, `"modules_to_save": ["q_norm"]`, `modules_to_save: module "q_norm" is not in the qwen2 model`},
		{base, `"use_dora": true`, "use_dora: DoRA is not supported"},
	} {
		dir := adapter
		if c.edit != "" {
			dir = filepath.Join(t.TempDir(), "edited")
			if err := os.CopyFS(dir, os.DirFS(adapter)); err != nil {
				t.Fatal(err)
			}
			key, _, _ := strings.Cut(c.edit, ":")
			cfg := handAdapterConfig
			i := strings.Index(cfg, key)
			j := i + strings.IndexAny(cfg[i:], ",}")
			if strings.Contains(cfg[i:j], "[") {
				j = i + strings.Index(cfg[i:], "]") + 1
			}
			if err := os.WriteFile(filepath.Join(dir, lora.ConfigName), []byte(cfg[:i]+c.edit+cfg[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := runCLI(t, "merge", "--model", c.model, "--adapter", dir, "--output-dir", filepath.Join(t.TempDir(), "m"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("adapter edit %q on %s: error %v, want one containing %q", c.edit, filepath.Base(c.model), err, c.want)
		}
	}
}

// An adapter whose tokenizer has more tokens than the base's embedding has rows is refused,
// naming both sizes, and nothing is written: merge copied the adapter's tokenizer onto the
// smaller base as is.
func TestMerge_AdapterTokenizerMustFitTheEmbedding(t *testing.T) {
	adapter, _ := writeHandAdapter(t)
	gz, err := os.ReadFile(filepath.Join(tokenizerFixture, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	tokJSON, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(adapter, "tokenizer.json"), tokJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(tinyFixture, "model")
	out := filepath.Join(t.TempDir(), "merged")
	rc, stdout, stderr := runFilesOut(t, "merge", "--model", base, "--adapter", adapter, "--output-dir", out)
	want := "its tokenizer.json has 151669 tokens, more than the 1024 rows of the base's embedding"
	if rc != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and one line containing %q", rc, stdout, stderr, want)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: %v; want nothing written", out, err)
	}
}
