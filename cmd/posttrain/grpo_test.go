package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/trainers/demo"
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
