package lora_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/lora"
	"github.com/posttrain/posttrain/models/safetensors"
)

// PEFTSet holds the adapters PEFT 0.21.2 saved and the goldens it computed
// (scripts/reference/peft_adapters.py, `make reference`).
const PEFTSet = "../testdata/peft-0.21.2"

// PEFTCases are the adapters of PEFTSet: name, base checkpoint (with its inputs/), and what
// posttrain must resolve from adapter_config.json: the number of adapted layers, of modules_to_save
// tensors, and the scale s.
var PEFTCases = []struct {
	Name, Base    string
	Layers, Saved int
	Scaling       float64
}{
	{"qwen2-default", "../testdata/hf-4.57.6/qwen2", 4, 0, 1},            // PEFT's defaults: r 8, α 8, q_proj and v_proj
	{"qwen3-rslora-all-linear", "../testdata/hf-4.57.6/qwen3", 14, 0, 4}, // α/√r = 8/2, target_modules as PEFT resolves all-linear (full paths)
	{"smollm2-attn-lm-head", "../testdata/hf-4.57.6/smollm2", 8, 1, 2},   // q,k,v,o; the untied lm_head in full
	{"gemma3-mlp-norm", "../testdata/hf-4.57.6/gemma3", 6, 13, 4},        // "norm" ends 13 norm modules' paths (PEFT's endswith)
	{"posttrain-sft", "../testdata/qwen2-tiny", 14, 0, 4},                // written by `posttrain sft --use-peft` (rsLoRA, r 4, α 8, all-linear)
}

