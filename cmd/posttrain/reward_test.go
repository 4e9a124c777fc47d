package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// `posttrain reward` trains a reward model with TRL's metric names (eval ones too) and writes an
// HF sequence-classification checkpoint; `posttrain score-reward` scores texts and preference rows
// with it (each pair's rewards, then the ranking accuracy) and refuses a causal LM.
func TestRewardCommands(t *testing.T) {
	dir := t.TempDir()
	model := looptest.Model(t)
	out := filepath.Join(dir, "rm")
	prefs := multData(t, dir, "dpo", "6")
	stdout, err := runCLI(t, "reward", "--model", model, "--dataset", prefs, "--output-dir", out,
		"--max-steps", "2", "--per-device-train-batch-size", "3", "--logging-steps", "1",
		"--eval-dataset", prefs, "--eval-strategy", "steps", "--eval-steps", "2", "--center-rewards-coefficient", "0.01")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout, "reward: 2 steps") {
		t.Errorf("stdout %q", stdout)
	}
	recs := metricsLines(t, out)
	for _, k := range []string{"loss", "accuracy", "margin", "min_reward", "mean_reward", "max_reward", "num_tokens", "grad_norm", "learning_rate"} {
		if _, ok := recs[0].Metrics[k]; !ok {
			t.Errorf("step 1 lacks %s: %v", k, recs[0].Metrics)
		}
	}
	if _, ok := recs[len(recs)-1].Metrics["eval_accuracy"]; !ok {
		t.Errorf("the last line is no eval line with eval_accuracy: %v", recs[len(recs)-1])
	}
	var conf struct {
		Architectures []string          `json:"architectures"`
		ID2Label      map[string]string `json:"id2label"`
		PadTokenID    *int              `json:"pad_token_id"`
	}
	raw, err := os.ReadFile(filepath.Join(out, "config.json"))
	if err != nil || json.Unmarshal(raw, &conf) != nil {
		t.Fatalf("config.json: %v", err)
	}
	if len(conf.Architectures) != 1 || conf.Architectures[0] != "Qwen2ForSequenceClassification" || len(conf.ID2Label) != 1 || conf.PadTokenID == nil {
		t.Errorf("config.json: %+v", conf)
	}

	stdout, err = runCLI(t, "score-reward", "--model", out, "--dataset", prefs, "--batch", "4")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 7 || !strings.Contains(lines[0], `"chosen":`) || !strings.Contains(lines[6], `"accuracy":`) || !strings.Contains(lines[6], `"pairs":6`) {
		t.Errorf("score-reward --dataset printed %q, want 6 rows and a summary", stdout)
	}
	stdout, err = runCLI(t, "score-reward", "--model", out, "--text", "7×8 is 56", "--text", "7×8 is 54")
	if err != nil || strings.Count(stdout, `"reward":`) != 2 {
		t.Errorf("score-reward --text: %q, %v", stdout, err)
	}
	if _, err := runCLI(t, "score-reward", "--model", model, "--text", "x"); err == nil || !strings.Contains(err.Error(), "causal LM") {
		t.Errorf("score-reward on a causal LM: %v, want an error naming it", err)
	}
	if _, err := runCLI(t, "score-reward", "--model", out); err == nil || !strings.Contains(err.Error(), "--text") {
		t.Errorf("score-reward without input: %v", err)
	}

	// GRPO with the reward model, mixed with a verifier reward and weighted (models first).
	gout := filepath.Join(dir, "grpo")
	if _, err := runCLI(t, "grpo", "--model", model, "--dataset", "mult", "--reward-model", out, "--reward", "mult_correct",
		"--reward-weights", "0.5,1", "--output-dir", gout, "--max-steps", "1", "--logging-steps", "1",
		"--num-generations", "2", "--per-device-train-batch-size", "4", "--max-completion-length", "3"); err != nil {
		t.Fatal(err)
	}
	m := metricsLines(t, gout)[0].Metrics
	rm, mc := m["rewards/rm/mean"], m["rewards/mult_correct/mean"]
	if _, ok := m["rewards/rm/std"]; !ok || math.Abs(m["reward"]-(0.5*rm+mc)) > 1e-6 {
		t.Errorf("grpo metrics: reward %v, rewards/rm/mean %v, rewards/mult_correct/mean %v; want reward = 0.5·rm + mult_correct", m["reward"], rm, mc)
	}
	if _, err := runCLI(t, "grpo", "--model", model, "--dataset", "mult", "--reward-model", out, "--reward", "mult_correct",
		"--reward-weights", "1", "--output-dir", filepath.Join(dir, "g2"), "--max-steps", "1"); err == nil || !strings.Contains(err.Error(), "reward-weights") {
		t.Errorf("one weight for a reward model and a function: %v", err)
	}
}
