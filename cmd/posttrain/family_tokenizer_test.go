package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/posttrain/posttrain/models/decoder"
)

// Every trainer runs on a Llama 3.2-shaped tiny checkpoint with Llama 3.1's real tokenizer and chat
// template (vocabulary 128,256, BOS written by the template): SFT 2 steps, DPO, KTO and GRPO a
// step, with finite metrics. (The resume, the driver's and family-blind, is checked here on Qwen3;
// on the released SmolLM2 and Gemma 3, Llama and Gemma 3 families, by make test-real.)
func TestTrainers_LlamaWithItsTokenizer(t *testing.T) {
	trainersWithTokenizer(t, "llama-3.2-tiny", filepath.Join("..", "..", "data", "tokenizer", "testdata", "llama3"), "llama", false)
}

// The same on a Qwen3-shaped tiny checkpoint (q/k norms, head_dim 32) with Qwen3's real tokenizer
// and tokenizer_config.json (vocabulary 151,669, no BOS, eos <|im_end|>, Qwen3's chat template with
// its empty <think> block on the last assistant turn): data/tokenizer/testdata is Qwen3's. SFT 2
// steps straight equals 1 step then --resume to 2, in weights and metrics.
func TestTrainers_Qwen3WithItsTokenizer(t *testing.T) {
	trainersWithTokenizer(t, "qwen3-tiny", filepath.Join("..", "..", "data", "tokenizer", "testdata"), "qwen3", true)
}

// trainersWithTokenizer inits preset with the tokenizer directory tok (the vocabulary follows it)
// into DIR/model and runs SFT for 2 steps into DIR/sft (with resume, also 1 step then --resume to
// 2 into DIR/sft-resumed: weights bit for bit, metrics equal), then DPO, KTO and GRPO (one step
// each, finite metrics) on it; every saved model keeps model_type. It returns DIR.
func trainersWithTokenizer(t *testing.T, preset, tok, modelType string, resume bool) string {
	t.Helper()
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	if _, err := runCLI(t, "init", "--preset", preset, "--tokenizer", tok, "--out", model); err != nil {
		t.Fatal(err)
	}
	// Without gradient checkpointing, for time: the checkpointed head recomputes the logits over
	// the real vocabulary (151k-262k), and checkpointing is not what these runs check (the CLI's
	// default checkpointed runs are the other trainer commands' tests).
	common := []string{"--model", model, "--per-device-train-batch-size", "2", "--logging-steps", "1", "--learning-rate", "1e-3", "--lr-scheduler-type", "constant",
		"--gradient-checkpointing=false"}
	sft := multData(t, dir, "sft", "8")
	straight, resumed := filepath.Join(dir, "sft"), filepath.Join(dir, "sft-resumed")
	if _, err := runCLI(t, append([]string{"sft", "--dataset", sft, "--output-dir", straight, "--max-steps", "2"}, common...)...); err != nil {
		t.Fatal(err)
	}
	if recs := metricsLines(t, straight); len(recs) != 2 || math.IsNaN(recs[1].Metrics["loss"]) || math.IsInf(recs[1].Metrics["loss"], 0) {
		t.Errorf("sft: metrics %v", recs)
	}
	if !resume {
		return trainOthers(t, dir, model, modelType, common)
	}
	if _, err := runCLI(t, append([]string{"sft", "--dataset", sft, "--output-dir", resumed, "--max-steps", "1"}, common...)...); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, append([]string{"sft", "--dataset", sft, "--output-dir", resumed, "--max-steps", "2", "--resume", "--resume-override", "max_steps"}, common...)...); err != nil {
		t.Fatal(err)
	}
	a, errA := os.ReadFile(filepath.Join(straight, "model.safetensors"))
	b, errB := os.ReadFile(filepath.Join(resumed, "model.safetensors"))
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Errorf("SFT resumed to step 2 differs from 2 steps straight (%v, %v)", errA, errB)
	}
	sa, sb := metricsLines(t, straight), metricsLines(t, resumed)
	if len(sa) != 2 || len(sb) != 2 || sa[1].Metrics["loss"] != sb[1].Metrics["loss"] || sa[1].Metrics["grad_norm"] != sb[1].Metrics["grad_norm"] {
		t.Errorf("metrics straight %v, resumed %v", sa, sb)
	}
	return trainOthers(t, dir, model, modelType, common)
}

// trainOthers runs DPO, KTO and GRPO one step each on model into dir/KIND: finite metrics, the
// saved model keeps model_type. It returns dir.
func trainOthers(t *testing.T, dir, model, modelType string, common []string) string {
	t.Helper()
	for _, kind := range []string{"dpo", "kto", "grpo"} {
		out := filepath.Join(dir, kind)
		args := append([]string{kind, "--dataset", multData(t, dir, kind, "4"), "--output-dir", out, "--max-steps", "1"}, common...)
		if kind == "grpo" {
			args = append(args, "--num-generations", "2", "--max-completion-length", "4", "--reward", "mult_correct")
		}
		if _, err := runCLI(t, args...); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if cfg, err := decoder.ReadConfig(out); err != nil || cfg.ModelType != modelType {
			t.Errorf("%s: saved model: %v (want model_type %s)", kind, err, modelType)
		}
		recs := metricsLines(t, out)
		if len(recs) != 1 {
			t.Fatalf("%s: %d metrics lines", kind, len(recs))
		}
		for k, v := range recs[0].Metrics {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("%s: %s = %v", kind, k, v)
			}
		}
	}
	return dir
}
