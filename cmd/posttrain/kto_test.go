package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// --eval-dataset reaches every trainer through the CLI: KTO evaluates at each eval step with
// TRL's KTO metrics under "eval_" names (the eval set's own KL rows and reference log-probs);
// an eval set with eval_strategy no is not read at all (TRL's scripts pass no eval split then);
// a malformed eval row is an error naming the eval file's line.
func TestEvalDatasetCommands(t *testing.T) {
	dir := t.TempDir()
	model := looptest.Model(t)
	out := filepath.Join(dir, "kto")
	_, err := runCLI(t, "kto", "--model", model, "--dataset", multData(t, dir, "kto", "8"), "--output-dir", out,
		"--max-steps", "2", "--per-device-train-batch-size", "4", "--logging-steps", "1",
		"--eval-dataset", multData(t, t.TempDir(), "kto", "5"), "--eval-strategy", "steps", "--per-device-eval-batch-size", "2")
	if err != nil {
		t.Fatal(err)
	}
	var evalSteps []int
	for _, r := range metricsLines(t, out) {
		if _, ok := r.Metrics["eval_loss"]; !ok {
			continue
		}
		evalSteps = append(evalSteps, r.Step)
		for _, k := range []string{"eval_kl", "eval_rewards/chosen", "eval_rewards/rejected", "eval_rewards/margins", "eval_logps/chosen", "eval_logits/rejected"} {
			if _, ok := r.Metrics[k]; !ok {
				t.Errorf("kto eval line at step %d lacks %s: %v", r.Step, k, r.Metrics)
			}
		}
	}
	if !slices.Equal(evalSteps, []int{1, 2}) {
		t.Errorf("kto eval lines at steps %v, want 1, 2", evalSteps)
	}

	sftData := multData(t, dir, "sft", "4")
	out = filepath.Join(dir, "sft")
	if _, err := runCLI(t, "sft", "--model", model, "--dataset", sftData, "--output-dir", out, "--max-steps", "1",
		"--eval-dataset", filepath.Join(dir, "missing.jsonl")); err != nil {
		t.Fatalf("eval_strategy no with an eval set that does not exist: %v", err)
	}
	for _, r := range metricsLines(t, out) {
		if _, ok := r.Metrics["eval_loss"]; ok {
			t.Errorf("eval_strategy no wrote an eval line: %v", r)
		}
	}
	_, err = runCLI(t, "sft", "--model", model, "--dataset", sftData, "--output-dir", filepath.Join(dir, "bad"), "--max-steps", "1",
		"--eval-dataset", multData(t, dir, "dpo", "2"), "--eval-on-start")
	if err == nil || !strings.Contains(err.Error(), "eval_dataset") || !strings.Contains(err.Error(), "dpo.jsonl") {
		t.Errorf("preference rows as an SFT eval set: error %v, want one naming eval_dataset and the file", err)
	}
}
