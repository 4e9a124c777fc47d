package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/apps/demo"
)

// `posttrain grpo` trains a tiny checkpoint on the multiplication prompts and leaves the model,
// metrics.jsonl, completions.jsonl and training_args.yaml in --output-dir.
func TestGRPO_CLI(t *testing.T) {
	dir := t.TempDir()
	model, err := demo.WriteBase(dir, demo.ModelShape{Hidden: 16, Intermediate: 32, Layers: 1, Heads: 2, KVHeads: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run")
	got, err := runCLI(t, "grpo", "--model", model, "--dataset", "mult", "--reward", "mult_correct,mult_strict",
		"--reward-weights", "1,0.5", "--output-dir", out, "--max-steps", "2", "--logging-steps", "1",
		"--num-generations", "4", "--per-device-train-batch-size", "8", "--max-completion-length", "4", "--beta", "0.04")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "grpo: 2 steps") {
		t.Errorf("output %q", got)
	}
	for _, f := range []string{"model.safetensors", "config.json", "tokenizer.json", "metrics.jsonl", "completions.jsonl", "training_args.yaml"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	metrics, _ := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
	for _, k := range []string{`"rewards/mult_correct/mean"`, `"rewards/mult_strict/mean"`, `"kl"`, `"frac_reward_zero_std"`} {
		if !strings.Contains(string(metrics), k) {
			t.Errorf("metrics.jsonl lacks %s", k)
		}
	}
}

func TestGRPO_CLIErrors(t *testing.T) {
	for _, args := range [][]string{
		{"grpo", "--model", "m", "--dataset", "mult", "--output-dir", "o"},                                                 // no reward
		{"grpo", "--model", "m", "--dataset", "mult", "--output-dir", "o", "--reward", "nope"},                             // unknown reward
		{"grpo", "--model", "m", "--dataset", "mult", "--output-dir", "o", "--reward", "random", "--num-generations", "1"}, // G < 2
	} {
		if _, err := runCLI(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// --eval-dataset reaches GRPO through the CLI: eval lines (TRL's eval-mode names) at every
// eval_steps step, the eval completions next to completions.jsonl; a preference file or a missing
// file as the eval set is an error naming eval_dataset.
func TestGRPO_CLIEval(t *testing.T) {
	dir := t.TempDir()
	model, err := demo.WriteBase(dir, demo.ModelShape{Hidden: 16, Intermediate: 32, Layers: 1, Heads: 2, KVHeads: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	args := func(out string, extra ...string) []string {
		return append([]string{"grpo", "--model", model, "--dataset", "mult", "--reward", "mult_correct", "--output-dir", out,
			"--max-steps", "2", "--logging-steps", "1", "--num-generations", "4", "--per-device-train-batch-size", "8",
			"--max-completion-length", "4"}, extra...)
	}
	out := filepath.Join(dir, "run")
	if _, err := runCLI(t, args(out, "--eval-dataset", multData(t, dir, "grpo", "3"), "--eval-strategy", "steps",
		"--eval-steps", "1", "--per-device-eval-batch-size", "4")...); err != nil {
		t.Fatal(err)
	}
	var evalSteps []int
	for _, r := range metricsLines(t, out) {
		if _, ok := r.Metrics["eval_loss"]; !ok {
			continue
		}
		evalSteps = append(evalSteps, r.Step)
		for _, k := range []string{"eval_reward", "eval_rewards/mult_correct/mean", "eval_completions/mean_length", "eval_runtime"} {
			if _, ok := r.Metrics[k]; !ok {
				t.Errorf("eval line at step %d lacks %s", r.Step, k)
			}
		}
	}
	if !slices.Equal(evalSteps, []int{1, 2}) {
		t.Errorf("eval lines at steps %v, want 1, 2", evalSteps)
	}
	data, err := os.ReadFile(filepath.Join(out, "eval_completions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 2*3*4 {
		t.Errorf("eval_completions.jsonl has %d lines, want 2 evaluations × 3 prompts × 4 generations", n)
	}
	for _, bad := range []string{multData(t, dir, "dpo", "2"), filepath.Join(dir, "missing.jsonl")} {
		_, err := runCLI(t, args(filepath.Join(dir, "bad"), "--eval-dataset", bad, "--eval-on-start")...)
		if err == nil || !strings.Contains(err.Error(), "eval_dataset") {
			t.Errorf("eval set %s: error %v, want one naming eval_dataset", bad, err)
		}
	}
}

// A dataset column a reward cannot read fails at load, naming the file and line, before anything
// is generated (it failed at reward time after the first generation, without a line); the random
// reward is not called by that check, so its stream is untouched.
func TestGRPO_CLIRewardColumnCheckedAtLoad(t *testing.T) {
	dir := t.TempDir()
	model, err := demo.WriteBase(dir, demo.ModelShape{Hidden: 16, Intermediate: 32, Layers: 1, Heads: 2, KVHeads: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	ds := filepath.Join(dir, "p.jsonl")
	rows := `{"prompt": "3×4?", "answer": "12"}` + "\n" + `{"prompt": "2×5?", "answer": "10"}` + "\n" + `{"prompt": "7×3?", "answer": [21]}` + "\n"
	if err := os.WriteFile(ds, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run")
	_, err = runCLI(t, "grpo", "--model", model, "--dataset", ds, "--reward", "random,mult_correct", "--output-dir", out,
		"--max-steps", "1", "--num-generations", "2", "--per-device-train-batch-size", "2", "--max-completion-length", "2")
	if err == nil || !strings.Contains(err.Error(), ds+":3: reward mult_correct:") {
		t.Fatalf("want an error naming %s:3 and the reward, got %v", ds, err)
	}
	if _, err := os.Stat(filepath.Join(out, "completions.jsonl")); err == nil {
		t.Error("something was generated before the check")
	}
}
