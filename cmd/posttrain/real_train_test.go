package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/lora"
)

// realTrainEnv turns on TestRealModels_Train: `make test-real` sets it (after scripts/real-models.sh);
// `make test` leaves it off, since on 2 cores the run takes minutes beyond make test's budget.
const realTrainEnv = "POSTTRAIN_REAL_TRAIN"

// realCheckpoint is the HF checkpoint scripts/real-models.sh converted from a released GGUF.
func realCheckpoint(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join("..", "..", ".real-models", name)
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		t.Skipf("%s is absent: scripts/real-models.sh fetches and converts it", dir)
	}
	return dir
}

// standardMult writes the multiplication rows of kind in the standard (plain text) format, for a
// base model without a chat template (Gemma 3 270M): "What is a×b? " then the answer.
func standardMult(t *testing.T, dir, kind string) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i, p := range [][2]int{{6, 4}, {10, 5}, {7, 3}, {12, 2}} {
		prompt, right, wrong := "What is "+strconv.Itoa(p[0])+"×"+strconv.Itoa(p[1])+"? The answer is", " "+strconv.Itoa(p[0]*p[1]), " "+strconv.Itoa(p[0]*p[1]+1+i)
		switch kind {
		case "sft":
			_ = enc.Encode(map[string]any{"prompt": prompt, "completion": right})
		case "dpo":
			_ = enc.Encode(map[string]any{"prompt": prompt, "chosen": right, "rejected": wrong})
		case "kto":
			_ = enc.Encode(map[string]any{"prompt": prompt, "completion": right, "label": true})
			_ = enc.Encode(map[string]any{"prompt": prompt, "completion": wrong, "label": false})
		case "grpo":
			_ = enc.Encode(map[string]any{"prompt": prompt, "answer": strconv.Itoa(p[0] * p[1])})
		}
	}
	path := filepath.Join(dir, kind+"-standard.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The released SmolLM2-135M-Instruct (its own tokenizer and chat template, conversational rows)
// and Gemma 3 270M (a base model: plain-text rows, BOS from its tokenizer) train with every
// method for two optimizer steps, and a run resumed from the first step's checkpoint ends with the
// same bytes and the same second-step metrics as the run that never stopped. SmolLM2's SFT is a
// full fine-tune with gradient checkpointing (the default); the other runs train a LoRA adapter
// without it (the realistic way to post-train a pretrained model on a CPU, and small checkpoints). On the default backend (xla:cpu where its
// plugin is installed).
func TestRealModels_Train(t *testing.T) {
	if os.Getenv(realTrainEnv) == "" {
		t.Skipf("set %s=1 (make test-real) to train the released models; it takes minutes", realTrainEnv)
	}
	peft := []string{"--use-peft", "--lora-r", "8", "--lora-alpha", "16", "--lora-target-modules", "q_proj,v_proj"}
	for _, m := range []struct {
		name, dir string
		chat      bool
	}{
		{"smollm2", "SmolLM2-135M-Instruct.Q4_1", true},
		{"gemma3", "gemma-3-270m-q4_k_m", false},
	} {
		t.Run(m.name, func(t *testing.T) {
			model := realCheckpoint(t, m.dir)
			dir := t.TempDir()
			for _, method := range []string{"sft", "dpo", "kto", "grpo"} {
				t.Run(method, func(t *testing.T) {
					data := standardMult(t, dir, method)
					if m.chat {
						data = multData(t, dir, method, "4")
					}
					args := func(out string, extra ...string) []string {
						a := []string{method, "--model", model, "--dataset", data, "--output-dir", out, "--max-steps", "2",
							"--save-steps", "1", "--logging-steps", "1", "--per-device-train-batch-size", "2",
							"--learning-rate", "1e-4", "--lr-scheduler-type", "constant", "--seed", "3"}
						switch method {
						case "dpo", "kto":
							a = append(a, "--max-length", "64", "--max-prompt-length", "32")
						case "grpo":
							a = append(a, "--reward", "mult_correct", "--num-generations", "2", "--max-completion-length", "6",
								"--beta", "0.04", "--temperature", "1")
						}
						if method != "sft" || !m.chat {
							// The adapters train without gradient checkpointing, for time (it made this
							// test 300 s longer): SmolLM2's full SFT runs with it (TRL's default) and
							// resumes bit for bit, and every tiny trainer's tests run with it, LoRA's too.
							a = append(a, peft...)
							a = append(a, "--gradient-checkpointing=false")
						}
						return append(a, extra...)
					}
					a, b := filepath.Join(dir, method+"-a"), filepath.Join(dir, method+"-b")
					if _, err := runCLI(t, args(a)...); err != nil {
						t.Fatal(err)
					}
					recs := metricsLines(t, a)
					if len(recs) != 2 {
						t.Fatalf("%d metrics lines, want 2", len(recs))
					}
					for _, r := range recs {
						for _, k := range []string{"loss", "grad_norm"} {
							if v, ok := r.Metrics[k]; !ok || v != v {
								t.Errorf("step %d: %s = %v", r.Step, k, v)
							}
						}
					}
					if method != "grpo" && recs[0].Metrics["grad_norm"] == 0 {
						t.Errorf("step 1 has no gradient: %v", recs[0].Metrics)
					}
					if _, err := runCLI(t, args(b, "--resume-from-checkpoint", filepath.Join(a, "checkpoint-1"))...); err != nil {
						t.Fatal(err)
					}
					weights := "model.safetensors"
					if method != "sft" || !m.chat {
						weights = lora.WeightsName
					}
					for _, f := range []string{weights, filepath.Join("checkpoint-2", "optimizer.safetensors")} {
						x, err1 := os.ReadFile(filepath.Join(a, f))
						y, err2 := os.ReadFile(filepath.Join(b, f))
						if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
							t.Errorf("%s of the resumed run differs from the uninterrupted run's (%v, %v)", f, err1, err2)
						}
					}
					resumed := metricsLines(t, b)
					if len(resumed) != 1 || !sameMetrics(resumed[0], recs[1]) {
						t.Errorf("resumed step %v, want %v", resumed, recs[1])
					}
					if method == "grpo" && m.chat {
						// SmolLM2's chat template rendered the prompts: ChatML turns with its system prompt.
						c, err := os.ReadFile(filepath.Join(a, runlog.CompletionsName))
						if err != nil {
							t.Fatal(err)
						}
						var first struct {
							Prompt string `json:"prompt"`
						}
						line, _, _ := strings.Cut(string(c), "\n")
						if err := json.Unmarshal([]byte(line), &first); err != nil || !strings.Contains(first.Prompt, "<|im_start|>user\n") {
							t.Errorf("completions.jsonl's first prompt %q (%v) does not show the chat template's turns", first.Prompt, err)
						}
					}
				})
			}
		})
	}
}

// sameMetrics reports whether two log lines agree on every metric but the timings.
func sameMetrics(a, b runlog.Record) bool {
	if a.Step != b.Step || len(a.Metrics) != len(b.Metrics) {
		return false
	}
	for k, v := range a.Metrics {
		if strings.HasPrefix(k, "timing_s/") || strings.HasPrefix(k, "tokens_per_s/") {
			continue
		}
		if w, ok := b.Metrics[k]; !ok || (v != w && !(v != v && w != w)) {
			return false
		}
	}
	return true
}