// peftExpected is the part of an expected/NAME.DTYPE.json that posttrain's Report has.
type peftExpected struct {
	Oracle           string      `json:"oracle"`
	TokenPositions   [][]int     `json:"token_positions"`
	TokenLogProbs    [][]float64 `json:"token_logprobs"`
	Loss             float64     `json:"loss"`
	LastLogitsFirst8 [][]float64 `json:"last_logits_first8"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// maxDiff is the largest |a−b| over the log-probs, the loss and the last logits.
func maxDiff(t *testing.T, got *decoder.Report, want peftExpected) float64 {
	t.Helper()
	if !slices.EqualFunc(got.TokenPositions, want.TokenPositions, slices.Equal) {
		t.Fatalf("scored positions %v, want %v", got.TokenPositions, want.TokenPositions)
	}
	d := math.Abs(got.Loss - want.Loss)
	for r := range want.TokenLogProbs {
		for i, w := range want.TokenLogProbs[r] {
			d = max(d, math.Abs(got.TokenLogProbs[r][i]-w))
		}
		for i, w := range want.LastLogitsFirst8[r] {
			d = max(d, math.Abs(got.LastLogitsFirst8[r][i]-w))
		}
	}
	return d
}

// posttrain loads each adapter that PEFT 0.21.2 saved (get_peft_model, save_pretrained: PEFT's
// defaults, rsLoRA on all-linear, modules_to_save of an untied lm_head and of every norm) and the
// one `posttrain sft --use-peft` wrote, and its float32 forward gives the log-probs, loss and last
// logits of PeftModel.from_pretrained's float64 forward within 1e-5 (the families' tolerance
// against transformers, TestHFFamilies_MatchTransformers) on left-padded, right-padded and single
// rows. So that a silently ignored adapter cannot pass, PEFT's numbers are also checked to be at
// least 100× the tolerance away from the base model's (transformers' goldens beside the base).
func TestPEFT_LoadsPEFTAdaptersWithPEFTsLogProbs(t *testing.T) {
	b := backend.SharedForTests()
	const tol = 1e-5
	for _, c := range PEFTCases {
		t.Run(c.Name, func(t *testing.T) {
			ctx, cfg, err := decoder.Load(filepath.Join(c.Base, "model"), dtypes.Float32)
			if err != nil {
				t.Fatal(err)
			}
			a, err := lora.Load(ctx, cfg, filepath.Join(PEFTSet, c.Name, "adapter"))
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Modules()) != c.Layers || len(a.Saved()) != c.Saved || a.Config.Scaling() != c.Scaling {
				t.Fatalf("%d adapted layers, %d modules_to_save tensors, s = %g; want %d, %d, %g",
					len(a.Modules()), len(a.Saved()), a.Config.Scaling(), c.Layers, c.Saved, c.Scaling)
			}
			inputs, _ := filepath.Glob(filepath.Join(c.Base, "inputs", "*.json"))
			if len(inputs) == 0 {
				t.Fatalf("no inputs in %s", c.Base)
			}
			for _, in := range inputs {
				name := filepath.Base(in[:len(in)-len(".json")])
				batch, _, err := decoder.ReadBatchJSON(in)
				if err != nil {
					t.Fatal(err)
				}
				res, err := decoder.Score(b, ctx, cfg, batch, false)
				if err != nil {
					t.Fatal(err)
				}
				var want, base peftExpected
				readJSON(t, filepath.Join(PEFTSet, c.Name, "expected", name+".float64.json"), &want)
				readJSON(t, filepath.Join(c.Base, "expected", name+".float64.json"), &base)
				got := res.Report(batch)
				d := maxDiff(t, got, want)
				moved := maxDiff(t, &decoder.Report{TokenPositions: base.TokenPositions, TokenLogProbs: base.TokenLogProbs,
					Loss: base.Loss, LastLogitsFirst8: base.LastLogitsFirst8}, want)
				t.Logf("%s: max |posttrain − PEFT| %.3g; the adapter moves PEFT's numbers by %.3g from the base's (%s)", name, d, moved, want.Oracle)
				if !(d <= tol) {
					t.Errorf("%s: posttrain differs from PEFT by %g > %g", name, d, tol)
				}
				if !(moved >= 100*tol) {
					t.Errorf("%s: the adapter moves PEFT's numbers only %g from the base's: the case checks nothing", name, moved)
				}
			}
		})
	}
}

// The adapter posttrain wrote and PEFT was given (posttrain-sft: PEFT's log-probs are the
// goldens above) is what posttrain writes today: read and written back with WriteFiles, both files
// are byte for byte the committed ones.
func TestPEFT_PosttrainAdapterIsWhatPosttrainWrites(t *testing.T) {
	src := filepath.Join(PEFTSet, "posttrain-sft", "adapter")
	ctx, cfg, err := decoder.Load("../testdata/qwen2-tiny/model", dtypes.Float32)
	if err != nil {
		t.Fatal(err)
	}
	a, err := lora.Load(ctx, cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	vars, names, err := a.Vars(ctx)
	if err != nil {
		t.Fatal(err)
	}
	weights := make([]*safetensors.Tensor, len(vars))
	for i, v := range vars {
		f, err := decoder.Float32s(v.MustValue())
		if err != nil {
			t.Fatal(err)
		}
		weights[i] = safetensors.FromFloat32s(names[i], v.Shape().Dimensions, f, "F32")
	}
	dir := t.TempDir()
	if err := a.WriteFiles(dir, weights); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{lora.ConfigName, lora.WeightsName} {
		got, err1 := os.ReadFile(filepath.Join(dir, f))
		want, err2 := os.ReadFile(filepath.Join(src, f))
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Errorf("%s written back differs from the committed one (%v, %v): regenerate it (scripts/reference/peft_hf_check.py --write-adapter, then make reference)", f, err1, err2)
		}
	}
}

// The LoRA variants of PEFT 0.21.2's LoraConfig that change the forward pass, which posttrain does
// not implement, are refused naming the file and the key when set in an adapter_config.json that
// PEFT wrote (where they are null or false); the file as PEFT wrote it reads.
func TestPEFT_RefusesVariants(t *testing.T) {
	src := filepath.Join(PEFTSet, "qwen2-default", "adapter", lora.ConfigName)
	var fc map[string]any
	readJSON(t, src, &fc)
	for key, val := range map[string]any{
		"target_parameters": []string{"mlp.experts.gate_up_proj"}, "trainable_token_indices": []int{3, 4},
		"alora_invocation_tokens": []int{7}, "use_qalora": true, "kasa_config": map[string]any{},
		"monteclora_config": map[string]any{"monteclora_n": 8}, "use_bdlora": map[string]any{}, "arrow_config": map[string]any{"top_k": 2},
		"use_dora": true, "rank_pattern": map[string]any{"q_proj": 4}, "layers_to_transform": []int{0},
	} {
		if v, ok := fc[key]; !ok || !(v == nil || v == false || reflectEmptyMap(v)) {
			t.Fatalf("PEFT's %s has %s = %v: want the key, unset", src, key, v)
		}
		for _, set := range []any{nil, val} {
			m := maps.Clone(fc)
			if set != nil {
				m[key] = set
			}
			dir := t.TempDir()
			data, _ := json.Marshal(m)
			if err := os.WriteFile(filepath.Join(dir, lora.ConfigName), data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := lora.ReadConfig(dir)
			switch {
			case set == nil && err != nil:
				t.Errorf("PEFT's own file: %v", err)
			case set != nil && (err == nil || !strings.Contains(err.Error(), filepath.Join(dir, lora.ConfigName)+": "+key+": ")):
				t.Errorf("%s = %v: error %v, want one naming the file and the key", key, set, err)
			}
		}
	}
}

func reflectEmptyMap(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 0
}
