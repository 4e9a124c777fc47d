package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/models/lora"
	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// `posttrain sft --use-peft` writes PEFT's files (adapter_config.json with LoraConfig's fields,
// adapter_model.safetensors with PEFT's tensor names, the tokenizer files; no base weights) in
// its checkpoints and output, its loss falls, and a run resumed from its checkpoint (dropout
// masks included) ends with the same adapter bit for bit and the same metrics.
func TestPEFT_SFTFilesAndExactResume(t *testing.T) {
	dir := t.TempDir()
	model := looptest.Model(t)
	data := multData(t, dir, "sft", "8")
	args := func(out string, extra ...string) []string {
		return append([]string{"sft", "--model", model, "--dataset", data, "--output-dir", out, "--max-steps", "4",
			"--save-steps", "2", "--logging-steps", "1", "--per-device-train-batch-size", "2", "--learning-rate", "5e-3",
			"--use-peft", "--lora-r", "4", "--lora-alpha", "8", "--lora-dropout", "0.1", "--lora-target-modules", "all-linear"}, extra...)
	}
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if _, err := runCLI(t, args(a)...); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{a, filepath.Join(a, "checkpoint-2")} {
		for _, f := range []string{lora.ConfigName, lora.WeightsName, "tokenizer.json", "tokenizer_config.json"} {
			if _, err := os.Stat(filepath.Join(d, f)); err != nil {
				t.Errorf("%s: %v", d, err)
			}
		}
		if _, err := os.Stat(filepath.Join(d, "model.safetensors")); err == nil {
			t.Errorf("%s holds base weights (model.safetensors)", d)
		}
	}
	var ac map[string]any
	raw, err := os.ReadFile(filepath.Join(a, lora.ConfigName))
	if err != nil || json.Unmarshal(raw, &ac) != nil {
		t.Fatalf("adapter_config.json: %v %s", err, raw)
	}
	targets := []any{"down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"}
	for k, want := range map[string]any{"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": model, "r": 4.0,
		"lora_alpha": 8.0, "lora_dropout": 0.1, "bias": "none", "use_rslora": false, "modules_to_save": nil, "use_dora": false} {
		if got := ac[k]; got != want {
			t.Errorf("adapter_config.json %s = %v, want %v", k, got, want)
		}
	}
	if got, _ := ac["target_modules"].([]any); !slices.Equal(got, targets) {
		t.Errorf("target_modules %v, want %v", ac["target_modules"], targets)
	}
	ts, _, err := safetensors.ReadFile(filepath.Join(a, lora.WeightsName))
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2*7*2 {
		t.Errorf("%d adapter tensors, want lora_A and lora_B of 7 layers × 2 blocks", len(ts))
	}
	for _, name := range []string{"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
		"base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"} {
		if ts[name] == nil || ts[name].DType != "F32" {
			t.Errorf("adapter_model.safetensors lacks %s (F32)", name)
		}
	}
	recs := metricsLines(t, a)
	if len(recs) != 4 || !(recs[3].Metrics["loss"] < recs[0].Metrics["loss"]) {
		t.Fatalf("metrics %v: want 4 lines with a falling loss", recs)
	}
	if _, err := runCLI(t, "generate", "--model", model, "--adapter", a, "--prompt", "2×3", "--max-new-tokens", "2"); err != nil {
		t.Fatalf("generate with the trained adapter: %v", err)
	}
	if _, err := runCLI(t, args(b, "--resume-from-checkpoint", filepath.Join(a, "checkpoint-2"))...); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{lora.WeightsName, filepath.Join("checkpoint-4", "optimizer.safetensors")} {
		x, err1 := os.ReadFile(filepath.Join(a, f))
		y, err2 := os.ReadFile(filepath.Join(b, f))
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Errorf("%s of the resumed run differs from the uninterrupted run's (%v, %v)", f, err1, err2)
		}
	}
	resumed := metricsLines(t, b)
	if len(resumed) != 2 || resumed[1].Metrics["loss"] != recs[3].Metrics["loss"] || resumed[1].Metrics["grad_norm"] != recs[3].Metrics["grad_norm"] {
		t.Errorf("resumed metrics %v, want steps 3 and 4 of %v", resumed, recs)
	}
}

// DPO and KTO train a LoRA adapter (--use-peft; the reference is the base with the adapter
// disabled) and their loss falls; GRPO with β > 0 runs with one and writes the adapter files.
func TestPEFT_DPOKTOGRPO(t *testing.T) {
	dir := t.TempDir()
	model := looptest.Model(t)
	peft := []string{"--use-peft", "--lora-r", "8", "--lora-alpha", "16", "--lora-target-modules", "q_proj,k_proj,v_proj,o_proj"}
	for _, kind := range []string{"dpo", "kto"} {
		out := filepath.Join(dir, kind)
		args := append([]string{kind, "--model", model, "--dataset", multData(t, dir, kind, "4"), "--output-dir", out,
			"--max-steps", "4", "--per-device-train-batch-size", "8", "--logging-steps", "1", "--learning-rate", "1e-2",
			"--lr-scheduler-type", "constant", "--beta", "1"}, peft...)
		if _, err := runCLI(t, args...); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		recs := metricsLines(t, out)
		if len(recs) != 4 || !(recs[3].Metrics["loss"] < recs[0].Metrics["loss"]) {
			t.Errorf("%s: metrics %v, want 4 lines with a falling loss", kind, recs)
		}
		for _, r := range recs {
			t.Logf("%s step %d loss %.6g", kind, r.Step, r.Metrics["loss"])
		}
		if _, err := os.Stat(filepath.Join(out, lora.WeightsName)); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
	}
	out := filepath.Join(dir, "grpo")
	if _, err := runCLI(t, append([]string{"grpo", "--model", model, "--dataset", "mult", "--reward", "mult_correct",
		"--output-dir", out, "--max-steps", "1", "--num-generations", "4", "--per-device-train-batch-size", "8",
		"--max-completion-length", "4", "--beta", "0.04"}, peft...)...); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, lora.ConfigName)); err != nil {
		t.Error(err)
	}
	_, err := runCLI(t, "grpo", "--model", model, "--dataset", "mult", "--reward", "mult_correct", "--output-dir", filepath.Join(dir, "bad"),
		"--use-peft", "--lora-target-modules", "qkv_proj")
	if err == nil || !strings.Contains(err.Error(), `lora_target_modules (--lora-target-modules): "qkv_proj" is not a linear layer`) {
		t.Errorf("an unknown target module: error %v", err)
	}
}
